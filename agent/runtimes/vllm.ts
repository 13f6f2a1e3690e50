import { splitCommand } from "../command";
import { baseUrlOf, gpuEnv, withPort, withTensorParallel } from "./args";
import { versionInstall } from "./install";
import type { Launcher } from "./types";

/**
 * vLLM and vLLM-Omni: the command as given, plus `--tensor-parallel-size <assignment GPUs>` when it
 * has no tensor-parallel flag and `--host/--port` when it sets no port. With `vllm_version`, that
 * version is installed once into `<data-dir>/runtimes/vllm/<version>` and put first on PATH.
 */
export const vllm: Launcher = (ctx) => {
  const { config } = ctx.spec.workload;
  const { args, host, port } = withPort(withTensorParallel(splitCommand(String(config.command)), ctx.spec.gpus), ctx.freePort);
  const env: Record<string, string> = gpuEnv(ctx.spec.gpu_indices);
  const version = config.vllm_version as string | undefined;
  const install = version ? versionInstall(ctx, "vllm", "vllm", version) : undefined;
  if (install) {
    env.PATH = `${install.binDir}:${ctx.env.PATH ?? ""}`;
    env.VIRTUAL_ENV = install.binDir.replace(/\/bin$/, "");
  }
  const base = baseUrlOf(host, port);
  return { argv: args, env, baseUrl: base, healthUrls: [`${base}/health`, `${base}/v1/models`], prep: install?.steps ?? [] };
};
