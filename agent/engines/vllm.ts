/**
 * vLLM (`vllm serve`): what inferd assumes of it, and its launcher. The fake that stands for it is
 * `test/fixtures/bin/vllm` (test/fixtures/runtime/).
 */
import { flagValue } from "../command";
import { SERVED_NAME_FLAGS, withServedName } from "../runtimes/args";
import { pythonServer } from "../runtimes/openai-server";
import type { Launcher } from "../runtimes/types";
import type { Engine, EngineLora, EngineSleep } from "./types";
import { atLeast } from "./version";

/** The model a `vllm serve` command loads: `--model`, else the word after `serve`. */
export function vllmModel(argv: string[]): string | undefined {
  const serve = argv.indexOf("serve");
  const positional = serve >= 0 && argv[serve + 1] && !argv[serve + 1].startsWith("-") ? argv[serve + 1] : undefined;
  return flagValue(argv, ["--model"]) ?? positional;
}

/** Whether a vLLM command asks for the Ray executor. */
export const usesRay = (words: string[]) =>
  words.some(
    (w, i) =>
      (w === "--distributed-executor-backend" && words[i + 1] === "ray") || w === "--distributed-executor-backend=ray",
  );

/**
 * The launcher of vLLM and vLLM-Omni (`engine`): the command as given, plus `--tensor-parallel-size
 * <assignment GPUs>` when it has no tensor-parallel flag, `--host/--port` when it sets no port, and
 * `--served-model-name <model name>` when it loads a model under another name (a local path) and
 * names none. With `vllm_version`, the engine's package at that version is installed once into
 * `<data-dir>/runtimes/<backend>/<version>` and put first on PATH.
 */
export const launchVllm =
  (engine: Engine): Launcher =>
  (ctx) => {
    const plan = pythonServer(ctx, engine);
    return {
      ...plan,
      argv: withServedName(plan.argv!, engine.flags.servedName, vllmModel(plan.argv!), ctx.spec.workload.model_name),
    };
  };

/** `args` with each boolean flag of `flags` appended unless already there (alone or as `--flag=…`). */
export function withFlags(args: string[], flags: string[]): string[] {
  const missing = flags.filter((f) => !args.some((a) => a === f || a.startsWith(`${f}=`)));
  return missing.length ? [...args, ...missing] : args;
}

/**
 * vLLM's sleep mode, from vllm/entrypoints/openai/api_server.py and docs/features/sleep_mode.md:
 * `--enable-sleep-mode` (0.7.0) makes the engine allocate through its CuMem pool, and the HTTP routes
 * are registered only when `VLLM_SERVER_DEV_MODE=1` (0.7.3; else FastAPI's 404). `POST /sleep?level=1`
 * copies the weights to host RAM and drops the KV cache; `level=2` drops both, keeping the process and
 * its CUDA graphs. `POST /wake_up` brings back everything slept; after level 2 the weights come back
 * empty, so the documented wake is `/wake_up?tags=weights` (tags: 0.8.5), `POST /collective_rpc
 * {"method":"reload_weights"}` (a dev route of the same file) and `/wake_up?tags=kv_cache`.
 * `GET /is_sleeping` answers `{"is_sleeping": bool}`. A chat sent while it sleeps is not refused: the
 * engine crashes on the unmapped weights (vllm-project/vllm#15483; the 503 fixes #16536 and #30186
 * were closed unmerged), so inferd never routes to a sleeping replica.
 */
export const VLLM_SLEEP: EngineSleep = {
  levels: [1, 2],
  enable: (args, env) => ({
    args: withFlags(args, ["--enable-sleep-mode"]),
    env: env.VLLM_SERVER_DEV_MODE === "1" ? env : { ...env, VLLM_SERVER_DEV_MODE: "1" },
  }),
  sleep: (level) => [{ method: "POST", path: `/sleep?level=${level}` }],
  wake: (level) =>
    level === 1
      ? [{ method: "POST", path: "/wake_up" }]
      : [
          { method: "POST", path: "/wake_up?tags=weights" },
          { method: "POST", path: "/collective_rpc", body: { method: "reload_weights" } },
          { method: "POST", path: "/wake_up?tags=kv_cache" },
        ],
  isSleeping: {
    call: { method: "GET", path: "/is_sleeping" },
    read: (body) => (body as { is_sleeping?: unknown } | null)?.is_sleeping === true,
  },
};

/** `args` with `flag value` appended unless the command sets the flag already. */
export const withValue = (args: string[], flag: string, value: string | number): string[] =>
  flagValue(args, [flag]) === undefined ? [...args, flag, String(value)] : args;

