import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { cleanup, startInferd, tempDir, waitFor } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";
import { makeTestPki, type TestPki } from "./fixtures/tls";
import { startReceiver, type Receiver } from "./fixtures/receiver";

/**
 * The security probe's findings that need real runtimes: what reaches a runtime's environment, how
 * many request bytes inferd holds at once, file modes in the data dir, a command steering the data
 * plane, tenants pinning to workers, and a webhook deleted while its delivery is in flight.
 */
let s: Serving;
let pki: TestPki;
const receivers: Receiver[] = [];
beforeAll(async () => {
  pki = makeTestPki(tempDir("pki"), ["localhost"]);
  s = await startServing({
    INFERD_ADMIN_TOKEN: "ik_admin_runtime-must-never-see-this-0123456789abcdef",
    INFERD_METRICS_TOKEN: "metrics-secret",
    SOME_OPERATOR_SECRET: "aws-key",
    HF_TOKEN: "hf_for_gated_models",
    INFERD_ALLOW_PRIVATE_WEBHOOKS: "1",
    INFERD_WEBHOOK_CA_FILE: pki.caFile,
    INFERD_WEBHOOK_RETRY_SCHEDULE: "200ms,200ms,200ms,200ms,200ms",
    INFERD_MAX_DATA_BODY_BYTES: String(1 << 20),
    INFERD_MAX_BUFFERED_BYTES: String(1 << 20),
  });
});
afterAll(async () => {
  await s.stop();
  await Promise.all(receivers.map((r) => r.close()));
  await cleanup();
});

test("a runtime's environment holds the allow-list and the operator's extras, never INFERD_* or other secrets", async () => {
  const w = await s.createWorkload({
    name: "env",
    backend: "vllm",
    model_name: "env",
    config: { command: "vllm serve env" },
  });
  await s.waitState(w.id);
  const start = s.events((e) => e.event === "start" && (e.argv as string[]).includes("env")).at(-1)!;
  const names = String((start.env as Record<string, string>).NAMES).split(",");
  expect(names.filter((n) => n.startsWith("INFERD_"))).toEqual([]);
  expect(names).not.toContain("SOME_OPERATOR_SECRET");
  expect(names).toEqual(expect.arrayContaining(["PATH", "HF_TOKEN", "CUDA_VISIBLE_DEVICES", "FAKE_RECORD"]));
});

test("a command's --host cannot expose the runtime or steer inferd to another address", async () => {
  const w = await s.createWorkload({
    name: "steer",
    backend: "vllm",
    model_name: "steer",
    config: { command: "vllm serve steer --host 10.255.255.1" },
  });
  const d = await s.waitState(w.id);
  expect(d.assignments[0].base_url).toStartWith("http://127.0.0.1:");
  const argv = (
    s.events((e) => e.event === "start" && (e.argv as string[]).includes("steer")).at(-1)!.argv as string[]
  ).join(" ");
  expect(argv).not.toContain("10.255.255.1");
  expect(argv).toContain("--host 127.0.0.1");
  const r = await s.data("steer", "/v1/chat/completions", { body: { messages: [{ role: "user", content: "hi" }] } });
  expect(r.status).toBe(200);
});

test("a tenant may pin a workload only to a worker the operator opened to its project", async () => {
  const workers = await (await s.admin("/admin/workers")).json();
  const local = workers[0];
  expect(local.open_to).toEqual([]);
  const create = (name: string) =>
    fetch(`${s.url}/api/projects/${s.project}/workloads`, {
      method: "POST",
      headers: { authorization: `Bearer ${s.sdk}`, "content-type": "application/json" },
      body: JSON.stringify({ name, backend: "ollama", model_name: "m", worker_id: local.name }),
    });
  const refused = await create("pinned");
  expect(refused.status).toBe(403);
  expect((await refused.json()).error).toMatchObject({ code: "worker_not_allowed", field: "worker_id" });
  const opened = await s.admin(`/admin/workers/${local.id}`, { method: "PATCH", body: { open_to: [s.project] } });
  expect((await opened.json()).open_to).toHaveLength(1);
  expect((await create("pinned")).status).toBe(201);
});

test("request bodies held at once are bounded: past the budget a request gets 503 with Retry-After", async () => {
  // A replica that takes a long time to start: requests wait in the queue holding their bodies.
  const w = await s.createWorkload({
    name: "slowstart",
    backend: "llamacpp",
    model_name: "slow",
    config: { command: "bash -c 'sleep 600'" },
  });
  await waitFor(async () => (await s.workload(w.id)).assignments[0]?.state === "starting" || undefined, {
    what: "the replica starting",
  });
  const body = JSON.stringify({ messages: [{ role: "user", content: "x".repeat(700_000) }] });
  const ctl = new AbortController();
  const first = s
    .data("slowstart", "/v1/chat/completions", {
      raw: body,
      headers: { "content-type": "application/json" },
      signal: ctl.signal,
    })
    .catch(() => null);
  await waitFor(async () => (await s.workload(w.id)).queue_depth === 1 || undefined, {
    what: "the first request queued",
  });
  const second = await s.data("slowstart", "/v1/chat/completions", {
    raw: body,
    headers: { "content-type": "application/json" },
  });
  expect(second.status).toBe(503);
  expect(second.headers.get("retry-after")).toBe("1");
  expect((await second.json()).error.code).toBe("server_busy");
  ctl.abort();
  await first;
  // The first one's bytes are given back once it is gone.
  await waitFor(async () => (await s.workload(w.id)).queue_depth === 0 || undefined, { what: "the queue empty" });
  const third = await s.data("slowstart", "/jobs", {
    body: { kind: "chat", body: { messages: [{ role: "user", content: "x".repeat(700_000) }] } },
  });
  expect(third.status).toBe(202);
});

