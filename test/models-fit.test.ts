import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeTinyGguf } from "./fixtures/gguf";
import { cleanup, tempDir } from "./helpers/proc";
import { estimate, fitOnGpus, infoFromConfig } from "../src/models/fit";
import { inspectModel } from "../src/models/inspect";
import { discoverLocalModels, quantOf } from "../src/models/discover";
import { modelRefs, rewriteCommand } from "../agent/model-refs";

/**
 * What a model is and whether it fits: shapes read from real GGUF metadata (the tests' generated
 * model, also split in parts) and from a safetensors config, the estimate's arithmetic, GPU fit,
 * models named in commands, and GGUF files other tools left on the machine.
 */
afterAll(() => cleanup());
const dir = tempDir("fit");
const MiB = 1048576;

describe("the shape of a model", () => {
  test("is read from GGUF metadata: architecture, context, layers, heads, KV size and parameters", async () => {
    const g = writeTinyGguf(join(dir, "tiny.gguf"), { layers: 3, heads: 4, embeddingLength: 64, contextLength: 1024 });
    const info = (await inspectModel(g.path))!;
    expect(info).toMatchObject({
      format: "gguf",
      architecture: "llama",
      context_length: 1024,
      layers: 3,
      heads: 4,
      kv_heads: 2,
      embedding_length: 64,
      quantization: "F32",
      weights_bytes: g.bytes,
    });
    // head size 64/4 = 16, K and V: 32 per KV head; 3 layers × 2 KV heads × 32 × 2 bytes (f16)
    expect(info.kv_dim).toBe(32);
    expect(info.kv_bytes_per_token).toBe(3 * 2 * 32 * 2);
    // The embedding matrix alone is vocab × 64; the whole count is somewhat more.
    expect(info.parameters!).toBeGreaterThan(g.vocabSize * 64);
    expect(info.parameters! * 4).toBeLessThanOrEqual(g.bytes);
  });

  test("is read from a safetensors folder's config.json, with the weights' total size", async () => {
    const snap = join(dir, "snap");
    mkdirSync(snap);
    writeFileSync(
      join(snap, "config.json"),
      JSON.stringify({
        architectures: ["Qwen2ForCausalLM"],
        num_hidden_layers: 28,
        num_attention_heads: 28,
        num_key_value_heads: 4,
        hidden_size: 3584,
        max_position_embeddings: 32768,
        torch_dtype: "bfloat16",
      }),
    );
    writeFileSync(join(snap, "model-00001-of-00002.safetensors"), new Uint8Array(3000));
    writeFileSync(join(snap, "model-00002-of-00002.safetensors"), new Uint8Array(2000));
    const info = (await inspectModel(snap))!;
    expect(info).toMatchObject({
      format: "safetensors",
      architecture: "Qwen2ForCausalLM",
      layers: 28,
      kv_heads: 4,
      context_length: 32768,
      quantization: "bfloat16",
      weights_bytes: 5000,
    });
    // head size 3584/28 = 128; K+V per token: 28 layers × 4 heads × 128 × 2 × 2 bytes = 57344 (Qwen2.5-7B's real figure)
    expect(info.kv_bytes_per_token).toBe(57_344);
  });

  test("a split GGUF counts every part", async () => {
    const a = writeTinyGguf(join(dir, "split", "m-00001-of-00002.gguf"), { seed: 3 });
    writeFileSync(join(dir, "split", "m-00002-of-00002.gguf"), readFileSync(a.path));
    const info = (await inspectModel(a.path))!;
    expect(info.weights_bytes).toBe(a.bytes * 2);
  });
});

describe("the estimate", () => {
  const info = infoFromConfig(
    {
      num_hidden_layers: 32,
      num_attention_heads: 32,
      num_key_value_heads: 8,
      hidden_size: 4096,
      max_position_embeddings: 8192,
    },
    16 * 1024 * MiB,
  );
  test("is weights + KV cache for the context + overhead", () => {
    const e = estimate(info, { context: 8192 });
    expect(e.kv_bytes).toBe(32 * 8 * 128 * 2 * 2 * 8192); // 1 GiB: Llama-3-8B's KV for 8k tokens
    expect(e.overhead_bytes).toBe(512 * MiB + Math.round(16 * 1024 * MiB * 0.05));
    expect(e.total_bytes).toBe(e.weights_bytes + e.kv_bytes + e.overhead_bytes);
  });
  test("defaults to 4096 tokens, or the model's own context when shorter", () => {
    expect(estimate(info).context).toBe(4096);
    expect(estimate({ ...info, context_length: 2048 }).context).toBe(2048);
  });
  test("fits a GPU with the memory, split evenly over several", () => {
    const gpus = [
      { index: 0, name: "a", total_mib: 24576, free_mib: 6000 },
      { index: 1, name: "b", total_mib: 24576, free_mib: 20000 },
    ];
    expect(fitOnGpus(10_000 * MiB, gpus, 1)).toMatchObject({ fits: true, gpus: [1] });
    expect(fitOnGpus(30_000 * MiB, gpus, 1)).toMatchObject({ fits: false, need_per_gpu_mib: 30_000 });
    expect(fitOnGpus(11_000 * MiB, gpus, 2)).toMatchObject({ fits: true, gpus: [0, 1], need_per_gpu_mib: 5500 });
  });
});

