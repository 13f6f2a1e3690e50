import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { cleanup, tempDir, waitFor } from "./helpers/proc";
import { servingPool, sseEvents, type Serving } from "./helpers/serving";
import { fixtureEnv, freePort } from "./fixtures";
import { writeTinyGguf } from "./fixtures/gguf";
import { parseNvidiaSmi, probeGpus } from "../agent/gpu";
import { withPort, withTensorParallel } from "../agent/runtimes/args";
import { ollamaAddress } from "../agent/engines/ollama";
import { vllm } from "../agent/engines/vllm";

/** Backends other than vLLM (Ollama, SGLang, the built-in llama.cpp runtime) and the pure launch helpers. */
const { serve, stopAll } = servingPool();
afterAll(async () => {
  await stopAll();
  await cleanup();
});

describe("launch flags (pure)", () => {
  test("port: added when absent, an explicit one kept; the runtime always listens on loopback only", () => {
    expect(withPort(["vllm", "serve", "m"], 9001)).toEqual({
      args: ["vllm", "serve", "m", "--host", "127.0.0.1", "--port", "9001"],
      host: "127.0.0.1",
      port: 9001,
    });
    expect(withPort(["vllm", "serve", "m", "--port=8123"], 9001)).toEqual({
      args: ["vllm", "serve", "m", "--port=8123", "--host", "127.0.0.1"],
      host: "127.0.0.1",
      port: 8123,
    });
    // A command cannot expose the runtime on the LAN, nor make inferd forward to another machine.
    expect(withPort(["llama-server", "--host", "0.0.0.0"], 7)).toEqual({
      args: ["llama-server", "--host", "127.0.0.1", "--port", "7"],
      host: "127.0.0.1",
      port: 7,
    });
    expect(withPort(["vllm", "serve", "m", "--host=10.9.8.7", "--port", "80"], 7)).toEqual({
      args: ["vllm", "serve", "m", "--port", "80", "--host", "127.0.0.1"],
      host: "127.0.0.1",
      port: 80,
    });
  });
  test("tensor parallel: added with the assignment's GPUs unless the command has it", () => {
    expect(withTensorParallel(["vllm", "serve", "m"], 4, vllm.flags.tensorParallel)).toEqual([
      "vllm",
      "serve",
      "m",
      "--tensor-parallel-size",
      "4",
    ]);
    expect(withTensorParallel(["vllm", "serve", "m", "-tp", "2"], 4, vllm.flags.tensorParallel)).toEqual([
      "vllm",
      "serve",
      "m",
      "-tp",
      "2",
    ]);
    expect(
      withTensorParallel(["vllm", "serve", "m", "--tensor-parallel-size=8"], 1, vllm.flags.tensorParallel),
    ).toEqual(["vllm", "serve", "m", "--tensor-parallel-size=8"]);
  });
  test("OLLAMA_HOST forms", () => {
    expect(ollamaAddress(undefined)).toMatchObject({ host: "127.0.0.1", port: 11434 });
    expect(ollamaAddress("0.0.0.0:9999")).toMatchObject({ host: "127.0.0.1", port: 9999 });
    expect(ollamaAddress("http://10.1.2.3:8080")).toMatchObject({ host: "10.1.2.3", port: 8080 });
  });
});

describe("GPU probe", () => {
  test("parses nvidia-smi's CSV, with N/A temperatures", () => {
    const gpus = parseNvidiaSmi(
      "0, GPU-aaaa, NVIDIA A100-SXM4-80GB, 81920, 1024, 37, 45\n1, GPU-bbbb, NVIDIA A100-SXM4-80GB, 81920, 0, 0, [N/A]\n",
    );
    expect(gpus).toEqual([
      {
        index: 0,
        uuid: "GPU-aaaa",
        name: "NVIDIA A100-SXM4-80GB",
        vendor: "nvidia",
        memory_total_mib: 81920,
        memory_used_mib: 1024,
        utilization_percent: 37,
        temperature_c: 45,
      },
      {
        index: 1,
        uuid: "GPU-bbbb",
        name: "NVIDIA A100-SXM4-80GB",
        vendor: "nvidia",
        memory_total_mib: 81920,
        memory_used_mib: 0,
        utilization_percent: 0,
        temperature_c: null,
      },
    ]);
  });
  test("no nvidia-smi and no rocm-smi means no GPUs (a CPU worker)", async () => {
    expect(await probeGpus(async () => null)).toEqual([]);
  });
  test("falls back to rocm-smi's JSON", async () => {
    const rocm = JSON.stringify({
      card0: {
        "Card series": "AMD Instinct MI300X",
        "Unique ID": "0x1234",
        "VRAM Total Memory (B)": String(192 * 2 ** 30),
        "VRAM Total Used Memory (B)": String(2 ** 30),
        "GPU use (%)": "12",
        "Temperature (Sensor edge) (C)": "40.0",
      },
    });
    const gpus = await probeGpus(async (argv) => (argv[0] === "rocm-smi" ? rocm : null));
    expect(gpus).toEqual([
      {
        index: 0,
        uuid: "0x1234",
        name: "AMD Instinct MI300X",
        vendor: "amd",
        memory_total_mib: 192 * 1024,
        memory_used_mib: 1024,
        utilization_percent: 12,
        temperature_c: 40,
      },
    ]);
  });
});

