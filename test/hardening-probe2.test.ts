import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { seedProject, startTestServer, type TestServer } from "./helpers/server";
import { cleanup, tempDir } from "./helpers/proc";
import { VERSION } from "../src/version";
import { takeBackup } from "../src/store/backup";
import { acceptNdjson } from "../src/jobs/batch";
import { getWorkloadById } from "../src/workloads/service";

/**
 * The low findings of the second security probe (issue 20), one test per finding with the request
 * that reproduced it: agent messages that swell the host's memory, a jobs:batch held many times
 * over, malformed session cookies, `group_by` names of Object's prototype, and backups made 0644.
 */

let s: TestServer;
let ctx: Awaited<ReturnType<typeof seedProject>>;
beforeAll(async () => {
  // A wide admin body limit: agent messages have their own, whatever --max-body-bytes says.
  s = await startTestServer({ INFERD_MAX_BODY_BYTES: String(8 << 20) });
  ctx = await seedProject(s, "Probe", "probe");
});
afterAll(async () => {
  await s.close();
  await cleanup();
});

const errorOf = async (r: Response) =>
  ((await r.json()) as { error: { code: string; message: string; field?: string } }).error;

/** A body stream that sends `first` and then never ends; `pulled` counts the bytes it handed out. */
function endlessBody(first: Uint8Array, filler = new Uint8Array(64 * 1024).fill(32)) {
  const counter = { pulled: 0 };
  let sent = false;
  const stream = new ReadableStream<Uint8Array>({
    pull(c) {
      const chunk = sent ? filler : first;
      sent = true;
      counter.pulled += chunk.byteLength;
      c.enqueue(chunk);
    },
  });
  return { stream, counter };
}

describe("agent messages are bounded (6)", () => {
  const machine = (extra: Record<string, unknown> = {}) => ({
    hostname: "probe-box",
    cpu_cores: 4,
    ram_bytes: 8 * 2 ** 30,
    ram_free_bytes: 4 * 2 ** 30,
    gpus: [],
    load_avg: [0.1, 0.2, 0.3],
    probed_at: new Date().toISOString(),
    ...extra,
  });
  let credential = "";
  let workerId = "";
  /** A request to the agent protocol on the TLS port. */
  const agent = (path: string, init: RequestInit = {}) =>
    fetch(`https://127.0.0.1:${s.tlsPort}/agent/v1${path}`, {
      method: "POST",
      ...init,
      headers: {
        authorization: `Bearer ${credential}`,
        "content-type": "application/json",
        ...(init.headers as Record<string, string>),
      },
      tls: { rejectUnauthorized: false },
    } as RequestInit);
  const worker = async () =>
    (await (await s.admin(`/admin/workers/${workerId}`)).json()) as {
      telemetry: { load_avg?: number[] };
      history: unknown[];
    };

  beforeAll(async () => {
    const created = await (await s.admin("/admin/workers", { body: { name: "probe-agent" } })).json();
    const token = (created.join_command as string).split(" ")[5];
    const joined = await agent("/join", { body: JSON.stringify({ token, version: VERSION, machine: machine() }) });
    expect(joined.status).toBe(201);
    ({ credential, worker_id: workerId } = await joined.json());
    expect(
      (await agent("/heartbeat", { body: JSON.stringify({ version: VERSION, machine: machine(), replicas: [] }) }))
        .status,
    ).toBe(200);
  });

  test.each([
    ["a 100k-element load_avg", { machine: machine({ load_avg: new Array(100_000).fill(0.5) }) }, "machine.load_avg"],
    ["a 100k-character hostname", { machine: machine({ hostname: "h".repeat(100_000) }) }, "machine.hostname"],
    [
      "1000 GPUs",
      {
        machine: machine({
          gpus: Array.from({ length: 1000 }, (_, i) => ({
            index: i,
            uuid: `GPU-${i}`,
            name: "x",
            vendor: "nvidia",
            memory_total_mib: 1,
            memory_used_mib: 0,
            utilization_percent: 0,
            temperature_c: null,
          })),
        }),
      },
      "machine.gpus",
    ],
    ["an infinite number (1e999)", { machine: machine({ ram_bytes: "INF" }) }, "machine.ram_bytes"],
    [
      "20k replica reports",
      {
        machine: machine(),
        replicas: Array.from({ length: 20_000 }, (_, i) => ({ assignment_id: `as_${i}`, state: "pending" })),
      },
      "replicas",
    ],
  ])("a heartbeat with %s is 400 naming the field, and nothing of it is stored", async (_name, fields, field) => {
    const before = await worker();
    const text = JSON.stringify({ version: VERSION, replicas: [], ...fields }).replace('"INF"', "1e999");
    const r = await agent("/heartbeat", { body: text });
    expect(r.status).toBe(400);
    const e = await errorOf(r);
    expect(e.code).toBe("validation_error");
    expect(e.field).toBe(field);
    const after = await worker();
    expect(after.telemetry).toEqual(before.telemetry);
    expect(after.history.length).toBe(before.history.length);
  });

  test("an agent message over 1 MiB is 413 whatever --max-body-bytes allows", async () => {
    const padded = JSON.stringify({ version: VERSION, machine: machine(), replicas: [] }) + " ".repeat(2 << 20);
    const r = await agent("/heartbeat", { body: padded });
    expect(r.status).toBe(413);
    expect((await errorOf(r)).code).toBe("payload_too_large");
  });

  test("a failure post for a work id the agent does not hold is refused before its body is read", async () => {
    const { stream, counter } = endlessBody(new TextEncoder().encode('{"error":{"message":"'));
    const r = await agent("/work/not-a-work-id/response", {
      body: stream,
      headers: {
        "x-inferd-failure": "upstream_unavailable",
        "x-inferd-status": "502",
        "content-type": "application/json",
      },
      signal: AbortSignal.timeout(20_000),
    });
    expect(r.status).toBe(404);
    expect(counter.pulled).toBeLessThan(8 << 20);
    // Without a credential nothing is read either: 401 first.
    const anon = endlessBody(new Uint8Array(1024));
    const r2 = await fetch(`https://127.0.0.1:${s.tlsPort}/agent/v1/work/x/response`, {
      method: "POST",
      body: anon.stream,
      headers: { "x-inferd-failure": "upstream_unavailable" },
      tls: { rejectUnauthorized: false },
      signal: AbortSignal.timeout(20_000),
    } as RequestInit);
    expect(r2.status).toBe(401);
    expect(anon.counter.pulled).toBeLessThan(8 << 20);
  });

  test("an answer's headers are bounded: a status that is no HTTP status is 400 naming the header", async () => {
    for (const status of ["abc", "99999", "1e999"]) {
      const r = await agent("/work/some-id/response", { body: "{}", headers: { "x-inferd-status": status } });
      expect(r.status).toBe(400);
      expect((await errorOf(r)).field).toBe("x-inferd-status");
    }
    const long = await agent("/work/some-id/response", {
      body: "{}",
      headers: { "x-inferd-content-type": `text/plain; x=${"a".repeat(5000)}` },
    });
    expect((await errorOf(long)).field).toBe("x-inferd-content-type");
  });
});