test("uploads stream to a local runtime: several near the body limit at once pass where buffered bodies would be refused; past the limit is 413", async () => {
  const w = await s.createWorkload({
    name: "whisper",
    backend: "vllm",
    model_name: "whisper",
    task_type: "audio2text",
    config: { command: "vllm serve whisper" },
  });
  await s.waitState(w.id);
  const upload = (bytes: number) => {
    const form = new FormData();
    form.append("model", "whisper");
    form.append("file", new Blob([new Uint8Array(bytes).fill(7)], { type: "audio/wav" }), "speech.wav");
    return s.data(w.slug, "/v1/audio/transcriptions", { raw: form });
  };
  // Four of 900 KB at once: 3.6 MB against a 1 MiB budget for buffered bodies.
  const answers = await Promise.all([1, 2, 3, 4].map(() => upload(900_000)));
  expect(answers.map((r) => r.status)).toEqual([200, 200, 200, 200]);
  // Each reached the runtime whole: the fake echoes the size it read.
  for (const r of answers) expect((await r.json()).bytes).toBeGreaterThan(900_000);
  // Sent without a length (chunked), past the limit: refused with 413 as it streams.
  const big = new ReadableStream<Uint8Array>({
    start(c) {
      for (let i = 0; i < 24; i++) c.enqueue(new Uint8Array(65_536));
      c.close();
    },
  });
  const r = await fetch(`${s.url}/endpoint/${s.project}/${w.slug}/v1/audio/transcriptions`, {
    method: "POST",
    headers: { authorization: `Bearer ${s.live}`, "content-type": "multipart/form-data; boundary=x" },
    body: big,
    duplex: "half",
  } as RequestInit);
  expect(r.status).toBe(413);
  expect((await r.json()).error.code).toBe("payload_too_large");
});

test("a webhook deleted while its delivery is in flight ends it quietly as cancelled", async () => {
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const rcv = await startReceiver({ pki, behaviour: async () => (await held, { status: 500 }) });
  receivers.push(rcv);
  const w = await s.createWorkload({
    name: "hooked",
    backend: "vllm",
    model_name: "hooked",
    config: { command: "vllm serve hooked" },
  });
  await s.waitState(w.id);
  const hook = await (await s.admin(`/admin/workloads/${w.id}/webhooks`, { body: { url: rcv.url("/h") } })).json();
  const { job_id } = await (
    await s.data("hooked", "/jobs", { body: { kind: "chat", body: { messages: [{ role: "user", content: "hi" }] } } })
  ).json();
  await rcv.waitForRequests(1, 15_000);
  expect((await s.admin(`/admin/webhooks/${hook.id}`, { method: "DELETE" })).status).toBe(200);
  release();
  const job = await waitFor(
    async () => {
      const j = await (await s.data("hooked", `/jobs/${job_id}`)).json();
      return j.deliveries[0]?.state === "cancelled" ? j : undefined;
    },
    { what: "the delivery cancelled" },
  );
  expect(job.deliveries[0]).toMatchObject({
    state: "cancelled",
    last_error: "the destination was deleted",
    next_attempt_at: null,
  });
  expect(s.output()).not.toMatch(/FOREIGN KEY|unexpectedly/);
  expect(await (await s.admin(`/admin/workloads/${w.id}/webhooks`)).json()).toEqual([]);
});

describe("files on disk", () => {
  const mode = (p: string) => statSync(p).mode & 0o777;
  const everything = (dir: string): string[] =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? [join(dir, e.name), ...everything(join(dir, e.name))] : [join(dir, e.name)],
    );

  test("a fresh data dir is owner-only: the dir 0700, the store, its WAL, the token and the logs 0600", async () => {
    expect(mode(s.dataDir)).toBe(0o700);
    for (const f of ["inferd.db", "inferd.db-wal", "admin-token"].filter((f) => readdirSync(s.dataDir).includes(f)))
      expect(mode(join(s.dataDir, f))).toBe(0o600);
    const logs = everything(join(s.dataDir, "logs"));
    expect(logs.length).toBeGreaterThan(0);
    for (const p of logs) expect(mode(p) & 0o077).toBe(0);
  });

  test("a loose existing data dir is tightened at start, with a warning naming what was wider", async () => {
    const dataDir = tempDir("loose");
    const first = await startInferd({ dataDir });
    await first.stop();
    chmodSync(dataDir, 0o755);
    chmodSync(join(dataDir, "inferd.db"), 0o644);
    const again = await startInferd({ dataDir, env: { INFERD_LOG_LEVEL: "warn" } });
    try {
      expect(mode(dataDir)).toBe(0o700);
      expect(mode(join(dataDir, "inferd.db"))).toBe(0o600);
      expect(again.output()).toContain(`${join(dataDir, "inferd.db")} was 0644, now 0600`);
      expect(again.output()).toContain(`${dataDir} was 0755, now 0700`);
    } finally {
      await again.stop();
    }
  });
});