describe("Ollama", () => {
  test("starts `ollama serve` when none runs, pulls the model with progress in the logs, then serves through it", async () => {
    const port = await freePort();
    const s = await serve({
      OLLAMA_HOST: `127.0.0.1:${port}`,
      FAKE_OLLAMA_DIR: tempDir("ollama"),
      FAKE_PULL_MS: "200",
      FAKE_OLLAMA_UNKNOWN: "no-such-model",
    });
    const w = await s.createWorkload({ name: "llama", backend: "ollama", model_name: "llama3.2" });
    const ready = await s.waitState(w.id);
    expect(ready.assignments[0].base_url).toBe(`http://127.0.0.1:${port}`);
    const tags = await (await fetch(`http://127.0.0.1:${port}/api/tags`)).json();
    expect(tags.models.map((m: { name: string }) => m.name).join(",")).toContain("llama3.2");
    const logs = await (await s.admin(`/admin/workloads/${w.id}/logs`)).json();
    expect(logs.replicas[0].text).toContain("ollama pull llama3.2");
    expect(logs.replicas[0].text).toMatch(/pulling|success/);
    const r = await s.data(w.slug, "/v1/chat/completions", {
      body: { model: "llama3.2", messages: [{ role: "user", content: "hi ollama" }] },
    });
    expect(r.status).toBe(200);
    expect((await r.json()).choices[0].message.content).toContain("hi ollama");

    const bad = await s.createWorkload({ name: "unknown", backend: "ollama", model_name: "no-such-model" });
    const failed = await s.waitState(bad.id, "failed");
    expect(failed.assignments[0].reason).toContain("ollama pull no-such-model");
  });
});

describe("SGLang", () => {
  test("runs `python3 -m sglang.launch_server` with the port rule", async () => {
    // The fake python3 lives in its own folder, put first on PATH only for this server.
    const withSglang = await serve({ PATH: fixtureEnv({}, { sglang: true }).PATH });
    const w = await withSglang.createWorkload({
      name: "sg",
      backend: "sglang",
      model_name: "qwen",
      config: { command: "python3 -m sglang.launch_server --model-path qwen" },
    });
    await withSglang.waitState(w.id);
    const start = withSglang.events((e) => e.event === "start").at(-1)!;
    expect((start.argv as string[]).join(" ")).toMatch(/--model-path qwen --host 127\.0\.0\.1 --port \d+/);
    const r = await withSglang.data(w.slug, "/v1/chat/completions", {
      body: { messages: [{ role: "user", content: "hi sglang" }] },
    });
    expect(r.status).toBe(200);
  });
});

describe("the built-in llama.cpp runtime", () => {
  test("serves a llamacpp workload when llama-server is not installed: chat, stream, embeddings", async () => {
    const dir = tempDir("gguf");
    const model = join(dir, "tiny.gguf");
    writeTinyGguf(model);
    // No fixture bin on PATH: no llama-server, no nvidia-smi (a CPU-only machine).
    const s = await serve({ PATH: process.env.PATH ?? "" });
    const w = await s.createWorkload({
      name: "tiny",
      backend: "llamacpp",
      model_name: "tiny",
      config: { command: `llama-server -m ${model} -c 512 -np 2 -t 1 --embedding` },
    });
    const ready = await s.waitState(w.id, "ready", 60_000);
    expect(ready.assignments[0].gpu_indices).toEqual([]);
    const logs = await (await s.admin(`/admin/workloads/${w.id}/logs`)).json();
    expect(logs.replicas[0].text).toContain("built-in llama.cpp runtime");

    const r = await s.data(w.slug, "/v1/chat/completions", {
      body: { model: "tiny", max_tokens: 8, messages: [{ role: "user", content: "hello" }] },
    });
    expect(r.status).toBe(200);
    const body = await r.json();
    expect(body.object).toBe("chat.completion");
    expect(body.choices[0].message.content.length).toBeGreaterThan(0);
    // Random weights may pick the end-of-sequence token before max_tokens.
    expect(body.usage.completion_tokens).toBeGreaterThan(0);
    expect(body.usage.completion_tokens).toBeLessThanOrEqual(8);

    const stream = await s.data(w.slug, "/v1/chat/completions", {
      body: { max_tokens: 6, stream: true, messages: [{ role: "user", content: "hello" }] },
    });
    const events = await sseEvents(stream);
    expect(events.at(-1)).toBe("[DONE]");
    expect(events.length).toBeGreaterThan(3);

    const emb = await s.data(w.slug, "/v1/embeddings", { body: { input: ["one", "two"] } });
    expect(emb.status).toBe(200);
    const vectors = (await emb.json()).data;
    expect(vectors).toHaveLength(2);
    expect(vectors[0].embedding.length).toBe(64);
    await waitFor(async () => (await s.workload(w.id)).usage.requests >= 3 || undefined, { what: "usage counted" });
  });
});
