// LoRA adapters in the fake engines (vLLM, SGLang, llama-server), checked as a user of each real
// engine sees them: status codes, bodies, model lists, load times, eviction and refusals.

import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  type FakeRuntime,
  type FakeRuntimeOptions,
  fixtureEnv,
  freePort,
  readRecord,
  spawnFixture,
  startFakeRuntime,
} from "./fixtures";
import { writeGgufLora, writePeftAdapter } from "./fixtures/adapters";
import { readGgufMetadata, writeTinyGguf } from "./fixtures/gguf";
import { waitFor } from "./helpers/proc";

const TMP = mkdtempSync(join(tmpdir(), "inferd-lora-"));
const runtimes: FakeRuntime[] = [];
const LOAD_MS = 150;
const RUNTIME_UPDATES = { VLLM_ALLOW_RUNTIME_LORA_UPDATING: "True", FAKE_LORA_LOAD_MS: String(LOAD_MS) };

afterAll(async () => {
  for (const rt of runtimes) await rt.stop();
  rmSync(TMP, { recursive: true, force: true });
});

let n = 0;
/** A fresh PEFT adapter folder. */
const peft = (rank = 8, targetModules?: string[]) =>
  writePeftAdapter(join(TMP, `adapter-${n++}`), { base: "base", rank, targetModules });

/** Starts an in-process fake and waits until it serves. */
async function start(opts: FakeRuntimeOptions, env: Record<string, string> = RUNTIME_UPDATES): Promise<FakeRuntime> {
  const rt = await startFakeRuntime({ port: 0, loadMs: 0, model: "base", env, ...opts });
  runtimes.push(rt);
  await rt.ready;
  return rt;
}