/**
 * vLLM's LoRA serving, from vllm/engine/arg_utils.py, vllm/config/lora.py and
 * vllm/entrypoints/openai/api_server.py + serving_models.py (0.11): `--enable-lora`, `--max-lora-rank`
 * (default 16; a larger adapter is refused), `--max-loras` (adapters in one batch, default 1) and
 * `--max-cpu-loras` (adapters kept in host memory, default `--max-loras`: past it vLLM evicts the least
 * recently used and reads it from disk again on its next request). `POST /v1/load_lora_adapter
 * {lora_name, lora_path}` and `/v1/unload_lora_adapter {lora_name}` are registered only with
 * VLLM_ALLOW_RUNTIME_LORA_UPDATING=True; a request names the adapter as its `model`, and an unknown
 * one is a 404 "The model `x` does not exist.". inferd keeps at most `--max-cpu-loras` loaded per
 * replica (what vLLM holds in memory), unloading the least recently used.
 */
export const VLLM_LORA: EngineLora = {
  runtime: true,
  // vLLM refuses --max-cpu-loras below --max-loras ("max_cpu_loras (2) must be >= max_loras (8)",
  // vllm/config/lora.py): the one the command sets bounds the other.
  enable: (args, env, { maxRank, slots }) => {
    const cpu = Number(flagValue(args, ["--max-cpu-loras"])) || undefined;
    const batch = Number(flagValue(args, ["--max-loras"])) || Math.min(cpu ?? slots, 8);
    let out = withFlags(args, ["--enable-lora"]);
    out = withValue(out, "--max-lora-rank", maxRank);
    out = withValue(out, "--max-loras", batch);
    out = withValue(out, "--max-cpu-loras", Math.max(cpu ?? slots, batch));
    return { args: out, env: { ...env, VLLM_ALLOW_RUNTIME_LORA_UPDATING: "True" } };
  },
  slots: (args) => Number(flagValue(args, ["--max-cpu-loras"]) ?? flagValue(args, ["--max-loras"]) ?? 8) || 8,
  load: (a) => [{ method: "POST", path: "/v1/load_lora_adapter", body: { lora_name: a.name, lora_path: a.path } }],
  unload: (name) => [{ method: "POST", path: "/v1/unload_lora_adapter", body: { lora_name: name } }],
  select: (body, name) => ({ ...body, model: name }),
};

/** vLLM, as the engine descriptor says it (vLLM-Omni reuses most of it). */
export const vllm: Engine = {
  backend: "vllm",
  label: "vLLM",
  form: { hint: "A Hugging Face model on NVIDIA or AMD GPUs.", command: "vllm serve {model}" },
  probe: { argv: ["vllm", "--version"], version: (out) => /^(\d+\.\d+[\w.+-]*)\s*$/m.exec(out)?.[1] },
  install: "pip install vllm (or uv pip install vllm), or set vllm_version on the workload and inferd installs it",
  family: "vllm",
  needsGpu: true,
  gpuShare: (args) => Number(flagValue(args, ["--gpu-memory-utilization"]) ?? 0.9) || 0.9,
  multinode: "torch distributed (--nnodes/--node-rank, vLLM ≥ 0.11) or Ray (--distributed-executor-backend ray)",
  programs: ["vllm serve", "python -m vllm.entrypoints.openai.api_server"],
  pinned: {
    field: "vllm_version",
    // vLLM 0.18 and later no longer depend on Ray: a multi-node Ray launch needs it installed beside.
    install: (version, { args, nodes }) => ({
      requirement: `vllm==${version}`,
      extra: nodes > 1 && usesRay(args) && atLeast(version, "0.18.0") ? ["ray[default]"] : [],
      prerelease: false,
    }),
  },
  flags: {
    tensorParallel: ["--tensor-parallel-size", "-tp"],
    servedName: SERVED_NAME_FLAGS.python,
    model: ["--model"],
    apiKey: ["--api-key"],
  },
  // vllm/entrypoints/openai/api_server.py: `--api-key`, else the VLLM_API_KEY environment variable.
  apiKeyOf: (args, env) => flagValue(args, ["--api-key"]) ?? env.VLLM_API_KEY,
  readiness: (base) => [`${base}/health`, `${base}/v1/models`],
  capacity: ({ args, gpus, version }) => {
    const set = Number(flagValue(args, ["--max-num-seqs"]));
    if (set > 0) return { slots: set, why: "--max-num-seqs in its command" };
    // vllm/engine/arg_utils.py get_batch_defaults (0.9 and later): 1024 sequences on GPUs of at least
    // 70 GiB that are not A100s (H100, H200, MI300X), else 256; earlier versions modelled as 256.
    const gpu = gpus[0];
    if (gpu && atLeast(version, "0.9.0") && gpu.memory_total_mib >= 70 * 1024 && !/a100/i.test(gpu.name))
      return { slots: 1024, why: `vLLM's default --max-num-seqs on a GPU of 70 GiB or more (${gpu.name})` };
    return { slots: 256, why: "vLLM's default --max-num-seqs" };
  },
  routes: () => ({ tokenize: "vllm" }),
  toolsOn: (args) => args.includes("--enable-auto-tool-choice"),
  sleep: VLLM_SLEEP,
  lora: VLLM_LORA,
  launch: (ctx) => launchVllm(vllm)(ctx),
  fake: "test/fixtures/bin/vllm",
};
