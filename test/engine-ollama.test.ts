import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { ollama, ollamaAddress } from "../agent/engines/ollama";
import { fixtureEnv, freePort, parseGpus, readRecord, spawnFixture, waitHealthy } from "./fixtures";
import { parseOllamaHost } from "./fixtures/ollama/envconfig";
import { cleanup, tempDir, waitFor } from "./helpers/proc";
import { servingPool } from "./helpers/serving";

/**
 * Ollama as it really is (issue 34, M9 M10 M13 and the OLLAMA_NUM_PARALLEL default): inferd's reading
 * of OLLAMA_HOST, the daemon's GPUs and keep-alive, and a replica that follows what /api/ps says; the
 * fake daemon behaves as Ollama's source says (envconfig/config.go, server/sched.go, discover/).
 */
const { serve, stopAll } = servingPool();
afterAll(async () => {
  await stopAll();
  await cleanup();
});

// envconfig/config_test.go TestHost (v0.12.6): OLLAMA_HOST → Host().String(); then forms it leaves out.
const HOSTS: [string, string][] = [
  ["", "http://127.0.0.1:11434"],
  ["1.2.3.4", "http://1.2.3.4:11434"],
  [":1234", "http://:1234"],
  ["1.2.3.4:1234", "http://1.2.3.4:1234"],
  ["example.com", "http://example.com:11434"],
  ["example.com:1234", "http://example.com:1234"],
  [":0", "http://:0"],
  [":66000", "http://:11434"],
  [":-1", "http://:11434"],
  ["[::1]", "http://[::1]:11434"],
  ["[::]", "http://[::]:11434"],
  ["::1", "http://[::1]:11434"],
  ["[::1]:1337", "http://[::1]:1337"],
  [" 1.2.3.4 ", "http://1.2.3.4:11434"],
  ['"1.2.3.4"', "http://1.2.3.4:11434"],
  [' " 1.2.3.4 " ', "http://1.2.3.4:11434"],
  ["'1.2.3.4'", "http://1.2.3.4:11434"],
  ["http://1.2.3.4", "http://1.2.3.4:80"],
  ["http://1.2.3.4:4321", "http://1.2.3.4:4321"],
  ["https://1.2.3.4", "https://1.2.3.4:443"],
  ["https://1.2.3.4:4321", "https://1.2.3.4:4321"],
  ["https://example.com/ollama", "https://example.com:443/ollama"],
  ["ollama.com", "https://ollama.com:443"],
  // The same Host() on forms its test leaves out.
  ["::", "http://[::]:11434"],
  ["0.0.0.0", "http://0.0.0.0:11434"],
  ["example.com:abc", "http://example.com:11434"],
  ["tcp://example.com", "tcp://example.com:11434"],
  ["::ffff:10.0.0.1", "http://10.0.0.1:11434"],
  ["http://[::1]", "http://[::1]:80"],
];