const post = (rt: FakeRuntime, path: string, body: unknown) =>
  fetch(`${rt.url}${path}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });
const chat = (rt: FakeRuntime, body: Record<string, unknown>) =>
  post(rt, "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }], ...body });
const models = async (rt: FakeRuntime) =>
  ((await (await fetch(`${rt.url}/v1/models`)).json()) as { data: Record<string, unknown>[] }).data;

describe("adapters on disk", () => {
  test("a PEFT folder has a valid config and safetensors file", () => {
    const dir = writePeftAdapter(join(TMP, "peft-check"), { base: "org/base", rank: 4 });
    const cfg = JSON.parse(readFileSync(join(dir, "adapter_config.json"), "utf8"));
    expect(cfg).toMatchObject({ peft_type: "LORA", base_model_name_or_path: "org/base", r: 4, lora_alpha: 8 });
    const bytes = readFileSync(join(dir, "adapter_model.safetensors"));
    const len = Number(bytes.readBigUInt64LE(0));
    const header = JSON.parse(bytes.subarray(8, 8 + len).toString("utf8"));
    const a = header["base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"];
    expect(a).toMatchObject({ dtype: "F32", shape: [4, 64] });
    const last = Math.max(
      ...Object.values(header).flatMap((t) => (t as { data_offsets?: number[] }).data_offsets ?? []),
    );
    expect(bytes.length).toBe(8 + len + last);
  });

  test("a GGUF LoRA carries the keys llama.cpp checks", () => {
    const path = writeGgufLora(join(TMP, "check.gguf"), { architecture: "qwen2", rank: 4, alpha: 8 });
    expect(readGgufMetadata(path)).toMatchObject({
      "general.type": "adapter",
      "adapter.type": "lora",
      "adapter.lora.alpha": 8,
      "general.architecture": "qwen2",
    });
  });
});

describe("fake vLLM LoRA", () => {
  test("the runtime routes exist only with VLLM_ALLOW_RUNTIME_LORA_UPDATING", async () => {
    const rt = await start({ persona: "vllm", lora: { enabled: true, modules: [], maxLoras: 1, maxRank: 16 } }, {});
    const res = await post(rt, "/v1/load_lora_adapter", { lora_name: "a", lora_path: peft() });
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ detail: "Not Found" });
  });

  test("load, list, use, refuse a duplicate, unload", async () => {
    const record = join(TMP, "vllm-cycle.jsonl");
    const rt = await start({
      persona: "vllm",
      recordFile: record,
      lora: { enabled: true, modules: [], maxLoras: 1, maxRank: 16 },
    });
    const path = peft();
    const t0 = Date.now();
    const loaded = await post(rt, "/v1/load_lora_adapter", { lora_name: "sql", lora_path: path });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(LOAD_MS - 5);
    expect(loaded.status).toBe(200);
    expect(await loaded.text()).toBe("Success: LoRA adapter 'sql' added successfully.");
    expect((await models(rt)).map((m) => [m.id, m.parent, m.root])).toEqual([
      ["base", null, "base"],
      ["sql", "base", path],
    ]);

    const t1 = Date.now();
    const answer = await chat(rt, { model: "sql" });
    expect(Date.now() - t1).toBeLessThan(LOAD_MS);
    expect(((await answer.json()) as { model: string }).model).toBe("sql");

    const again = await post(rt, "/v1/load_lora_adapter", { lora_name: "sql", lora_path: path });
    expect(again.status).toBe(400);
    expect(await again.json()).toEqual({
      error: {
        message: "The lora adapter 'sql' has already been loaded.",
        type: "InvalidUserInput",
        param: null,
        code: 400,
      },
    });
    const missing = await post(rt, "/v1/unload_lora_adapter", { lora_name: "nope" });
    expect(missing.status).toBe(404);
    expect(((await missing.json()) as { error: { message: string } }).error.message).toBe(
      "The lora adapter 'nope' cannot be found.",
    );
    const gone = await post(rt, "/v1/unload_lora_adapter", { lora_name: "sql" });
    expect(await gone.text()).toBe("Success: LoRA adapter 'sql' removed successfully.");
    const after = await chat(rt, { model: "sql" });
    expect(after.status).toBe(404);
    expect(((await after.json()) as { error: { message: string } }).error.message).toBe(
      "The model `sql` does not exist.",
    );
    const events = readRecord(record).filter((e) => String(e.event).startsWith("lora"));
    expect(events.map((e) => [e.event, e.name])).toEqual([
      ["lora_load", "sql"],
      ["lora", "sql"],
      ["lora_unload", "sql"],
    ]);
    expect(events[1]).toMatchObject({ loaded: true, pid: process.pid });
  });

  test("refuses a folder that is no adapter, a rank above --max-lora-rank, and LoRA turned off", async () => {
    const rt = await start({ persona: "vllm", lora: { enabled: true, modules: [], maxLoras: 1, maxRank: 16 } });
    const nowhere = join(TMP, "nowhere");
    const none = await post(rt, "/v1/load_lora_adapter", { lora_name: "x", lora_path: nowhere });
    expect(none.status).toBe(404);
    expect(await none.json()).toEqual({
      error: {
        message: `Call to add_lora method failed: Loading lora x failed: No adapter found for ${nowhere}`,
        type: "NotFoundError",
        param: null,
        code: 404,
      },
    });
    const big = await post(rt, "/v1/load_lora_adapter", { lora_name: "big", lora_path: peft(32) });
    expect(big.status).toBe(400);
    expect(((await big.json()) as { error: { message: string } }).error.message).toBe(
      "Call to add_lora method failed: LoRA rank 32 is greater than max_lora_rank 16.",
    );
    const off = await start({ persona: "vllm", lora: { enabled: false, modules: [], maxLoras: 1, maxRank: 16 } });
    const refused = await post(off, "/v1/load_lora_adapter", { lora_name: "a", lora_path: peft() });
    expect(refused.status).toBe(400);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toBe(
      "Call to add_lora method failed: LoRA is not enabled. Use --enable-lora to enable LoRA.",
    );
  });

  test("the CPU cache holds --max-cpu-loras adapters: an evicted one is read again on use", async () => {
    const record = join(TMP, "vllm-lru.jsonl");
    const rt = await start({
      persona: "vllm",
      recordFile: record,
      lora: { enabled: true, modules: [], maxLoras: 1, maxCpuLoras: 1, maxRank: 16 },
    });
    await post(rt, "/v1/load_lora_adapter", { lora_name: "a", lora_path: peft() });
    await post(rt, "/v1/load_lora_adapter", { lora_name: "b", lora_path: peft() });
    expect(rt.stats().lora).toMatchObject({ registered: ["a", "b"], loaded: ["b"], loads: 2 });
    const t0 = Date.now();
    expect((await chat(rt, { model: "a" })).status).toBe(200);
    expect(Date.now() - t0).toBeGreaterThanOrEqual(LOAD_MS - 5);
    const t1 = Date.now();
    expect((await chat(rt, { model: "a" })).status).toBe(200);
    expect(Date.now() - t1).toBeLessThan(LOAD_MS);
    expect(rt.stats().lora).toMatchObject({ loaded: ["a"], loads: 3 });
    const uses = readRecord(record).filter((e) => e.event === "lora");
    expect(uses.map((e) => e.loaded)).toEqual([false, true]);
    expect(
      readRecord(record)
        .filter((e) => e.event === "lora_unload")
        .map((e) => [e.name, e.reason]),
    ).toEqual([
      ["a", "evicted"],
      ["b", "evicted"],
    ]);
  });

  test("at most --max-loras distinct adapters run at once; the same adapter and the base model do not wait", async () => {
    const rt = await start({
      persona: "vllm",
      delayMs: 300,
      lora: { enabled: true, modules: [], maxLoras: 1, maxCpuLoras: 2, maxRank: 16 },
    });
    await post(rt, "/v1/load_lora_adapter", { lora_name: "a", lora_path: peft() });
    await post(rt, "/v1/load_lora_adapter", { lora_name: "b", lora_path: peft() });
    const done: Record<string, number> = {};
    const t0 = Date.now();
    const go = (label: string, model: string) =>
      chat(rt, { model }).then((r) => {
        done[label] = Date.now() - t0;
        return r.status;
      });
    const first = go("a1", "a");
    await waitFor(() => rt.stats().in_flight === 1 || undefined, { what: "the first request running" });
    expect(await Promise.all([first, go("a2", "a"), go("b", "b"), go("base", "base")])).toEqual([200, 200, 200, 200]);
    expect(done.b).toBeGreaterThanOrEqual(done.a2 + 250);
    expect(done.a2).toBeLessThan(550);
    expect(done.base).toBeLessThan(550);
  });

  test("--lora-modules load at start; one the engine refuses stops the start", async () => {
    const path = peft();
    const rt = await start({
      persona: "vllm",
      servedNames: ["served"],
      lora: { enabled: true, modules: [{ name: "sql", path, base: "served" }], maxLoras: 1, maxRank: 16 },
    });
    expect((await models(rt)).find((m) => m.id === "sql")).toMatchObject({ parent: "served", root: path });
    expect(rt.stats().lora?.loads).toBe(1);
    let out = "";
    const bad = await startFakeRuntime({
      persona: "vllm",
      port: 0,
      loadMs: 0,
      env: {},
      out: (t) => (out += t),
      onCrash: () => {},
      lora: { enabled: true, modules: [{ name: "big", path: peft(64) }], maxLoras: 1, maxRank: 16 },
    });
    runtimes.push(bad);
    await expect(bad.ready).rejects.toThrow("LoRA rank 64 is greater than max_lora_rank 16.");
    expect(out).toContain("ValueError: Call to add_lora method failed: LoRA rank 64 is greater than max_lora_rank 16.");
  });

  test("the program reads --lora-modules in both forms and refuses a --max-lora-rank it has no kernel for", async () => {
    const port = await freePort();
    const [a, b] = [peft(), peft()];
    const json = JSON.stringify({ name: "j", path: b, base_model_name: "m" });
    const env = fixtureEnv({ FAKE_LOAD_MS: "20", FAKE_LORA_LOAD_MS: "10" });
    const srv = spawnFixture(
      ["vllm", "serve", "m", "--port", String(port), "--enable-lora", "--lora-modules", `sql=${a}`, json],
      env,
      TMP,
    );
    try {
      const url = `http://127.0.0.1:${port}/v1/models`;
      const list = await waitFor(
        async () => {
          const r = await fetch(url).catch(() => undefined);
          return r?.ok ? ((await r.json()) as { data: { id: string; root: string }[] }) : undefined;
        },
        { what: "vllm serving" },
      );
      expect(list.data.map((m) => [m.id, m.root])).toEqual([
        ["m", "m"],
        ["sql", a],
        ["j", b],
      ]);
    } finally {
      srv.proc.kill("SIGTERM");
      await srv.exited;
    }
    const bad = Bun.spawnSync(["vllm", "serve", "m", "--max-lora-rank", "24"], { env, cwd: TMP });
    expect(bad.exitCode).toBe(2);
    expect(bad.stderr.toString()).toContain(
      "argument --max-lora-rank: invalid choice: 24 (choose from 1, 8, 16, 32, 64, 128, 256, 320, 512)",
    );
  });
});

