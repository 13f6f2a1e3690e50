/**
 * Issue 32 (third security probe), follow-up of items 1 and 2: the model store is the operator of the
 * machine's (the admin's), not a tenant's. An operator of a project pulls from the hub as before,
 * but a URL or a file on the host only as the launch policy allows a tenant's command; may look at
 * paths only under the model directories; cannot list the host's caches; and cancels, dismisses or
 * removes only models pulled for their own projects. The admin is unaffected.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { startTestServer, type TestServer } from "./helpers/server";
import { loadConfig } from "../src/config";
import { startServer } from "../src/server";
import { startFakeHub, type FakeHub } from "./fixtures/hf-hub";
import { ggufRepo } from "./fixtures/hf-repos";
import { cleanup, tempDir, waitFor } from "./helpers/proc";

const PASSWORD = "correct horse battery";
const REPO = "inferd-test/Tiny-GGUF";
type ApiError = { code: string; message: string; field?: string; setting?: string };
const errorOf = async (r: Response) => ((await r.json()) as { error: ApiError }).error;

/** A signed-in user calling /admin with their session cookie (from our own origin, as the dashboard does). */
interface Person {
  call(path: string, init?: { method?: string; body?: unknown }): Promise<Response>;
}

/** A model as the API shows it (the fields these tests read). */
interface Model {
  id: string;
  source: string;
  kind: string;
  state: string;
  pulled_for: { project_slug: string | null } | null;
}

/** Adds a user with the admin token on `srv` and signs them in with their password. */
async function person(srv: TestServer, email: string, role: string, projects: string[]): Promise<Person> {
  expect((await srv.admin("/admin/users", { body: { email, role, projects, password: PASSWORD } })).status).toBe(201);
  const r = await srv.call("/admin/session", undefined, { body: { email, password: PASSWORD } });
  expect(r.status).toBe(200);
  const cookie = (r.headers.get("set-cookie") ?? "").split(";")[0];
  return { call: (path, init = {}) => srv.call(path, undefined, { ...init, headers: { cookie, origin: srv.url } }) };
}

/** A loopback file server standing for an address on the host's side (a metadata service, a LAN box); counts what reaches it. */
function loopbackFiles() {
  let hits = 0;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: () => (hits++, new Response(new Uint8Array(2048).fill(7))),
  });
  return { url: `http://127.0.0.1:${server.port}`, port: server.port, hits: () => hits, stop: () => server.stop(true) };
}

let hub: FakeHub;
let prevEndpoint: string | undefined;
let s: TestServer;
let files: ReturnType<typeof loopbackFiles>;
let otto: Person; // operator of alpha
let vera: Person; // viewer of alpha
let bea: Person; // operator of beta
let mo: Person; // operator of alpha and beta
let modelsDir: string;
let outside: string;

/** A model by id, read with the admin token. */
const modelOf = async (srv: TestServer, id: string) => (await (await srv.admin(`/admin/models/${id}`)).json()) as Model;
/** Waits until a model's pull has ended; returns it. */
const settled = (srv: TestServer, id: string) =>
  waitFor(
    async () => {
      const m = await modelOf(srv, id);
      return m.state !== "downloading" ? m : undefined;
    },
    { what: `model ${id}'s pull to end`, timeoutMs: 30_000 },
  );

beforeAll(async () => {
  hub = await startFakeHub({
    repos: {
      [REPO]: ggufRepo(join(tempDir("probe3-models"), "gguf"), { name: "Tiny", sizes: { "Tiny-Q8_0.gguf": 4 << 20 } }),
    },
  });
  prevEndpoint = process.env.HF_ENDPOINT;
  process.env.HF_ENDPOINT = hub.url;
  files = loopbackFiles();
  s = await startTestServer();
  for (const slug of ["alpha", "beta", "gamma"])
    expect((await s.admin("/admin/projects", { body: { name: slug, slug } })).status).toBe(201);
  otto = await person(s, "otto@example.com", "operator", ["alpha"]);
  vera = await person(s, "vera@example.com", "viewer", ["alpha"]);
  bea = await person(s, "bea@example.com", "operator", ["beta"]);
  mo = await person(s, "mo@example.com", "operator", ["alpha", "beta"]);
  modelsDir = join(s.dataDir, "models");
  mkdirSync(join(modelsDir, "own"), { recursive: true });
  writeFileSync(join(modelsDir, "own", "mine.gguf"), new Uint8Array(1024).fill(1));
  outside = join(tempDir("probe3-outside"), "secret.gguf");
  writeFileSync(outside, new Uint8Array(3333).fill(2));
  symlinkSync(outside, join(modelsDir, "link.gguf"));
});

