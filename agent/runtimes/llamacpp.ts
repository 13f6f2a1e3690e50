import { flagValue, splitCommand } from "../command";
import { baseUrlOf, gpuEnv, SERVED_NAME_FLAGS, withPort, withServedName } from "./args";
import type { Launcher } from "./types";

/**
 * llama.cpp: the verbatim `llama-server` command with the port rule and, without `-a/--alias`, the
 * workload's model name as its alias (else it would call its model by its file path). When that
 * executable is not installed, the built-in runtime (node-llama-cpp) serves the same flags instead.
 */
export const llamacpp: Launcher = (ctx) => {
  const words = splitCommand(String(ctx.spec.workload.config.command));
  const named = withServedName(
    words,
    SERVED_NAME_FLAGS.llama,
    flagValue(words, ["-m", "--model"]),
    ctx.spec.workload.model_name,
  );
  const { args, host, port } = withPort(named, ctx.freePort);
  const env: Record<string, string> = gpuEnv(ctx.spec.gpu_indices);
  const base = baseUrlOf(host, port);
  const health = [`${base}/health`, `${base}/v1/models`];
  // -np: llama-server serves 4 sequences at once by default, the built-in runtime 1.
  const np = Number(flagValue(args, ["-np", "--parallel"])) || 0;
  if (ctx.which(args[0])) return { argv: args, env, baseUrl: base, port, healthUrls: health, prep: [], slots: np || 4 };
  const builtin = ctx.builtinLlama();
  return {
    argv: [...builtin.argv, ...args.slice(1)],
    env: { ...env, ...builtin.env },
    baseUrl: base,
    port,
    healthUrls: health,
    prep: [],
    builtin: true,
    slots: np || 1,
  };
};
