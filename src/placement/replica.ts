/**
 * Where one replica goes: which worker (honouring `worker_id` / `gpu_resource_id` pins) and which
 * GPUs on it, whether a placement by hand fits, and which automatic replicas a change made stale.
 * Pure functions over a snapshot; `freeMemory` is the free memory they judge by.
 */
import { fitOnGpus, gib, type FreeGpu } from "../models/fit";
import {
  freeMemory,
  gpuUse,
  MiB,
  workerNamed,
  type ReplicaSnapshot,
  type Snapshot,
  type WorkerSnapshot,
  type WorkloadSnapshot,
} from "./snapshot";
import { plural } from "../words";

/** A replica's place: a worker, how many GPUs, and which. */
export interface ReplicaPlace {
  workerId: string;
  gpus: number;
  gpuIndices: number[];
}

/** Shown free memory: a GPU promised more than it has shows none. */
const shown = (freeMiB: number) => gib(Math.max(0, freeMiB) * MiB);

/**
 * Picks `count` GPU indices on a worker: the pinned GPU first; when the need (`bytes`, on these
 * GPUs) is known and nothing is pinned, those with the most free memory; otherwise the least
 * shared ones, the freest among equals.
 */
export function pickGpus(
  snap: Snapshot,
  worker: WorkerSnapshot,
  count: number,
  bytes?: number,
  pinnedUuid?: string | null,
): number[] {
  if (worker.gpus.length === 0) return [];
  const free = freeMemory(snap).get(worker.id)!;
  if (bytes !== undefined && !pinnedUuid) return fitOnGpus(bytes, free, count).gpus;
  const use = gpuUse(snap, worker.id);
  const freeOf = (i: number) => free.find((g) => g.index === i)!.free_mib;
  const pinned = worker.gpus.find((g) => g.uuid === pinnedUuid)?.index;
  const rest = worker.gpus
    .map((g) => g.index)
    .filter((i) => i !== pinned)
    .sort((a, b) => (use.get(a) ?? 0) - (use.get(b) ?? 0) || freeOf(b) - freeOf(a) || a - b);
  return (pinned !== undefined ? [pinned, ...rest] : rest).slice(0, count).sort((a, b) => a - b);
}

/** GPUs for an automatic replica on a worker: the workload's (its tensor-parallel size), at most the worker's; 1 on a worker without GPUs. */
const gpusOn = (w: WorkloadSnapshot, worker: WorkerSnapshot) =>
  worker.gpus.length > 0 ? Math.min(w.gpus, worker.gpus.length) : 1;

/** Which worker can host a new automatic replica of `w`, or why none can. */
function chooseWorker(snap: Snapshot, w: WorkloadSnapshot): { worker: WorkerSnapshot } | { why: string } {
  if (w.pinnedWorker) {
    const pinned = workerNamed(snap, w.pinnedWorker);
    return pinned ? { worker: pinned } : { why: `the pinned worker "${w.pinnedWorker}" does not exist` };
  }
  if (w.pinnedGpu) {
    const owner = snap.workers.find((x) => x.gpus.some((g) => g.uuid === w.pinnedGpu));
    return owner ? { worker: owner } : { why: `no worker has the pinned GPU "${w.pinnedGpu}"` };
  }
  const online = snap.workers.filter((x) => x.online);
  if (!w.needsGpu) {
    const local = online.find((x) => x.kind === "local") ?? online[0];
    return local ? { worker: local } : { why: "no worker is online" };
  }
  const withGpu = online.filter((x) => x.gpus.length > 0);
  if (!withGpu[0]) return { why: `no online worker has a GPU, which backend "${w.backend}" needs` };
  if (w.need.bytes === undefined) return { worker: withGpu[0] };
  const free = freeMemory(snap);
  const fitting = withGpu.find((x) => fitOnGpus(w.need.bytes!, free.get(x.id)!, gpusOn(w, x)).fits);
  if (fitting) return { worker: fitting };
  const best = withGpu
    .flatMap((x) => free.get(x.id)!.map((g) => ({ x, g })))
    .sort((a, b) => b.g.free_mib - a.g.free_mib)[0];
  return {
    why: `${w.need.text}; the most free GPU memory is ${shown(best.g.free_mib)} on GPU ${best.g.index} of "${best.x.name}"`,
  };
}

