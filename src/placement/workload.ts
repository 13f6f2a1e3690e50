/**
 * A workload as placement sees it, read from its stored fields and its command: how many GPUs a
 * replica takes (the tensor-parallel flags the agent reads too), whether it needs one, and the
 * memory it holds. Pure: the model's estimate comes from the caller (src/workers/snapshot.ts reads the store).
 */
import { splitCommand } from "../../agent/command";
import { engineOf, tensorParallelOf } from "../../agent/engines";
import type { Need, WorkloadSnapshot } from "./snapshot";

/** The fields of a workload (as src/workloads stores it) that placement reads. */
export interface PlacedWorkload {
  id: string;
  project_slug: string;
  slug: string;
  backend: string;
  nodes: number;
  config: Record<string, unknown>;
  worker_id: string | null;
  gpu_resource_id: string | null;
  paused: boolean;
  execution_policy: string;
  execution_params: Record<string, unknown>;
}

/** The command's words, or none when it cannot be split (it is refused at save time anyway). */
function words(w: Pick<PlacedWorkload, "config">): string[] {
  try {
    return splitCommand(String(w.config.command ?? ""));
  } catch {
    return [];
  }
}

/**
 * GPUs each replica (each member of a group) takes: the command's tensor-parallel size, else 1.
 * vLLM's size is per machine; SGLang's is the whole group's, split over its machines.
 * @example replicaGpus({ backend: "sglang", nodes: 2, config: { command: "python3 -m sglang.launch_server --tp-size 4" } }) // → 2
 */
export function replicaGpus(w: Pick<PlacedWorkload, "backend" | "nodes" | "config">): number {
  const tp = tensorParallelOf(w.backend, words(w)) ?? 1;
  return engineOf(w.backend)?.tensorParallelSpansGroup ? Math.max(1, Math.ceil(tp / Math.max(1, w.nodes))) : tp;
}

/** A workload as placement sees it; `estimate` is its model's, when the store knows the model. */
export function workloadSnapshot(
  w: PlacedWorkload,
  estimate?: { bytes: number; text: string; weightsBytes?: number },
): WorkloadSnapshot {
  const share = engineOf(w.backend)?.gpuShare?.(words(w));
  const need: Need = {
    ...(estimate ? { bytes: estimate.bytes, text: estimate.text } : {}),
    ...(estimate?.weightsBytes ? { weightsBytes: estimate.weightsBytes } : {}),
    ...(share !== undefined ? { share } : {}),
  };
  return {
    id: w.id,
    label: `${w.project_slug}/${w.slug}`,
    backend: w.backend,
    nodes: w.nodes,
    gpus: replicaGpus(w),
    needsGpu: engineOf(w.backend)?.needsGpu ?? false,
    need,
    pinnedWorker: w.worker_id,
    pinnedGpu: w.gpu_resource_id,
    swappable:
      !w.paused &&
      w.execution_policy === "autoscaling" &&
      ((w.execution_params as { min_replicas?: number }).min_replicas ?? 0) === 0,
    keepWarm: (w.execution_params as { keep_warm?: boolean }).keep_warm === true,
    priority: (w.execution_params as { priority?: number }).priority ?? 0,
    sleep: sleepLevels(w),
  };
}

/**
 * The sleep levels an idled replica of `w` may take: its engine's (agent/engines: `sleep`), when its
 * policy idles replicas (autoscaling, scheduled), it runs on one machine and `sleep: false` does not
 * say otherwise; none for a fixed workload (it never idles) or one stopped by the operator.
 */
export function sleepLevels(
  w: Pick<PlacedWorkload, "backend" | "nodes" | "paused" | "execution_policy" | "execution_params">,
): (1 | 2)[] {
  const levels = engineOf(w.backend)?.sleep?.levels;
  if (!levels?.length || w.nodes > 1 || w.paused) return [];
  if (w.execution_policy !== "autoscaling" && w.execution_policy !== "scheduled") return [];
  return (w.execution_params as { sleep?: boolean }).sleep === false ? [] : [...levels];
}
