import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { seedProject, startTestServer, type TestServer } from "./helpers/server";
import { startInferd, tempDir, waitFor, cleanup } from "./helpers/proc";
import { jsonDepth } from "../src/http";
import { normalisePath } from "../src/auth/service";

/**
 * What a security probe of the running server found, one test per finding with the request that
 * reproduced it: deep JSON, path variants around the auth gate, sessions that outlive the token,
 * a malformed Origin, IPv4 addresses inside IPv6 webhook URLs, and per-project job storage.
 */

/** Sends one raw HTTP/1.1 request (no client-side path clean-up) and returns the status. */
async function rawStatus(
  port: number,
  method: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<number> {
  const { promise, resolve, reject } = Promise.withResolvers<number>();
  let buf = "";
  const sock = await Bun.connect({
    hostname: "127.0.0.1",
    port,
    socket: {
      data(s, d) {
        buf += new TextDecoder().decode(d);
        const m = /^HTTP\/1\.1 (\d{3})/.exec(buf);
        if (m) {
          resolve(Number(m[1]));
          s.end();
        }
      },
      error: (_s, e) => reject(e),
      close: () => reject(new Error(`connection closed before a status line for ${method} ${path}`)),
    },
  });
  const head = Object.entries({ host: `127.0.0.1:${port}`, "content-length": "0", connection: "close", ...headers })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("");
  sock.write(`${method} ${path} HTTP/1.1\r\n${head}\r\n`);
  return promise;
}

let s: TestServer;
let ctx: Awaited<ReturnType<typeof seedProject>>;
beforeAll(async () => {
  s = await startTestServer({ INFERD_MAX_JOB_BYTES_PER_PROJECT: "4000" });
  ctx = await seedProject(s, "Hard", "hard");
});
afterAll(async () => {
  await s.close();
  await cleanup();
});

describe("deeply nested JSON", () => {
  const deep = "[".repeat(30_000) + "]".repeat(30_000);

  test("is refused before parsing on every plane, with the limit named; the server stays responsive", async () => {
    const probe = await startInferd();
    try {
      const started = Date.now();
      const bad = fetch(`${probe.url}/admin/session`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: deep,
      });
      const health = fetch(`${probe.url}/healthz`).then(() => Date.now() - started);
      const r = await bad;
      expect(r.status).toBe(400);
      const text = await r.text();
      expect(JSON.parse(text).error).toEqual({
        code: "invalid_json",
        message: "the request body nests JSON deeper than 64 levels, the limit",
      });
      expect(text.length).toBeLessThan(200); // the rejected body is never echoed
      expect(await health).toBeLessThan(200);
      const rss = Number(/VmRSS:\s+(\d+)/.exec(await Bun.file(`/proc/${probe.proc.pid}/status`).text())![1]) * 1024;
      expect(rss).toBeLessThan(300 << 20);
    } finally {
      await probe.stop();
    }
  });

  test("on the data plane and the jobs route it is a 400, not a 502", async () => {
    await s.admin("/admin/projects/hard/workloads", { body: { name: "w", backend: "ollama", model_name: "m" } });
    for (const path of ["/endpoint/hard/w/v1/chat/completions", "/endpoint/hard/w/jobs"]) {
      const r = await s.call(path, ctx.live, { raw: deep, headers: { "content-type": "application/json" } });
      expect(r.status).toBe(400);
      expect((await r.json()).error.code).toBe("invalid_json");
    }
  });

  test("the depth scan counts brackets outside strings only", () => {
    expect(jsonDepth('{"a":[1,{"b":"]]]}}}"}]}')).toBe(3);
    expect(jsonDepth('"[[[["')).toBe(0);
    expect(jsonDepth('["\\"[", [[]]]')).toBe(3);
    // A quote after an escaped backslash closes the string; after an escaped quote it does not.
    expect(jsonDepth('["a\\\\", [[]]]')).toBe(3);
    expect(jsonDepth('["a\\\\\\"]", [[]]]')).toBe(3);
    expect(jsonDepth('[["\\\\\\\\"], [[[]]]]')).toBe(4);
    // An unclosed string ends the scan.
    expect(jsonDepth('[["abc\\"')).toBe(2);
  });
});