afterAll(async () => {
  await s?.close();
  files?.stop();
  await hub?.stop();
  if (prevEndpoint === undefined) delete process.env.HF_ENDPOINT;
  else process.env.HF_ENDPOINT = prevEndpoint;
  await cleanup();
});

describe("a tenant's pull obeys the launch policy", () => {
  test("an operator cannot pull from a loopback or private address (http or https, by address or localhost); nothing reaches it", async () => {
    for (const source of [
      `${files.url}/a.gguf`,
      `https://127.0.0.1:${files.port}/a.gguf`,
      `http://localhost:${files.port}/a.gguf`,
      "https://10.0.0.1/a.gguf",
      "https://[::ffff:127.0.0.1]/a.gguf",
    ]) {
      const r = await otto.call("/admin/models", { body: { source } });
      expect(`${source} ${r.status}`).toBe(`${source} 403`);
      const e = await errorOf(r);
      expect(e).toMatchObject({ code: "command_not_allowed", field: "source" });
      expect(e.message).toContain("--allow-private-model-urls");
    }
    expect(files.hits()).toBe(0);
    const models = (await (await s.admin("/admin/models")).json()) as Model[];
    expect(models.filter((m) => m.kind === "url")).toEqual([]);
  });

  test("an operator cannot register a file outside the model directories, by path, by .. or through a symlink", async () => {
    for (const source of [
      "/etc/passwd",
      outside,
      `file://${outside}`,
      `${modelsDir}/../../etc/passwd`,
      join(modelsDir, "link.gguf"),
    ]) {
      const r = await otto.call("/admin/models", { body: { source } });
      expect(`${source} ${r.status}`).toBe(`${source} 403`);
      const e = await errorOf(r);
      expect(e).toMatchObject({ code: "command_not_allowed", field: "source" });
      expect(e.message).toContain("--policy-model-paths");
    }
    const models = (await (await s.admin("/admin/models")).json()) as Model[];
    expect(models.filter((m) => m.kind === "local")).toEqual([]);
  });

  test("an operator may register a file under the model directories, and pull from the hub; each counts against their project", async () => {
    const local = await otto.call("/admin/models", { body: { source: join(modelsDir, "own", "mine.gguf") } });
    expect(local.status).toBeLessThan(300);
    const registered = await settled(s, ((await local.json()) as Model).id);
    expect(registered).toMatchObject({ kind: "local", state: "ready", pulled_for: { project_slug: "alpha" } });
    const pulled = await otto.call("/admin/models", { body: { source: `hf:${REPO}:Q4_K_M` } });
    expect(pulled.status).toBe(202);
    const m = await settled(s, ((await pulled.json()) as Model).id);
    expect(m).toMatchObject({ state: "ready", pulled_for: { project_slug: "alpha" } });
    // Theirs to remove.
    expect((await otto.call(`/admin/models/${m.id}`, { method: "DELETE" })).status).toBe(200);
    expect((await otto.call(`/admin/models/${registered.id}`, { method: "DELETE" })).status).toBe(200);
  });

  test("an operator of several projects names the one a pull is for; one they are not in is not found", async () => {
    const none = await mo.call("/admin/models", { body: { source: `hf:${REPO}:Q4_K_M` } });
    expect(none.status).toBe(400);
    expect(await errorOf(none)).toMatchObject({ code: "validation_error", field: "project" });
    expect((await mo.call("/admin/models", { body: { source: `hf:${REPO}:Q4_K_M`, project: "gamma" } })).status).toBe(
      404,
    );
    const named = await mo.call("/admin/models", { body: { source: `hf:${REPO}:Q4_K_M`, project: "beta" } });
    expect(named.status).toBe(202);
    const m = await settled(s, ((await named.json()) as Model).id);
    expect(m.pulled_for?.project_slug).toBe("beta");
    expect((await s.admin(`/admin/models/${m.id}`, { method: "DELETE" })).status).toBe(200);
  });

  test("with --allow-private-model-urls the operator's pull may reach a loopback address", async () => {
    const open = await startTestServer({ INFERD_ALLOW_PRIVATE_MODEL_URLS: "1" });
    try {
      expect((await open.admin("/admin/projects", { body: { name: "alpha", slug: "alpha" } })).status).toBe(201);
      const op = await person(open, "otto@example.com", "operator", ["alpha"]);
      const r = await op.call("/admin/models", { body: { source: `${files.url}/allowed.gguf` } });
      expect(r.status).toBe(202);
      const m = await settled(open, ((await r.json()) as Model).id);
      expect(m).toMatchObject({ state: "ready", pulled_for: { project_slug: "alpha" } });
      expect(files.hits()).toBeGreaterThan(0);
    } finally {
      await open.close();
    }
  });
});

