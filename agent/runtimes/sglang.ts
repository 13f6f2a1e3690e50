import { splitCommand } from "../command";
import { baseUrlOf, gpuEnv, withPort } from "./args";
import { versionInstall } from "./install";
import type { Launcher } from "./types";

/**
 * SGLang: the command as given (e.g. `python3 -m sglang.launch_server --model-path …`) with the same
 * port rule; `sglang_version` installs that version once like vLLM's.
 */
export const sglang: Launcher = (ctx) => {
  const { config } = ctx.spec.workload;
  const { args, host, port } = withPort(splitCommand(String(config.command)), ctx.freePort);
  const env: Record<string, string> = gpuEnv(ctx.spec.gpu_indices);
  const version = config.sglang_version as string | undefined;
  const install = version ? versionInstall(ctx, "sglang", "sglang", version) : undefined;
  if (install) {
    env.PATH = `${install.binDir}:${ctx.env.PATH ?? ""}`;
    env.VIRTUAL_ENV = install.binDir.replace(/\/bin$/, "");
  }
  const base = baseUrlOf(host, port);
  return { argv: args, env, baseUrl: base, healthUrls: [`${base}/health`, `${base}/v1/models`], prep: install?.steps ?? [] };
};
