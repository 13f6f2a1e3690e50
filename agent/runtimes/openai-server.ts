import { splitCommand } from "../command";
import type { Engine } from "../engines/types";
import { baseUrlOf, gpuEnv, vendorOfLaunch, withPort, withTensorParallel } from "./args";
import { versionInstall } from "./install";
import type { LaunchContext, LaunchPlan } from "./types";

/**
 * The shared shape of vLLM and SGLang launches: the command as given plus the port rule (and, for
 * an engine whose tensor parallel is per machine, `--tensor-parallel-size <GPUs>` unless set), GPUs
 * by environment, and an optional pinned version installed once into
 * `<data-dir>/runtimes/<backend>/<version>` and put first on PATH. Readiness and capacity are the
 * engine's.
 */
export function pythonServer(ctx: LaunchContext, engine: Engine): LaunchPlan {
  const { config } = ctx.spec.workload;
  const words = splitCommand(String(config.command));
  const { args, host, port } = withPort(
    engine.tensorParallelSpansGroup ? words : withTensorParallel(words, ctx.spec.gpus, engine.flags.tensorParallel),
    ctx.freePort,
  );
  const env: Record<string, string> = gpuEnv(ctx.spec.gpu_indices, vendorOfLaunch(ctx.gpus));
  const version = engine.pinned ? (config[engine.pinned.field] as string | undefined) : undefined;
  const install =
    version && engine.pinned
      ? versionInstall(
          ctx,
          engine.backend,
          version,
          engine.pinned.install(version, { args, nodes: ctx.spec.group?.nodes ?? 1 }),
        )
      : undefined;
  if (install) {
    env.PATH = `${install.binDir}:${ctx.env.PATH ?? ""}`;
    env.VIRTUAL_ENV = install.binDir.replace(/\/bin$/, "");
  }
  const base = baseUrlOf(host, port);
  return {
    argv: args,
    env,
    baseUrl: base,
    port,
    healthUrls: engine.readiness(base),
    prep: install?.steps ?? [],
    slots: engine.capacity({ args, gpus: ctx.gpus, env: ctx.env, version }).slots,
  };
}
