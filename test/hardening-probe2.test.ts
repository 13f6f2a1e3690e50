import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { seedProject, startTestServer, type TestServer } from "./helpers/server";
import { cleanup } from "./helpers/proc";
import { VERSION } from "../src/version";

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

const errorOf = async (r: Response) => ((await r.json()) as { error: { code: string; message: string; field?: string } }).error;

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
  const machine = (extra: Record<string, unknown> = {}) => ({ hostname: "probe-box", cpu_cores: 4, ram_bytes: 8 * 2 ** 30, ram_free_bytes: 4 * 2 ** 30, gpus: [], load_avg: [0.1, 0.2, 0.3], probed_at: new Date().toISOString(), ...extra });
  let credential = "";
  let workerId = "";
  /** A request to the agent protocol on the TLS port. */
  const agent = (path: string, init: RequestInit = {}) =>
    fetch(`https://127.0.0.1:${s.tlsPort}/agent/v1${path}`, { method: "POST", ...init, headers: { authorization: `Bearer ${credential}`, "content-type": "application/json", ...(init.headers as Record<string, string>) }, tls: { rejectUnauthorized: false } } as RequestInit);
  const worker = async () => (await (await s.admin(`/admin/workers/${workerId}`)).json()) as { telemetry: { load_avg?: number[] }; history: unknown[] };

  beforeAll(async () => {
    const created = await (await s.admin("/admin/workers", { body: { name: "probe-agent" } })).json();
    const token = (created.join_command as string).split(" ")[5];
    const joined = await agent("/join", { body: JSON.stringify({ token, version: VERSION, machine: machine() }) });
    expect(joined.status).toBe(201);
    ({ credential, worker_id: workerId } = await joined.json());
    expect((await agent("/heartbeat", { body: JSON.stringify({ version: VERSION, machine: machine(), replicas: [] }) })).status).toBe(200);
  });

  test.each([
    ["a 100k-element load_avg", { machine: machine({ load_avg: new Array(100_000).fill(0.5) }) }, "machine.load_avg"],
    ["a 100k-character hostname", { machine: machine({ hostname: "h".repeat(100_000) }) }, "machine.hostname"],
    ["1000 GPUs", { machine: machine({ gpus: Array.from({ length: 1000 }, (_, i) => ({ index: i, uuid: `GPU-${i}`, name: "x", vendor: "nvidia", memory_total_mib: 1, memory_used_mib: 0, utilization_percent: 0, temperature_c: null })) }) }, "machine.gpus"],
    ["an infinite number (1e999)", { machine: machine({ ram_bytes: "INF" }) }, "machine.ram_bytes"],
    ["20k replica reports", { machine: machine(), replicas: Array.from({ length: 20_000 }, (_, i) => ({ assignment_id: `as_${i}`, state: "pending" })) }, "replicas"],
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
    const r = await agent("/work/not-a-work-id/response", { body: stream, headers: { "x-inferd-failure": "upstream_unavailable", "x-inferd-status": "502", "content-type": "application/json" }, signal: AbortSignal.timeout(20_000) });
    expect(r.status).toBe(404);
    expect(counter.pulled).toBeLessThan(8 << 20);
    // Without a credential nothing is read either: 401 first.
    const anon = endlessBody(new Uint8Array(1024));
    const r2 = await fetch(`https://127.0.0.1:${s.tlsPort}/agent/v1/work/x/response`, { method: "POST", body: anon.stream, headers: { "x-inferd-failure": "upstream_unavailable" }, tls: { rejectUnauthorized: false }, signal: AbortSignal.timeout(20_000) } as RequestInit);
    expect(r2.status).toBe(401);
    expect(anon.counter.pulled).toBeLessThan(8 << 20);
  });

  test("an answer's headers are bounded: a status that is no HTTP status is 400 naming the header", async () => {
    for (const status of ["abc", "99999", "1e999"]) {
      const r = await agent("/work/some-id/response", { body: "{}", headers: { "x-inferd-status": status } });
      expect(r.status).toBe(400);
      expect((await errorOf(r)).field).toBe("x-inferd-status");
    }
    const long = await agent("/work/some-id/response", { body: "{}", headers: { "x-inferd-content-type": `text/plain; x=${"a".repeat(5000)}` } });
    expect((await errorOf(long)).field).toBe("x-inferd-content-type");
  });
});