/**
 * Where a new automatic replica of `w` goes: its pinned worker (or the owner of its pinned GPU);
 * else, for GPU backends, the first online worker with a GPU where the model fits (the first with a
 * GPU when its size is unknown); else the local worker (any online one). Its GPUs: the command's
 * tensor-parallel size, picked by `pickGpus`. Or why it cannot be placed.
 */
export function placeReplica(snap: Snapshot, w: WorkloadSnapshot): ReplicaPlace | { why: string } {
  const chosen = chooseWorker(snap, w);
  if ("why" in chosen) return chosen;
  const gpus = gpusOn(w, chosen.worker);
  return {
    workerId: chosen.worker.id,
    gpus,
    gpuIndices: pickGpus(snap, chosen.worker, gpus, w.need.bytes, w.pinnedGpu),
  };
}

/** "GPU 0 has 6.1 GiB free, GPU 1 has 2.0 GiB free": the free memory of the given GPUs. */
const freeText = (gpus: FreeGpu[], indices: number[]) =>
  indices.map((i) => `GPU ${i} has ${shown(gpus.find((g) => g.index === i)!.free_mib)} free`).join(", ");

/**
 * A replica of `w` on a given worker (a placement by hand, or another one beside a replica): its
 * GPU indices, or why not — too many GPUs for the worker (`field: "gpus"`), or, when `checkFit`,
 * too little free memory for the model (`does_not_fit`, with the numbers).
 */
export function placeOn(
  snap: Snapshot,
  w: WorkloadSnapshot,
  worker: WorkerSnapshot,
  count: number,
  checkFit: boolean,
): { gpuIndices: number[] } | { why: string; code: "too_many_gpus" | "does_not_fit" } {
  const have = worker.gpus.length;
  if (have > 0 && count > have)
    return { why: `worker "${worker.name}" has only ${plural(have, "GPU")}`, code: "too_many_gpus" };
  const free = freeMemory(snap).get(worker.id)!;
  if (checkFit && w.need.bytes !== undefined && have > 0) {
    const fit = fitOnGpus(w.need.bytes, free, count);
    if (!fit.fits) {
      const each = count > 1 ? `, ${gib(fit.need_per_gpu_mib * MiB)} on each of ${count} GPUs` : "";
      return {
        why: `${w.need.text}${each}; on worker "${worker.name}" ${freeText(free, fit.gpus)}. Free memory, pick another worker, or pass "force": true`,
        code: "does_not_fit",
      };
    }
  }
  return { gpuIndices: pickGpus(snap, worker, count, w.need.bytes, w.pinnedGpu) };
}

/**
 * Automatic replicas of a single-machine workload that no longer belong: all of them once one was
 * placed by hand (that replaces them), and those off its pinned worker or its pinned GPU's worker.
 */
export function staleReplicas(snap: Snapshot, w: WorkloadSnapshot): ReplicaSnapshot[] {
  const current = snap.replicas.filter((r) => r.workloadId === w.id);
  const manual = current.some((r) => !r.auto);
  const worker = (r: ReplicaSnapshot) => snap.workers.find((x) => x.id === r.workerId);
  const offPin = (r: ReplicaSnapshot) =>
    !!w.pinnedWorker && r.workerId !== w.pinnedWorker && worker(r)?.name !== w.pinnedWorker;
  const offGpu = (r: ReplicaSnapshot) =>
    !w.pinnedWorker && !!w.pinnedGpu && !worker(r)?.gpus.some((g) => g.uuid === w.pinnedGpu);
  return current.filter((r) => r.auto && (manual || offPin(r) || offGpu(r)));
}
