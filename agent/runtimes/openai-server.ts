import { flagValue, splitCommand } from "../command";
import { baseUrlOf, gpuEnv, withPort, withTensorParallel } from "./args";
import { versionInstall } from "./install";
import type { LaunchContext, LaunchPlan } from "./types";

/**
 * The shared shape of vLLM and SGLang launches: the command as given plus the port rule (and
 * vLLM's tensor-parallel rule), GPUs by environment, and an optional pinned version installed once
 * into `<data-dir>/runtimes/<kind>/<version>` and put first on PATH.
 */
export function pythonServer(
  ctx: LaunchContext,
  opts: { kind: string; tensorParallel: boolean; versionField: string },
): LaunchPlan {
  const { config } = ctx.spec.workload;
  const words = splitCommand(String(config.command));
  const { args, host, port } = withPort(
    opts.tensorParallel ? withTensorParallel(words, ctx.spec.gpus) : words,
    ctx.freePort,
  );
  const env: Record<string, string> = gpuEnv(ctx.spec.gpu_indices);
  const version = config[opts.versionField] as string | undefined;
  const install = version ? versionInstall(ctx, opts.kind, opts.kind, version) : undefined;
  if (install) {
    env.PATH = `${install.binDir}:${ctx.env.PATH ?? ""}`;
    env.VIRTUAL_ENV = install.binDir.replace(/\/bin$/, "");
  }
  const base = baseUrlOf(host, port);
  // vLLM's --max-num-seqs and SGLang's --max-running-requests (256 when not given).
  const slots = Number(flagValue(args, [opts.kind === "vllm" ? "--max-num-seqs" : "--max-running-requests"])) || 256;
  return {
    argv: args,
    env,
    baseUrl: base,
    port,
    healthUrls: [`${base}/health`, `${base}/v1/models`],
    prep: install?.steps ?? [],
    slots,
  };
}
