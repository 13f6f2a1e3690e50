import { DEFAULT_FORBIDDEN_FLAGS, DEFAULT_PROGRAMS, type LaunchPolicy } from "../../agent/launch-policy";
import type { ReplicaSpec } from "../../agent/protocol";
import type { LaunchContext } from "../../agent/runtimes/types";

/**
 * A launcher's context for unit tests: a replica of a workload on `backend` with `gpuIndices`
 * (none by default) and `config` (none), nothing installed but what `which` finds, port 9000.
 * @example ollama.launch(launchContext("ollama", { gpuIndices: [1] }))
 */
export function launchContext(
  backend: string,
  opts: {
    gpuIndices?: number[];
    env?: Record<string, string>;
    which?: (cmd: string) => string | null;
    config?: Record<string, unknown>;
  } = {},
): LaunchContext {
  const gpuIndices = opts.gpuIndices ?? [];
  return {
    spec: {
      assignment_id: "asg",
      workload: {
        id: "wl",
        slug: "w",
        project_slug: "p",
        backend,
        model_name: "m",
        task_type: "text2text",
        config: opts.config ?? {},
      },
      concurrency: 1,
      gpus: Math.max(1, gpuIndices.length),
      gpu_indices: gpuIndices,
      revision: "r",
    } as ReplicaSpec,
    freePort: 9000,
    dataDir: "/tmp/x",
    env: opts.env ?? {},
    gpus: [],
    which: opts.which ?? (() => null),
    builtinLlama: () => ({ argv: [], env: {} }),
  };
}

/** The launch policy a tenant's workload gets by default (model files from `modelPaths` only). */
export const tenantPolicy = (modelPaths: string[] = []): LaunchPolicy => ({
  programs: DEFAULT_PROGRAMS,
  forbidden_flags: DEFAULT_FORBIDDEN_FLAGS,
  model_paths: modelPaths,
  tenant_installs: false,
  tenant_multinode: false,
  private_model_urls: false,
});
