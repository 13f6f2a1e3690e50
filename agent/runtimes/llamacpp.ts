import { splitCommand } from "../command";
import { baseUrlOf, gpuEnv, withPort } from "./args";
import type { Launcher } from "./types";

/**
 * llama.cpp: the verbatim `llama-server` command with the port rule. When that executable is not
 * installed, the built-in runtime (node-llama-cpp) serves the same flags instead.
 */
export const llamacpp: Launcher = (ctx) => {
  const words = splitCommand(String(ctx.spec.workload.config.command));
  const { args, host, port } = withPort(words, ctx.freePort);
  const env: Record<string, string> = gpuEnv(ctx.spec.gpu_indices);
  const base = baseUrlOf(host, port);
  const health = [`${base}/health`, `${base}/v1/models`];
  if (ctx.which(args[0])) return { argv: args, env, baseUrl: base, healthUrls: health, prep: [] };
  const builtin = ctx.builtinLlama();
  return { argv: [...builtin.argv, ...args.slice(1)], env: { ...env, ...builtin.env }, baseUrl: base, healthUrls: health, prep: [], builtin: true };
};