describe("jobs:batch NDJSON is parsed as it streams in (7)", () => {
  const line = (i: number, pad = 0) =>
    JSON.stringify({ kind: "embeddings", body: { input: `item ${i} ${"x".repeat(pad)}` }, context: { i } }) + "\n";
  const send = (body: ReadableStream<Uint8Array>) =>
    fetch(`${s.url}/endpoint/probe/nd/jobs:batch`, {
      method: "POST",
      body,
      headers: { authorization: `Bearer ${ctx.live}`, "content-type": "application/x-ndjson" },
      signal: AbortSignal.timeout(60_000),
    });

  let workloadId = "";
  beforeAll(async () => {
    // Pinned to a worker that never joins: the jobs stay queued, so what is measured is the intake.
    const worker = await (await s.admin("/admin/workers", { body: { name: "never-joins" } })).json();
    const w = await s.admin("/admin/projects/probe/workloads", {
      body: { name: "nd", backend: "vllm", model_name: "m", worker_id: worker.id, config: { command: "vllm serve m" } },
    });
    expect(w.status).toBe(201);
    workloadId = (await w.json()).id;
  });

  test("the buffered-bytes budget counts the jobs held and the unfinished line, not the text read", async () => {
    const holding = {
      now: 0,
      peak: 0,
      take: (n: number) => void (holding.peak = Math.max(holding.peak, (holding.now += n))),
      give: (n: number) => void (holding.now -= n),
    };
    const text = Array.from({ length: 50 }, (_, i) => line(i, 10_000)).join("");
    const chunks = (async function* () {
      for (let at = 0; at < text.length; at += 7000) yield new TextEncoder().encode(text.slice(at, at + 7000));
    })();
    const jobs = await acceptNdjson(chunks, (await getWorkloadById(s.store.db, workloadId))!, holding);
    expect(jobs).toHaveLength(50);
    const held = jobs.reduce((n, j) => n + j.body.byteLength + (j.context?.length ?? 0), 0);
    expect(holding.now).toBeGreaterThanOrEqual(held);
    expect(holding.now).toBeLessThan(held + 50 * 1024);
    expect(holding.peak).toBeLessThan(held + 2 * line(0, 10_000).length + 7000);
  });

  test("a bad line is refused while the upload is still going, named by its index and line", async () => {
    const { stream, counter } = endlessBody(
      new TextEncoder().encode(`${line(0)}{"kind":\n`),
      new Uint8Array(64 * 1024).fill(10),
    );
    const r = await send(stream);
    expect(r.status).toBe(400);
    const e = await errorOf(r);
    expect(e.code).toBe("invalid_json");
    expect(e.message).toStartWith("body[1]:");
    expect(e.message).toContain("NDJSON line 2");
    expect(counter.pulled).toBeLessThan(8 << 20);
  });

  test("a 40 MiB batch is held about once, not many times over, and /healthz answers while it uploads", async () => {
    const [lines, perChunk, pad] = [1000, 25, 40_000];
    const size = lines * line(0, pad).length;
    Bun.gc(true);
    const before = process.memoryUsage().rss;
    let [peak, next, healthy] = [before, 0, 0];
    const body = new ReadableStream<Uint8Array>({
      async pull(c) {
        // This process is the client too: its own chunks are garbage once sent, collected here so
        // that what grows is what the server holds.
        Bun.gc(true);
        peak = Math.max(peak, process.memoryUsage().rss);
        if (next >= lines) return c.close();
        if (next > 0 && (await fetch(`${s.url}/healthz`)).status === 200) healthy++;
        let text = "";
        for (const end = next + perChunk; next < end; next++) text += line(next, pad);
        c.enqueue(new TextEncoder().encode(text));
      },
    });
    const r = await send(body);
    expect(r.status).toBe(202);
    peak = Math.max(peak, process.memoryUsage().rss);
    expect((await r.text()).trim().split("\n")).toHaveLength(lines);
    expect(healthy).toBe(lines / perChunk - 1);
    // The jobs' bodies are held once until they are committed; the text, the lines and their
    // parsed values are not kept beside them.
    expect(peak - before).toBeLessThan(2 * size);
  });
});