/** Host().Host of an expected Host().String(). */
const hostOf = (url: string) => url.replace(/^[a-z]+:\/\//, "").replace(/\/.*$/, "");

describe("OLLAMA_HOST, as envconfig.Host() parses it (M13)", () => {
  test.each(HOSTS)("%p → %p (inferd and the fake daemon alike)", (value, expected) => {
    const a = ollamaAddress(value || undefined);
    expect(a.bind).toBe(hostOf(expected));
    const fake = parseOllamaHost(value);
    expect(`${fake.host.includes(":") ? `[${fake.host}]` : fake.host}:${fake.port}`).toBe(hostOf(expected));
  });

  test("inferd connects where a client reaches the daemon: unspecified addresses become loopback (ConnectableHost)", () => {
    expect(ollamaAddress(":8080")).toMatchObject({ host: "127.0.0.1", port: 8080, url: "http://127.0.0.1:8080" });
    expect(ollamaAddress("::")).toMatchObject({ host: "::1", port: 11434, url: "http://[::1]:11434" });
    expect(ollamaAddress("0.0.0.0:9999")).toMatchObject({ host: "127.0.0.1", url: "http://127.0.0.1:9999" });
    expect(ollamaAddress("http://10.1.2.3")).toMatchObject({ host: "10.1.2.3", port: 80 });
  });

  test("OLLAMA_HOST=:port launches: the daemon binds every interface, inferd reaches it on loopback", async () => {
    const port = await freePort();
    const s = await serve({ OLLAMA_HOST: `:${port}`, FAKE_OLLAMA_DIR: tempDir("ollama"), FAKE_PULL_MS: "20" });
    const w = await s.createWorkload({ name: "colon", backend: "ollama", model_name: "llama3.2" });
    const ready = await s.waitState(w.id);
    expect(ready.assignments[0].base_url).toBe(`http://127.0.0.1:${port}`);
    const r = await s.data(w.slug, "/v1/chat/completions", {
      body: { model: "llama3.2", messages: [{ role: "user", content: "hi" }] },
    });
    expect(r.status).toBe(200);
  });
});

describe("OLLAMA_NUM_PARALLEL (LOW)", () => {
  test("capacity reads it as envconfig.Uint does, at least 1; unset it is 1 (Ollama's default since v0.9.7)", () => {
    const slots = (v?: string) => ollama.capacity({ args: [], gpus: [], env: { OLLAMA_NUM_PARALLEL: v } }).slots;
    expect(slots()).toBe(1);
    expect(slots("4")).toBe(4);
    expect(slots(' "3" ')).toBe(3);
    expect(slots("0")).toBe(1);
    expect(slots("0x10")).toBe(1);
    expect(slots("-2")).toBe(1);
  });

  test.each([
    ["0.12.6", undefined, 1],
    ["0.9.7", undefined, 1],
    ["0.9.6", undefined, 2],
    ["0.6.7", undefined, 2],
    ["0.6.6", undefined, 4],
    ["0.9.6", "0", 2],
    ["0.12.6", "3", 3],
  ])("the fake daemon %s with OLLAMA_NUM_PARALLEL=%p serves %p at once", async (version, parallel, expected) => {
    const daemon = await startDaemon({
      FAKE_OLLAMA_VERSION: version,
      ...(parallel ? { OLLAMA_NUM_PARALLEL: parallel } : {}),
    });
    expect((await (await fetch(`${daemon.url}/fake/stats`)).json()).max_running).toBe(expected);
  });
});

/** Starts the fake `ollama serve` on a free port with `env`, with llama3.2 pulled. */
async function startDaemon(env: Record<string, string>) {
  const port = await freePort();
  const record = join(tempDir("ollama-record"), "events.jsonl");
  const all = fixtureEnv({
    OLLAMA_HOST: `127.0.0.1:${port}`,
    FAKE_OLLAMA_DIR: tempDir("ollama"),
    FAKE_PULL_MS: "10",
    FAKE_RECORD: record,
    ...env,
  });
  const proc = spawnFixture(["ollama", "serve"], all);
  daemons.push(proc);
  const url = `http://127.0.0.1:${port}`;
  await waitHealthy(url, { path: "/api/version" });
  await fetch(`${url}/api/pull`, { method: "POST", body: JSON.stringify({ model: "llama3.2", stream: false }) });
  return { url, proc, events: () => readRecord(record) };
}
const daemons: { proc: { kill(): void } }[] = [];
afterAll(() => {
  for (const d of daemons) d.proc.kill();
});

const chat = (url: string, extra: Record<string, unknown> = {}) =>
  fetch(`${url}/api/chat`, {
    method: "POST",
    body: JSON.stringify({ model: "llama3.2", messages: [{ role: "user", content: "hi" }], stream: false, ...extra }),
  });

const ps = async (url: string) =>
  ((await (await fetch(`${url}/api/ps`)).json()) as { models: { name: string; expires_at: string }[] }).models;

describe("the fake daemon keeps models as server/sched.go does (M10)", () => {
  test("a request loads the model; OLLAMA_KEEP_ALIVE=2s unloads it 2 s after it went idle", async () => {
    const d = await startDaemon({ OLLAMA_KEEP_ALIVE: "2s" });
    expect(await ps(d.url)).toEqual([]);
    expect((await chat(d.url)).status).toBe(200);
    const idle = Date.now();
    expect((await ps(d.url)).map((m) => m.name)).toEqual(["llama3.2:latest"]);
    await waitFor(async () => (await ps(d.url)).length === 0, { what: "the model unloaded", timeoutMs: 10_000 });
    expect(Date.now() - idle).toBeGreaterThanOrEqual(1900);
    expect(d.events().filter((e) => e.event === "unload")).toMatchObject([
      { model: "llama3.2:latest", reason: "expired" },
    ]);
  });

  test("OLLAMA_KEEP_ALIVE=-1 keeps it (expires_at centuries ahead); keep_alive 0 with no prompt unloads it at once", async () => {
    const d = await startDaemon({ OLLAMA_KEEP_ALIVE: "-1" });
    await chat(d.url);
    const [m] = await ps(d.url);
    expect(new Date(m.expires_at).getFullYear()).toBeGreaterThan(2200);
    const r = await fetch(`${d.url}/api/generate`, {
      method: "POST",
      body: JSON.stringify({ model: "llama3.2", keep_alive: 0 }),
    });
    expect(await r.json()).toMatchObject({ done: true, done_reason: "unload" });
    expect(await ps(d.url)).toEqual([]);
  });

  test("unset, a model stays 5 minutes (envconfig.KeepAlive's default); a request's keep_alive overrides it", async () => {
    const d = await startDaemon({});
    await chat(d.url);
    const left = Date.parse((await ps(d.url))[0].expires_at) - Date.now();
    expect(left).toBeGreaterThan(290_000);
    expect(left).toBeLessThanOrEqual(300_000);
    await chat(d.url, { keep_alive: "1s" });
    await waitFor(async () => (await ps(d.url)).length === 0, {
      what: "the model unloaded after 1s",
      timeoutMs: 10_000,
    });
  });
});

describe("the fake daemon's GPUs (M9)", () => {
  test("it discovers only what CUDA_VISIBLE_DEVICES leaves it, in that order, as the CUDA runtime enumerates", async () => {
    const gpus = "3x NVIDIA GeForce RTX 4090:24564";
    const uuid = parseGpus(gpus)[2].uuid;
    const cases: [string | undefined, number[]][] = [
      [undefined, [0, 1, 2]],
      ["1", [1]],
      ["2,0", [2, 0]],
      [uuid.slice(0, 12), [2]],
      ["0,7,1", [0]],
      ["", []],
    ];
    for (const [visible, expected] of cases) {
      const d = await startDaemon({
        FAKE_GPUS: gpus,
        ...(visible !== undefined ? { CUDA_VISIBLE_DEVICES: visible } : {}),
      });
      expect(d.events().find((e) => e.event === "start")?.gpus).toEqual(expected);
      const lines = d.proc
        .output()
        .split("\n")
        .filter((l) => l.includes('msg="inference compute"'));
      expect(lines.length).toBe(Math.max(1, expected.length));
      if (!expected.length) expect(lines[0]).toContain("library=cpu");
      d.proc.proc.kill();
    }
  });
});

describe("the daemon inferd starts (M9, M10)", () => {
  test("it sees the GPUs of its workloads only, is restarted when they change, keeps models loaded; a replica reloads a model the daemon dropped", async () => {
    const port = await freePort();
    const s = await serve({ OLLAMA_HOST: `127.0.0.1:${port}`, FAKE_OLLAMA_DIR: tempDir("ollama"), FAKE_PULL_MS: "20" });
    const [gpu0, gpu1] = parseGpus("2x NVIDIA GeForce RTX 4090:24564");
    const base = `http://127.0.0.1:${port}`;
    const a = await s.createWorkload({
      name: "a",
      backend: "ollama",
      model_name: "llama3.2",
      gpu_resource_id: gpu1.uuid,
    });
    expect((await s.waitState(a.id)).assignments[0].gpu_indices).toEqual([1]);
    const starts = () => s.events((e) => e.event === "start" && e.persona === "ollama");
    expect(starts().map((e) => e.gpus)).toEqual([[1]]);
    // Ready means loaded, and kept: the daemon got OLLAMA_KEEP_ALIVE=-1.
    const [loaded] = await ps(base);
    expect(loaded.name).toBe("llama3.2:latest");
    expect(new Date(loaded.expires_at).getFullYear()).toBeGreaterThan(2200);

    const b = await s.createWorkload({
      name: "b",
      backend: "ollama",
      model_name: "qwen2.5",
      gpu_resource_id: gpu0.uuid,
    });
    await s.waitState(b.id);
    await s.waitState(a.id);
    expect(starts().map((e) => e.gpus)).toEqual([[1], [0, 1]]);
    await waitFor(async () => (await ps(base)).length === 2, { what: "both models loaded again", timeoutMs: 20_000 });

    // Something unloads a's model (`ollama stop`): its replica says so and loads it again.
    await fetch(`${base}/api/generate`, { method: "POST", body: JSON.stringify({ model: "llama3.2", keep_alive: 0 }) });
    const log = async () => (await (await s.admin(`/admin/workloads/${a.id}/logs`)).json()).replicas[0].text as string;
    await waitFor(async () => (await log()).includes("no longer has llama3.2 loaded: loading it again"), {
      what: "the replica's note",
      timeoutMs: 20_000,
    });
    await waitFor(async () => (await ps(base)).some((m) => m.name === "llama3.2:latest"), {
      what: "llama3.2 loaded again",
      timeoutMs: 20_000,
    });
    await s.waitState(a.id);

    // b goes: the daemon is restarted with a's GPU only.
    expect((await s.admin(`/admin/workloads/${b.id}`, { method: "DELETE" })).status).toBeLessThan(300);
    await waitFor(() => starts().length === 3, { what: "the daemon restarted without GPU 0", timeoutMs: 20_000 });
    expect(starts().at(-1)?.gpus).toEqual([1]);
  });

  test("a daemon inferd did not start is left alone, and the replica's log says so", async () => {
    const d = await startDaemon({ FAKE_GPUS: "2x NVIDIA GeForce RTX 4090:24564" });
    const s = await serve({ OLLAMA_HOST: d.url.replace("http://", ""), FAKE_PULL_MS: "20" });
    const w = await s.createWorkload({ name: "theirs", backend: "ollama", model_name: "llama3.2" });
    await s.waitState(w.id);
    const text = (await (await s.admin(`/admin/workloads/${w.id}/logs`)).json()).replicas[0].text as string;
    expect(text).toContain("a daemon inferd did not start answers");
    expect(s.events((e) => e.event === "start" && e.persona === "ollama")).toEqual([]);
  });
});
