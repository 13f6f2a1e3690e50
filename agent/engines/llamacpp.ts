/**
 * llama.cpp's `llama-server` (and, when it is not installed, inferd's built-in runtime serving the
 * same flags): what inferd assumes of it, and its launcher. The fake that stands for it is
 * `test/fixtures/bin/llama-server` (test/fixtures/runtime/).
 */
import { readFileSync } from "node:fs";
import { flagValue, splitCommand } from "../command";
import { baseUrlOf, gpuEnv, vendorOfLaunch, SERVED_NAME_FLAGS, withPort, withServedName } from "../runtimes/args";
import type { Engine, EngineLora } from "./types";
import { withFlags } from "./vllm";

/**
 * The key inferd sends a llama-server, as common/arg.cpp reads them (2025 builds): the first of
 * `--api-key`'s comma list, else of LLAMA_API_KEY's (the flag's environment variable), else the
 * first non-empty line of `--api-key-file` (any listed key is accepted).
 */
function llamaApiKey(args: string[], env: Record<string, string | undefined>): string | undefined {
  const listed = (flagValue(args, ["--api-key"]) ?? env.LLAMA_API_KEY ?? "").split(",").find(Boolean);
  if (listed) return listed;
  const file = flagValue(args, ["--api-key-file"]);
  if (!file) return undefined;
  try {
    return readFileSync(file, "utf8")
      .split("\n")
      .map((l) => l.trim())
      .find(Boolean);
  } catch {
    return undefined;
  }
}

/**
 * llama-server's LoRA serving, from common/arg.cpp and tools/server/server.cpp (b6620): adapters are
 * given at launch (`--lora FILE`, repeated; GGUF adapters of the model's architecture, else the start
 * fails), `--lora-init-without-apply` loads them with scale 0, and a request picks its own with a
 * `lora: [{id, scale}]` field (ids in launch order; `GET /lora-adapters` lists them). There is no
 * route to load one while it runs: a changed set of adapters restarts the replica.
 */
export const LLAMA_LORA: EngineLora = {
  runtime: false,
  enable: (args, env, { adapters }) => {
    const out = [...args];
    for (const a of adapters) if (!out.includes(a.path)) out.push("--lora", a.path);
    return { args: withFlags(out, ["--lora-init-without-apply"]), env };
  },
  slots: () => Number.POSITIVE_INFINITY,
  select: (body, _name, index) => ({ ...body, lora: [{ id: index, scale: 1 }] }),
};

/** llama.cpp, as the engine descriptor says it. */
export const llamacpp: Engine = {
  backend: "llamacpp",
  label: "llama.cpp",
  form: {
    hint: "A GGUF model: a file on the worker, or one from Hugging Face that inferd downloads first. Without llama-server installed, inferd's built-in llama.cpp runtime serves it.",
    command: "llama-server {gguf} -c 4096",
  },
  // llama-server --version prints "version: 6620 (abc1234)" on stderr (common/arg.cpp).
  probe: { argv: ["llama-server", "--version"], version: (out) => /version: (\d+)/.exec(out)?.[1]?.replace(/^/, "b") },
  install:
    "install llama.cpp's llama-server on PATH (release build or your package manager); without it inferd's built-in llama.cpp runtime serves GGUF models",
  family: "llamacpp",
  needsGpu: false,
  multinode: "rpc-server on the other members, llama-server --rpc on the leader",
  programs: ["llama-server"],
  flags: {
    tensorParallel: [],
    servedName: SERVED_NAME_FLAGS.llama,
    model: ["-m", "--model"],
    apiKey: ["--api-key", "--api-key-file"],
  },
  apiKeyOf: llamaApiKey,
  // Every build binds its port before loading, and 2025 builds answer /v1/models (and /models,
  // /api/tags) with 200 meanwhile (tools/server/server.cpp, middleware_server_state): only /health
  // (503 "Loading model" until loaded) means the model is loaded. The built-in runtime does the same.
  readiness: (base) => [`${base}/health`],
  capacity: ({ args }) => {
    const np = Number(flagValue(args, ["-np", "--parallel"]));
    return np > 0 ? { slots: np, why: "-np in its command" } : { slots: 4, why: "llama-server's default -np" };
  },
  routes: () => ({ messages: undefined, responses: undefined, tokenize: "llamacpp" }),
  toolsOn: (args) => args.includes("--jinja"),
  lora: LLAMA_LORA,
  /**
   * The verbatim `llama-server` command with the port rule and, without `-a/--alias`, the workload's
   * model name as its alias (else it would call its model by its file path). When that executable is
   * not installed, the built-in runtime (node-llama-cpp) serves the same flags instead.
   */
  launch: (ctx) => {
    const words = splitCommand(String(ctx.spec.workload.config.command));
    const named = withServedName(
      words,
      llamacpp.flags.servedName,
      flagValue(words, llamacpp.flags.model),
      ctx.spec.workload.model_name,
    );
    const { args, host, port } = withPort(named, ctx.freePort);
    const env: Record<string, string> = gpuEnv(ctx.spec.gpu_indices, vendorOfLaunch(ctx.gpus));
    const base = baseUrlOf(host, port);
    const health = llamacpp.readiness(base);
    const slots = llamacpp.capacity({ args, gpus: ctx.gpus, env: ctx.env }).slots;
    if (ctx.which(args[0])) return { argv: args, env, baseUrl: base, port, healthUrls: health, prep: [], slots };
    const builtin = ctx.builtinLlama();
    return {
      argv: [...builtin.argv, ...args.slice(1)],
      env: { ...env, ...builtin.env },
      baseUrl: base,
      port,
      healthUrls: health,
      prep: [],
      builtin: true,
      // The built-in runtime serves one sequence at a time unless -np says more.
      slots: Number(flagValue(args, ["-np", "--parallel"])) || 1,
    };
  },
  fake: "test/fixtures/bin/llama-server",
};