describe("a malformed session cookie is 401, not a 500 (9)", () => {
  test.each(["%", "%zz", "%E0%A4%A"])("Cookie: inferd_session=%s", async (value) => {
    for (const [method, path] of [
      ["GET", "/admin/projects"],
      ["DELETE", "/admin/session"],
      ["DELETE", "/admin/sessions"],
    ]) {
      const r = await fetch(`${s.url}${path}`, {
        method,
        headers: { cookie: `theme=dark; inferd_session=${value}`, origin: s.url },
      });
      const text = await r.text();
      expect(`${method} ${path} ${r.status}`).toBe(`${method} ${path} 401`);
      expect(JSON.parse(text).error).toEqual({ code: "invalid_session", message: "the session cookie is not valid" });
      expect(text).not.toMatch(/URIError|at \w+ \(|\.ts:\d+/);
    }
  });
});

describe("query names of Object's prototype are no grouping (10)", () => {
  test.each(["__proto__", "constructor", "toString", "hasOwnProperty", "valueOf", "__defineGetter__", "isPrototypeOf"])(
    "GET /admin/usage?group_by=%s is 400 naming group_by",
    async (name) => {
      for (const format of ["", "&format=csv"]) {
        const r = await s.admin(`/admin/usage?group_by=${name}${format}`);
        expect(r.status).toBe(400);
        expect(await errorOf(r)).toEqual({
          code: "validation_error",
          message: "group_by: must be key, project or workload",
          field: "group_by",
        });
      }
    },
  );

  test("the audit log takes such names as plain text to match", async () => {
    for (const q of ["actor=__proto__", "target=constructor", "action=toString", "since=__proto__&until=valueOf"]) {
      const r = await s.admin(`/admin/audit?${q}`);
      expect(r.status).toBe(200);
      expect((await r.json()).entries).toEqual([]);
    }
    expect((await s.admin("/admin/usage?group_by=key")).status).toBe(200);
  });
});

describe("backups are owner-only from the start (11)", () => {
  test("the partial copy is 0600 while it is checked, even under umask 000; so is the backup", () => {
    const modes: string[] = [];
    const umask = process.umask(0);
    let backup;
    try {
      backup = takeBackup(s.dataDir, 3, join(tempDir("probe-backup"), "copy.db"), new Date(), (partial) => {
        const dir = join(partial, "..");
        for (const name of readdirSync(dir))
          modes.push(
            `${name.replace(/\.\d+\.partial/, ".N.partial")} ${(statSync(join(dir, name)).mode & 0o777).toString(8)}`,
          );
        return null;
      });
    } finally {
      process.umask(umask);
    }
    expect(modes).toEqual(["copy.db.N.partial 600"]);
    expect((statSync(backup.path).mode & 0o777).toString(8)).toBe("600");
  });
});