describe("fake SGLang LoRA", () => {
  const sglang = (extra: Partial<FakeRuntimeOptions["lora"]> = {}, version = "0.5.3", recordFile?: string) =>
    start({
      persona: "sglang",
      version,
      recordFile,
      lora: { enabled: true, modules: [], maxLoras: 8, maxRank: 16, targetModules: ["q_proj", "v_proj"], ...extra },
    });

  test("load and unload answer {success, error_message, loaded_adapters}", async () => {
    const rt = await sglang({ maxLoaded: 2 });
    const [a, b, c] = [peft(), peft(), peft()];
    const t0 = Date.now();
    const ok = await post(rt, "/load_lora_adapter", { lora_name: "a", lora_path: a });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(LOAD_MS - 5);
    expect(ok.status).toBe(200);
    expect(await ok.json()).toEqual({ success: true, error_message: null, loaded_adapters: { a } });
    const dup = await post(rt, "/load_lora_adapter", { lora_name: "a", lora_path: a });
    expect(dup.status).toBe(400);
    expect(await dup.json()).toEqual({
      success: false,
      error_message: "LoRA with name a already exists. Loaded LoRAs: dict_keys(['a'])",
      loaded_adapters: null,
    });
    await post(rt, "/load_lora_adapter", { lora_name: "b", lora_path: b });
    const full = await post(rt, "/load_lora_adapter", { lora_name: "c", lora_path: c });
    expect(full.status).toBe(400);
    expect(((await full.json()) as { error_message: string }).error_message).toBe(
      `Cannot load LoRA adapter c at path ${c}. Maximum number of loaded LoRA adapters is 2. Please unload some LoRA adapters before loading new ones.`,
    );
    const unknown = await post(rt, "/unload_lora_adapter", { lora_name: "z" });
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toEqual({
      success: false,
      error_message: "LoRA with name z does not exist. Loaded LoRAs: dict_keys(['a', 'b'])",
      loaded_adapters: null,
    });
    const gone = await post(rt, "/unload_lora_adapter", { lora_name: "a" });
    expect(await gone.json()).toEqual({ success: true, error_message: null, loaded_adapters: { b } });
  });

  test("refuses an adapter the memory pool cannot hold, and loads nothing with LoRA off", async () => {
    const rt = await sglang();
    const big = await post(rt, "/load_lora_adapter", { lora_name: "big", lora_path: peft(32) });
    expect(((await big.json()) as { error_message: string }).error_message).toStartWith(
      "LoRA adapter big with rank 32 is incompatible with the current LoRA memory pool configuration.",
    );
    const mlp = await post(rt, "/load_lora_adapter", { lora_name: "mlp", lora_path: peft(8, ["down_proj"]) });
    expect(mlp.status).toBe(400);
    const off = await start({ persona: "sglang", lora: { enabled: false, modules: [], maxLoras: 8 } });
    const refused = await post(off, "/load_lora_adapter", { lora_name: "a", lora_path: peft() });
    expect(await refused.json()).toEqual({
      success: false,
      error_message: "LoRA is not enabled. Please set `--enable-lora` to enable LoRA.",
      loaded_adapters: null,
    });
    const asked = await chat(off, { lora_path: "a" });
    expect(asked.status).toBe(400);
  });

  test("a request names its adapter by lora_path; `base:adapter` only from 0.5.4", async () => {
    const record = join(TMP, "sglang-use.jsonl");
    const old = await sglang({ modules: [{ name: "sql", path: peft() }] }, "0.5.3", record);
    expect((await models(old)).map((m) => m.id)).toEqual(["base"]);
    expect((await chat(old, { model: "base", lora_path: "sql" })).status).toBe(200);
    expect((await chat(old, { model: "base:sql" })).status).toBe(200);
    const unknown = await chat(old, { lora_path: "nope" });
    expect(unknown.status).toBe(400);
    expect(await unknown.json()).toEqual({
      object: "error",
      message: "The following requested LoRA adapters are not loaded: nope\nLoaded adapters: dict_keys(['sql']).",
      type: "BadRequestError",
      param: null,
      code: 400,
    });
    expect(readRecord(record).filter((e) => e.event === "lora").length).toBe(1);

    const record2 = join(TMP, "sglang-use-054.jsonl");
    const path = peft();
    const newer = await sglang({ modules: [{ name: "sql", path }] }, "0.5.4", record2);
    expect((await models(newer)).find((m) => m.id === "sql")).toMatchObject({ parent: "base", root: path });
    expect((await chat(newer, { model: "base:sql" })).status).toBe(200);
    expect(readRecord(record2).filter((e) => e.event === "lora")).toMatchObject([{ name: "sql", loaded: false }]);
  });

  test("a batch holds --max-loras-per-batch distinct adapters, the base model counting as one", async () => {
    const rt = await start({
      persona: "sglang",
      delayMs: 300,
      lora: { enabled: true, modules: [{ name: "a", path: peft() }], maxLoras: 1 },
    });
    const done: Record<string, number> = {};
    const t0 = Date.now();
    const go = (label: string, body: Record<string, unknown>) =>
      chat(rt, body).then((r) => {
        done[label] = Date.now() - t0;
        return r.status;
      });
    const first = go("a", { lora_path: "a" });
    await waitFor(() => rt.stats().in_flight === 1 || undefined, { what: "the adapter's request running" });
    expect(rt.stats().lora?.active).toEqual(["a"]);
    expect(await Promise.all([first, go("base", {})])).toEqual([200, 200]);
    expect(done.base).toBeGreaterThanOrEqual(done.a + 250);
  });

  test("the program reads --lora-paths in its three forms and turns LoRA on", async () => {
    const port = await freePort();
    const [a, b, c] = [peft(), peft(), peft()];
    const json = JSON.stringify({ lora_name: "j", lora_path: c });
    const env = fixtureEnv(
      { FAKE_LOAD_MS: "20", FAKE_LORA_LOAD_MS: "10", FAKE_SGLANG_VERSION: "0.5.4" },
      { sglang: true },
    );
    const srv = spawnFixture(
      [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "m",
        "--port",
        String(port),
        "--lora-paths",
        `x=${a}`,
        b,
        json,
      ],
      env,
      TMP,
    );
    try {
      const list = await waitFor(
        async () => {
          const r = await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined);
          if (!r?.ok) return undefined;
          return ((await (await fetch(`http://127.0.0.1:${port}/v1/models`)).json()) as { data: { id: string }[] })
            .data;
        },
        { what: "sglang serving", detail: srv.output },
      );
      expect(list.map((m) => m.id)).toEqual(["m", "x", b, "j"]);
    } finally {
      srv.proc.kill("SIGTERM");
      await srv.exited;
    }
  });

  test("without initial --lora-paths the pool needs --max-lora-rank and --lora-target-modules", async () => {
    let out = "";
    const rt = await startFakeRuntime({
      persona: "sglang",
      port: 0,
      loadMs: 0,
      env: {},
      out: (t) => (out += t),
      onCrash: () => {},
      lora: { enabled: true, modules: [], maxLoras: 8 },
    });
    runtimes.push(rt);
    await expect(rt.ready).rejects.toThrow("When no initial --lora-paths is provided");
    expect(out).toContain("AssertionError: When no initial --lora-paths is provided, you need to specify both");
  });
});