describe("the auth gate decides on the normalised path and denies by default", () => {
  test("paths normalise as routing sees them", () => {
    expect(normalisePath("/metrics/")).toBe("/metrics");
    expect(normalisePath("/metrics/.")).toBe("/metrics");
    expect(normalisePath("//admin//projects/./")).toBe("/admin/projects");
    expect(normalisePath("/healthz/../admin/projects")).toBe("/admin/projects");
  });

  test("every documented protected route refuses an anonymous request in every path spelling", async () => {
    const doc = await (await fetch(`${s.url}/docs/json`)).json();
    const open = new Set([
      "/healthz",
      "/admin/session",
      "/admin/session/methods",
      "/auth/oidc/start",
      "/auth/oidc/callback",
    ]);
    const port = Number(new URL(s.url).port);
    let checked = 0;
    for (const [route, ops] of Object.entries(doc.paths as Record<string, Record<string, unknown>>)) {
      if (open.has(route) || route.startsWith("/docs") || route.startsWith("/agent/")) continue;
      const path = route.replace(/\{[^}]+\}/g, (m) => (m === "{project}" ? "hard" : m === "{workload}" ? "w" : "x"));
      for (const method of Object.keys(ops).map((m) => m.toUpperCase())) {
        for (const variant of [
          path,
          `${path}/`,
          `${path}/.`,
          `${path}//`,
          `/${path}`,
          path.replace(/\/([^/]+)$/, "/./$1"),
          `/healthz/..${path}`,
        ]) {
          const status = await rawStatus(port, method, variant);
          if (status !== 401) throw new Error(`${method} ${variant} answered ${status} without a credential`);
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThan(200);
    for (const unknown of ["/METRICS", "/%6Detrics", "/nothing-here", "/admin%2Fprojects"])
      expect(await rawStatus(port, "GET", unknown)).toBe(401);
    // The dashboard's own page stays public, and so does the health check.
    expect(await rawStatus(port, "GET", "/")).toBe(200);
    // A browser asking for an unknown page gets the dashboard (its "not found" page, no data);
    // an API path stays JSON and protected even for a browser.
    expect(await rawStatus(port, "GET", "/no-such-page", { accept: "text/html" })).toBe(200);
    expect(await rawStatus(port, "GET", "/admin/no-such-thing", { accept: "text/html" })).toBe(401);
    expect(await rawStatus(port, "POST", "/no-such-page", { accept: "text/html" })).toBe(401);
    expect(await rawStatus(port, "GET", "/healthz/")).toBe(200);
  });
});

describe("dashboard sessions", () => {
  const signIn = async (url: string, token: string, init: RequestInit & { tls?: unknown } = {}) => {
    const r = await fetch(`${url}/admin/session`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token }),
      ...init,
    });
    expect(r.status).toBe(200);
    return r.headers.get("set-cookie")!;
  };
  const cookieOf = (setCookie: string) => setCookie.split(";")[0];

  test("end when the admin token changes", async () => {
    const dataDir = tempDir("sessions");
    const a = await startInferd({
      dataDir,
      args: ["--admin-token", "ik_admin_first-token-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],
    });
    const cookie = cookieOf(await signIn(a.url, "ik_admin_first-token-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
    const create = (url: string, name: string) =>
      fetch(`${url}/admin/projects`, {
        method: "POST",
        headers: { cookie, origin: url, "content-type": "application/json" },
        body: JSON.stringify({ name }),
      });
    expect((await create(a.url, "before")).status).toBe(201);
    await a.stop();
    const b = await startInferd({
      dataDir,
      args: ["--admin-token", "ik_admin_second-token-bbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"],
    });
    try {
      const r = await create(b.url, "after");
      expect(r.status).toBe(401);
      expect((await r.json()).error).toMatchObject({
        code: "invalid_session",
        message: expect.stringContaining("admin token has changed"),
      });
    } finally {
      await b.stop();
    }
  });

  test("are Secure over HTTPS, end when idle, and end everywhere on request", async () => {
    const http = await signIn(s.url, s.adminToken);
    expect(http).not.toContain("Secure");
    const https = await signIn(`https://127.0.0.1:${s.tlsPort}`, s.adminToken, {
      tls: { rejectUnauthorized: false },
    } as RequestInit);
    expect(https).toContain("; Secure");
    const get = (cookie: string) => fetch(`${s.url}/admin/projects`, { headers: { cookie } });
    const [one, two] = [cookieOf(http), cookieOf(await signIn(s.url, s.adminToken))];
    expect((await get(one)).status).toBe(200);
    // Idle: its last use pushed back past the idle limit (12 h).
    const db = new Database(join(s.dataDir, "inferd.db"));
    db.query("UPDATE sessions SET last_seen_at = ?").run(new Date(Date.now() - 13 * 3600_000).toISOString());
    db.close();
    const idle = await get(one);
    expect(idle.status).toBe(401);
    expect((await idle.json()).error.message).toContain("without use");
    const [three, four] = [cookieOf(await signIn(s.url, s.adminToken)), cookieOf(await signIn(s.url, s.adminToken))];
    const out = await fetch(`${s.url}/admin/sessions`, { method: "DELETE", headers: { cookie: three, origin: s.url } });
    expect(out.status).toBe(200);
    expect((await out.json()).ended).toBeGreaterThanOrEqual(2);
    for (const c of [two, three, four]) expect((await get(c)).status).toBe(401);
  });

  test("a malformed Origin on a cookie request is 403 csrf_rejected, not a 500", async () => {
    const cookie = cookieOf(await signIn(s.url, s.adminToken));
    for (const origin of ["null", "http://[bad", "::"]) {
      const r = await fetch(`${s.url}/admin/projects`, {
        method: "POST",
        headers: { cookie, origin, "content-type": "application/json" },
        body: JSON.stringify({ name: "x" }),
      });
      expect(r.status).toBe(403);
      expect((await r.json()).error.code).toBe("csrf_rejected");
    }
  });
});

test("webhook URLs with an IPv4 address inside an IPv6 one are judged by that IPv4 address", async () => {
  const w = await (
    await s.admin("/admin/projects/hard/workloads", { body: { name: "hooks", backend: "ollama", model_name: "m" } })
  ).json();
  for (const host of [
    "[::7f00:1]",
    "[::a00:1]",
    "[64:ff9b::7f00:1]",
    "[2002:7f00:1::1]",
    "[::ffff:0:7f00:1]",
    "[2001:0:4136:e378:8000:63bf:80ff:fffe]",
  ]) {
    const r = await s.admin(`/admin/workloads/${w.id}/webhooks`, { body: { url: `https://${host}/hook` } });
    expect(r.status).toBe(400);
    expect((await r.json()).error.code).toBe("invalid_webhook_url");
  }
});

test("stored job bytes are capped per project: 429 past the quota, 413 for a job larger than it", async () => {
  await s.admin("/admin/projects/hard/workloads", { body: { name: "q", backend: "ollama", model_name: "m" } });
  const job = (chars: number) =>
    s.call("/endpoint/hard/q/jobs", ctx.live, {
      body: { kind: "chat", body: { messages: [{ role: "user", content: "x".repeat(chars) }] } },
    });
  expect((await job(1500)).status).toBe(202);
  expect((await job(1500)).status).toBe(202);
  const over = await job(1500);
  expect(over.status).toBe(429);
  expect(over.headers.get("retry-after")).toBe("60");
  expect((await over.json()).error.code).toBe("job_storage_full");
  expect((await job(5000)).status).toBe(413);
  // Another project has its own quota.
  const other = await seedProject(s, "Other", "other");
  await s.admin("/admin/projects/other/workloads", { body: { name: "q", backend: "ollama", model_name: "m" } });
  expect(
    (
      await s.call("/endpoint/other/q/jobs", other.live, {
        body: { kind: "chat", body: { messages: [{ role: "user", content: "x" }] } },
      })
    ).status,
  ).toBe(202);
});