describe("a tenant's pull resumed after a restart", () => {
  test("obeys the address rules again: allowed when it started, refused once the operator took the permission back", async () => {
    // A loopback file that sends its first bytes, then holds the download open (it is still downloading at the stop).
    let requests = 0;
    const slow = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: () => {
        requests++;
        const body = new ReadableStream({ start: (c) => c.enqueue(new Uint8Array(4096).fill(3)) });
        return new Response(body, { headers: { "content-length": String(64 << 20) } });
      },
    });
    const dataDir = tempDir("probe3-resume");
    const serve = (env: Record<string, string>) =>
      startServer(
        loadConfig([], {
          INFERD_PORT: "0",
          INFERD_DATA_DIR: dataDir,
          INFERD_LOCAL_AGENT: "0",
          INFERD_LOG_LEVEL: "error",
          ...env,
        }).config,
        () => {},
      );
    const first = await serve({ INFERD_ALLOW_PRIVATE_MODEL_URLS: "1" });
    try {
      const admin = (path: string, body?: unknown) =>
        fetch(first.url + path, {
          method: body ? "POST" : "GET",
          headers: { authorization: `Bearer ${first.adminToken}`, "content-type": "application/json" },
          body: body ? JSON.stringify(body) : undefined,
        });
      expect((await admin("/admin/projects", { name: "alpha", slug: "alpha" })).status).toBe(201);
      expect(
        (
          await admin("/admin/users", {
            email: "otto@example.com",
            role: "operator",
            projects: ["alpha"],
            password: PASSWORD,
          })
        ).status,
      ).toBe(201);
      const signIn = await fetch(`${first.url}/admin/session`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ email: "otto@example.com", password: PASSWORD }),
      });
      const cookie = (signIn.headers.get("set-cookie") ?? "").split(";")[0];
      const r = await fetch(`${first.url}/admin/models`, {
        method: "POST",
        headers: { cookie, origin: first.url, "content-type": "application/json" },
        body: JSON.stringify({ source: `http://127.0.0.1:${slow.port}/held.gguf` }),
      });
      expect(r.status).toBe(202);
      const id = ((await r.json()) as Model).id;
      await waitFor(() => requests > 0, { what: "the download under way" });
      await first.stop();
      const seen = requests;
      const second = await serve({});
      try {
        const m = await waitFor(
          async () => {
            const v = (await (
              await fetch(`${second.url}/admin/models/${id}`, {
                headers: { authorization: `Bearer ${second.adminToken}` },
              })
            ).json()) as Model & { reason?: string };
            return v.state !== "downloading" ? v : undefined;
          },
          { what: "the resumed pull to end", timeoutMs: 30_000 },
        );
        expect(m.state).toBe("failed");
        expect(requests).toBe(seen);
      } finally {
        await second.stop();
      }
    } finally {
      slow.stop(true);
    }
  }, 60_000);
});

