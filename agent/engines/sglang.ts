/**
 * SGLang (`python3 -m sglang.launch_server`): what inferd assumes of it, and its launcher. The fake
 * that stands for it is `test/fixtures/sglang-bin/python3` (test/fixtures/runtime/).
 */
import { flagValue } from "../command";
import { SERVED_NAME_FLAGS, withServedName } from "../runtimes/args";
import { pythonServer } from "../runtimes/openai-server";
import type { Engine, EngineLora, EngineSleep } from "./types";
import { withFlags, withValue } from "./vllm";
import { atLeast } from "./version";

/**
 * SGLang's memory saver, from python/sglang/srt/entrypoints/http_server.py and server_args.py:
 * `--enable-memory-saver` (torch_memory_saver) lets `POST /release_memory_occupation` free the
 * weights, KV cache and CUDA graphs (body `{"tags": [...]}`, absent: all) and `POST
 * /resume_memory_occupation` map them again; success answers 200 (`null` body), a failure 400 with
 * `{"error": {"message": …}}`. Released weights keep their contents only with
 * `--enable-weights-cpu-backup` (a host-RAM copy); without it they come back undefined and must be
 * loaded again (`/update_weights_from_disk`). inferd adds both flags: one level, the weights in host
 * RAM (level 1). The routes exist without the flags, but then free nothing. There is no "is it
 * sleeping" route.
 */
export const SGLANG_SLEEP: EngineSleep = {
  levels: [1],
  enable: (args, env) => ({ args: withFlags(args, ["--enable-memory-saver", "--enable-weights-cpu-backup"]), env }),
  sleep: () => [{ method: "POST", path: "/release_memory_occupation", body: {} }],
  wake: () => [{ method: "POST", path: "/resume_memory_occupation", body: {} }],
};

/**
 * SGLang's LoRA serving, from python/sglang/srt/server_args.py, lora/lora_manager.py and
 * entrypoints/http_server.py (0.5.x): `--enable-lora`; started without `--lora-paths` it needs
 * `--max-lora-rank` and `--lora-target-modules` (`all`) to size its buffers; `--max-loras-per-batch`
 * (default 8) and `--max-loaded-loras` (adapters held; past it a load is refused). `POST
 * /load_lora_adapter {lora_name, lora_path}` and `/unload_lora_adapter {lora_name}` answer
 * `{success, error_message, loaded_adapters}`; a request names its adapter in `lora_path` (the
 * OpenAI routes take it beside `model`).
 */
export const SGLANG_LORA: EngineLora = {
  runtime: true,
  enable: (args, env, { maxRank, slots }) => {
    let out = withFlags(args, ["--enable-lora"]);
    out = withValue(out, "--max-lora-rank", maxRank);
    if (flagValue(out, ["--lora-paths"]) === undefined) out = withValue(out, "--lora-target-modules", "all");
    out = withValue(out, "--max-loras-per-batch", Math.min(slots, 8));
    out = withValue(out, "--max-loaded-loras", slots);
    return { args: out, env };
  },
  slots: (args) =>
    Number(flagValue(args, ["--max-loaded-loras"]) ?? flagValue(args, ["--max-loras-per-batch"]) ?? 8) || 8,
  load: (a) => [{ method: "POST", path: "/load_lora_adapter", body: { lora_name: a.name, lora_path: a.path } }],
  unload: (name) => [{ method: "POST", path: "/unload_lora_adapter", body: { lora_name: name } }],
  select: (body, name) => ({ ...body, lora_path: name }),
};

/** SGLang, as the engine descriptor says it. */
export const sglang: Engine = {
  backend: "sglang",
  label: "SGLang",
  form: {
    hint: "A Hugging Face model served by SGLang.",
    command: "python3 -m sglang.launch_server --model-path {model}",
  },
  probe: {
    argv: ["python3", "-c", "import sglang; print(sglang.__version__)"],
    version: (out) => /^(\d+\.\d+[\w.+-]*)\s*$/m.exec(out)?.[1],
  },
  install: 'pip install "sglang[all]", or set sglang_version on the workload and inferd installs it',
  family: "sglang",
  needsGpu: true,
  gpuShare: (args) => Number(flagValue(args, ["--mem-fraction-static"]) ?? 0.88) || 0.88,
  multinode: "--nnodes/--node-rank/--dist-init-addr, tensor parallel over the whole group",
  tensorParallelSpansGroup: true,
  programs: ["python -m sglang.launch_server", "sglang serve"],
  pinned: {
    field: "sglang_version",
    // python/pyproject.toml: before 0.5.3 the server's runtime is an extra (`sglang[all]` brings
    // it); from 0.5.3 the base package has it, and recent releases resolve only with pre-releases
    // allowed (a pinned dependency published as one). Where that began is not pinned down here:
    // modelled from 0.5.3.
    install: (version) =>
      atLeast(version, "0.5.3")
        ? { requirement: `sglang==${version}`, extra: [], prerelease: true }
        : { requirement: `sglang[all]==${version}`, extra: [], prerelease: false },
  },
  flags: {
    // --tp-size, its alias --tensor-parallel-size, and --tp (argparse takes it for --tp-size).
    tensorParallel: ["--tp-size", "--tensor-parallel-size", "--tp"],
    servedName: SERVED_NAME_FLAGS.python,
    model: ["--model-path", "--model"],
    apiKey: ["--api-key"],
  },
  apiKeyOf: (args) => flagValue(args, ["--api-key"]),
  // /health is 503 until warm-up ends (server_status Starting, http_server.py health_generate, 0.5.x);
  // /v1/models answers before that.
  readiness: (base) => [`${base}/health`],
  capacity: ({ args }) => {
    const set = Number(flagValue(args, ["--max-running-requests"]));
    // Unset, SGLang sizes its request pool from the KV cache: clamp(KV tokens / context length × 512,
    // 2048, 4096) (python/sglang/srt/model_executor/model_runner.py); the cache's size is known only
    // once loaded, so inferd assumes the floor.
    return set > 0
      ? { slots: set, why: "--max-running-requests in its command" }
      : { slots: 2048, why: "SGLang's request pool when --max-running-requests is unset (2048–4096 by KV cache)" };
  },
  // /v1/responses since 0.5.0 (http_server.py); older versions answer 404 and inferd translates.
  routes: (version) => ({
    responses: version === undefined ? undefined : atLeast(version, "0.5.0"),
    tokenize: "generate",
  }),
  toolsOn: (args) => args.some((a) => a === "--tool-call-parser" || a.startsWith("--tool-call-parser=")),
  sleep: SGLANG_SLEEP,
  lora: SGLANG_LORA,
  /**
   * The command as given (e.g. `python3 -m sglang.launch_server --model-path …`) with the same port
   * rule and served-name rule as vLLM's; `sglang_version` installs that version once like vLLM's.
   */
  launch: (ctx) => {
    const plan = pythonServer(ctx, sglang);
    return {
      ...plan,
      argv: withServedName(
        plan.argv!,
        sglang.flags.servedName,
        flagValue(plan.argv!, sglang.flags.model),
        ctx.spec.workload.model_name,
      ),
    };
  },
  fake: "test/fixtures/sglang-bin/python3",
};