describe("models named in commands", () => {
  test("llama.cpp's -hf, -hff, -m hf: and -mu become -m <file>; hub repos of vLLM and SGLang are found", () => {
    const words = ["llama-server", "-hf", "org/Model-GGUF:Q8_0", "-c", "2048"];
    const [ref] = modelRefs("llamacpp", words);
    expect(ref.source).toMatchObject({ kind: "hf-quant", repo: "org/Model-GGUF", quant: "Q8_0" });
    expect(rewriteCommand(words, [{ ref, entry: "/m/x.gguf" }])).toEqual([
      "llama-server",
      "-c",
      "2048",
      "-m",
      "/m/x.gguf",
    ]);
    expect(modelRefs("llamacpp", ["llama-server", "-hf", "org/R", "-hff", "sub/x.gguf"])[0].source).toMatchObject({
      kind: "hf-file",
      repo: "org/R",
      file: "sub/x.gguf",
    });
    expect(modelRefs("llamacpp", ["llama-server", "-m", "hf:org/R/x.gguf"])[0].source).toMatchObject({
      kind: "hf-file",
      file: "x.gguf",
    });
    expect(modelRefs("llamacpp", ["llama-server", "-mu", "https://example.com/x.gguf"])[0].source).toMatchObject({
      kind: "url",
    });
    expect(modelRefs("llamacpp", ["llama-server", "-m", "/models/x.gguf"])).toEqual([]);
    expect(modelRefs("vllm", ["vllm", "serve", "Qwen/Qwen3-8B", "--revision", "abc"])[0].source).toEqual({
      kind: "hf-repo",
      repo: "Qwen/Qwen3-8B",
      revision: "abc",
    });
    expect(modelRefs("vllm", ["vllm", "serve", "/data/qwen"])).toEqual([]);
    expect(
      modelRefs("vllm", ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "a/b"])[0].source,
    ).toMatchObject({ repo: "a/b" });
    expect(
      modelRefs("sglang", ["python3", "-m", "sglang.launch_server", "--model-path", "a/b"])[0].source,
    ).toMatchObject({ repo: "a/b" });
  });
});

describe("models other tools left on this machine", () => {
  test("are found in the Hugging Face cache, LM Studio, llama.cpp's cache and Ollama's blobs", () => {
    const home = tempDir("home");
    const gguf = writeTinyGguf(join(home, "src.gguf"));
    const bytes = () => readFileSync(gguf.path);
    const put = (p: string) => (mkdirSync(join(p, ".."), { recursive: true }), writeFileSync(p, bytes()));
    const hub = join(home, ".cache/huggingface/hub/models--org--Tiny-GGUF");
    put(join(hub, "blobs/abc123"));
    mkdirSync(join(hub, "snapshots/c0ffee"), { recursive: true });
    symlinkSync("../../blobs/abc123", join(hub, "snapshots/c0ffee/Tiny-Q4_K_M.gguf"));
    put(join(home, ".lmstudio/models/lmstudio-community/Tiny/Tiny-Q8_0.gguf"));
    put(join(home, ".lmstudio/models/lmstudio-community/Tiny/mmproj-Tiny-F16.gguf"));
    put(join(home, ".cache/llama.cpp/org_Tiny-GGUF_Tiny-IQ4_XS.gguf"));
    put(join(home, ".ollama/models/blobs/sha256-deadbeef"));
    mkdirSync(join(home, ".ollama/models/manifests/registry.ollama.ai/library/tiny"), { recursive: true });
    writeFileSync(
      join(home, ".ollama/models/manifests/registry.ollama.ai/library/tiny/latest"),
      JSON.stringify({
        layers: [{ mediaType: "application/vnd.ollama.image.model", digest: "sha256:deadbeef", size: gguf.bytes }],
      }),
    );
    const found = discoverLocalModels({ HOME: home });
    expect(found.map((m) => [m.origin, m.name, m.quant]).sort()).toEqual([
      ["huggingface-cache", "org/Tiny-GGUF/Tiny-Q4_K_M.gguf", "Q4_K_M"],
      ["llama.cpp-cache", "org_Tiny-GGUF_Tiny-IQ4_XS.gguf", "IQ4_XS"],
      ["lmstudio", "lmstudio-community/Tiny/Tiny-Q8_0.gguf", "Q8_0"],
      ["ollama", "tiny:latest", null],
    ]);
    expect(found.every((m) => m.size_bytes === gguf.bytes)).toBe(true);
    expect(quantOf("Llama-3.2-1B-Instruct-Q4_K_M.gguf")).toBe("Q4_K_M");
  });
});