describe("looking at the host", () => {
  test("GET /admin/models/file answers a non-admin only under the model directories; the admin anywhere", async () => {
    for (const who of [otto, vera]) {
      for (const path of [
        "/etc/passwd",
        "/no/such/file",
        outside,
        `${modelsDir}/../../etc/passwd`,
        join(modelsDir, "link.gguf"),
      ]) {
        const r = await who.call(`/admin/models/file?path=${encodeURIComponent(path)}`);
        expect(`${path} ${r.status}`).toBe(`${path} 403`);
        const body = await r.json();
        expect(body.size_bytes).toBeUndefined();
        expect(body.error.code).toBe("command_not_allowed");
        expect(body.error.message).toContain("--policy-model-paths");
      }
      const inside = await who.call(
        `/admin/models/file?path=${encodeURIComponent(join(modelsDir, "own", "mine.gguf"))}`,
      );
      expect(inside.status).toBe(200);
      expect(await inside.json()).toMatchObject({ kind: "file", size_bytes: 1024 });
    }
    const admin = await s.admin(`/admin/models/file?path=${encodeURIComponent(outside)}`);
    expect(admin.status).toBe(200);
    expect(await admin.json()).toMatchObject({ kind: "file", size_bytes: 3333 });
  });

  test("GET /admin/models/discover is the admin's; viewers and operators still read the model list", async () => {
    for (const who of [otto, vera]) {
      const r = await who.call("/admin/models/discover");
      expect(r.status).toBe(403);
      const e = await errorOf(r);
      expect(e.code).toBe("forbidden_role");
      expect(e.message).toEndWith("an admin can");
      expect((await who.call("/admin/models")).status).toBe(200);
    }
    expect((await s.admin("/admin/models/discover")).status).toBe(200);
  });
});

describe("acting on models", () => {
  test("an operator cannot cancel, dismiss or delete the admin's models or another project's, nor take them by pulling again", async () => {
    const refusedToOtto = async (id: string) => {
      for (const [method, path] of [
        ["DELETE", `/admin/models/${id}`],
        ["POST", `/admin/models/${id}/cancel`],
        ["POST", `/admin/models/${id}/dismiss`],
      ] as const) {
        const r = await otto.call(path, { method });
        expect(`${method} ${path} ${r.status}`).toBe(`${method} ${path} 403`);
        const e = await errorOf(r);
        expect(e.code).toBe("forbidden_role");
        expect(e.message).toEndWith("an admin can");
      }
    };
    const admins = (await (await s.admin("/admin/models", { body: { source: `hf:${REPO}:Q4_K_M` } })).json()) as Model;
    await settled(s, admins.id);
    await refusedToOtto(admins.id);
    const beas = (await (
      await bea.call("/admin/models", { body: { source: `hf:${REPO}/README.md` } })
    ).json()) as Model;
    expect((await settled(s, beas.id)).pulled_for?.project_slug).toBe("beta");
    await refusedToOtto(beas.id);
    expect((await otto.call("/admin/models/mdl_nosuch", { method: "DELETE" })).status).toBe(404);
    // Pulling the admin's model again joins it: it stays the admin's.
    const again = await otto.call("/admin/models", { body: { source: `hf:${REPO}:Q4_K_M` } });
    expect(again.status).toBe(200);
    expect((await modelOf(s, admins.id)).pulled_for).toBeNull();
    // A viewer cannot act on any.
    expect((await vera.call(`/admin/models/${admins.id}`, { method: "DELETE" })).status).toBe(403);
    // The admin is unaffected.
    expect((await s.admin(`/admin/models/${beas.id}`, { method: "DELETE" })).status).toBe(200);
    expect((await s.admin(`/admin/models/${admins.id}`, { method: "DELETE" })).status).toBe(200);
  });

  test("an operator cancels and dismisses their own project's pull", async () => {
    hub.throttle(256 << 10);
    try {
      const r = await otto.call("/admin/models", { body: { source: `hf:${REPO}:Q8_0` } });
      expect(r.status).toBe(202);
      const { id } = (await r.json()) as Model;
      const cancel = await otto.call(`/admin/models/${id}/cancel`, { method: "POST" });
      expect(cancel.status).toBe(200);
      expect(((await cancel.json()) as Model).state).toBe("cancelled");
      expect((await otto.call(`/admin/models/${id}/dismiss`, { method: "POST" })).status).toBe(200);
      expect((await s.admin(`/admin/models/${id}`)).status).toBe(404);
    } finally {
      hub.resetFaults();
    }
  });

  test("the admin pulls from loopback and registers any file, as the operator of the machine", async () => {
    const before = files.hits();
    const url = await s.admin("/admin/models", { body: { source: `${files.url}/admins.gguf` } });
    expect(url.status).toBe(202);
    const m = await settled(s, ((await url.json()) as Model).id);
    expect(m).toMatchObject({ state: "ready", pulled_for: null });
    expect(files.hits()).toBeGreaterThan(before);
    const local = await s.admin("/admin/models", { body: { source: outside } });
    expect(local.status).toBeLessThan(300);
    expect((await settled(s, ((await local.json()) as Model).id)).state).toBe("ready");
  });
});
