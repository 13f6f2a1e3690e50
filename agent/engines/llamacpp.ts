/**
 * llama.cpp's `llama-server` (and, when it is not installed, inferd's built-in runtime serving the
 * same flags): what inferd assumes of it, and its launcher. The fake that stands for it is
 * `test/fixtures/bin/llama-server` (test/fixtures/runtime/).
 */
import { flagValue, splitCommand } from "../command";
import { baseUrlOf, gpuEnv, vendorOfLaunch, SERVED_NAME_FLAGS, withPort, withServedName } from "../runtimes/args";
import type { Engine } from "./types";

/** llama.cpp, as the engine descriptor says it. */
export const llamacpp: Engine = {
  backend: "llamacpp",
  label: "llama.cpp",
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
    apiKey: ["--api-key"],
  },
  apiKeyOf: (args) => flagValue(args, ["--api-key"]),
  readiness: (base) => [`${base}/health`, `${base}/v1/models`],
  capacity: ({ args }) => {
    const np = Number(flagValue(args, ["-np", "--parallel"]));
    return np > 0 ? { slots: np, why: "-np in its command" } : { slots: 4, why: "llama-server's default -np" };
  },
  routes: () => ({ messages: undefined, responses: undefined, tokenize: "llamacpp" }),
  toolsOn: (args) => args.includes("--jinja"),
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