describe("fake llama-server LoRA", () => {
  const model = writeTinyGguf(join(TMP, "tiny.gguf")).path;
  const llama = (files: { path: string; scale: number }[], version = "b6620", recordFile?: string) =>
    start({ persona: "llama-server", model, version, recordFile, lora: { enabled: true, modules: [], files } });

  test("lists its adapters, applies scales, and takes a per-request lora", async () => {
    const record = join(TMP, "llama.jsonl");
    const a = writeGgufLora(join(TMP, "a.gguf"), { architecture: "llama", rank: 8 });
    const b = writeGgufLora(join(TMP, "b.gguf"), { architecture: "llama", rank: 8 });
    const rt = await llama(
      [
        { path: a, scale: 1 },
        { path: b, scale: 0 },
      ],
      "b6620",
      record,
    );
    expect(await (await fetch(`${rt.url}/lora-adapters`)).json()).toEqual([
      { id: 0, path: a, scale: 1, task_name: "", prompt_prefix: "" },
      { id: 1, path: b, scale: 0, task_name: "", prompt_prefix: "" },
    ]);
    expect(await (await post(rt, "/lora-adapters", [{ id: 1, scale: 0.5 }])).json()).toEqual({ success: true });
    expect(
      ((await (await fetch(`${rt.url}/lora-adapters`)).json()) as { scale: number }[]).map((x) => x.scale),
    ).toEqual([0, 0.5]);
    const bad = await post(rt, "/lora-adapters", [{ id: 7, scale: 1 }]);
    expect(bad.status).toBe(500);
    expect(await bad.json()).toEqual({ error: { code: 500, message: "invalid adapter id", type: "server_error" } });

    expect((await chat(rt, { lora: [{ id: 0, scale: 0.8 }] })).status).toBe(200);
    const wrong = await chat(rt, { lora: [{ id: 9, scale: 1 }] });
    expect(wrong.status).toBe(400);
    expect(await wrong.json()).toEqual({
      error: { code: 400, message: "invalid adapter id", type: "invalid_request_error" },
    });
    expect(readRecord(record).filter((e) => e.event === "lora")).toMatchObject([{ name: a, scale: 0.8, loaded: true }]);
    expect(readRecord(record).filter((e) => e.event === "lora_load").length).toBe(2);
  });

  test("builds before per-request LoRA ignore the field", async () => {
    const a = writeGgufLora(join(TMP, "old.gguf"), { architecture: "llama", rank: 8 });
    const rt = await llama([{ path: a, scale: 1 }], "b4000");
    expect((await chat(rt, { lora: [{ id: 9, scale: 1 }] })).status).toBe(200);
  });

  test("an adapter of another architecture stops the program", async () => {
    const qwen = writeGgufLora(join(TMP, "qwen.gguf"), { architecture: "qwen2", rank: 8 });
    const port = await freePort();
    const srv = spawnFixture(
      ["llama-server", "-m", model, "--port", String(port), "--lora", qwen],
      fixtureEnv({ FAKE_LOAD_MS: "20", FAKE_LORA_LOAD_MS: "10" }),
      TMP,
    );
    expect(await srv.exited).toBe(1);
    const err = srv.output();
    expect(err).toContain("llama_adapter_lora_init: failed to apply lora adapter: model arch and LoRA arch mismatch");
    expect(err).toContain(`common_init_from_params: failed to apply lora adapter '${qwen}'`);
    expect(err).toContain("main: exiting due to model loading error");
  });
});
