/**
 * Room on GPUs for the scaler: whether an idle replica can start now (on its own GPUs, else on other
 * GPUs with room), must wait for memory being freed, or can start once least recently used idle
 * replicas of other workloads are swapped out; and where another replica of a workload goes. Pure
 * functions over a snapshot and `freeMemory`; the scaler (src/scaling/room.ts) applies the answers.
 */
import { gib } from "../models/fit";
import {
  freeMemory,
  givesWayFirst,
  mayGiveWay,
  MiB,
  needMiB,
  type ReplicaSnapshot,
  type Snapshot,
  type WorkerSnapshot,
  type WorkloadSnapshot,
} from "./snapshot";

/** Where a replica could run: a worker and GPU indices on it. */
export interface Spot {
  worker: WorkerSnapshot;
  gpuIndices: number[];
}

/** What the scaler knows beside the snapshot: which running replicas are busy, when each workload last had work. */
export interface RoomContext {
  /** Replicas with a request in flight, or whose workload has requests queued: never swapped out. */
  busy: ReadonlySet<string>;
  /** When a workload last had work (ms): the least recently used is swapped out first. */
  lastBusy: (workloadId: string) => number;
}

/** The scaler's answer for one idle replica: start it there, swap others out for it, or wait (and why). */
export type StartDecision =
  | { start: Spot }
  | { swap: Spot; evict: ReplicaSnapshot[]; names: string[]; why: string }
  | { wait: string };

/** How much memory (MiB) each of `gpuIndices` on `worker` lacks for a replica of `w` now (empty: room). */
export function deficit(
  snap: Snapshot,
  w: WorkloadSnapshot,
  worker: WorkerSnapshot,
  gpuIndices: number[],
): Map<number, number> {
  const free = freeMemory(snap).get(worker.id)!;
  const missing = new Map<number, number>();
  for (const i of gpuIndices) {
    const g = free.find((x) => x.index === i);
    if (!g) continue;
    const need = needMiB(w.need, g.total_mib, gpuIndices.length);
    if (need > g.free_mib) missing.set(i, need - g.free_mib);
  }
  return missing;
}

/** Online workers a workload could run on: those with GPUs for GPU backends, any otherwise. */
const candidates = (snap: Snapshot, w: WorkloadSnapshot) =>
  snap.workers.filter((x) => x.online && (!w.needsGpu || x.gpus.length > 0));

/** Where an idle replica could start: its own GPUs first; an automatic one also on each other GPU (set) of a candidate worker. */
function spots(snap: Snapshot, w: WorkloadSnapshot, r: ReplicaSnapshot, own: WorkerSnapshot): Spot[] {
  const count = r.gpuIndices.length || 1;
  const out: Spot[] = [{ worker: own, gpuIndices: r.gpuIndices }];
  if (!r.auto) return out;
  for (const worker of candidates(snap, w)) {
    const gpus = worker.gpus.map((g) => g.index);
    const sets = count === 1 ? gpus.map((i) => [i]) : gpus.length >= count ? [gpus.slice(0, count)] : [];
    for (const set of sets)
      if (!(worker.id === own.id && set.join() === r.gpuIndices.join())) out.push({ worker, gpuIndices: set });
  }
  return out;
}

/**
 * Which replicas of other workloads on `worker` to swap out to cover the missing memory: lower
 * priority first, then least recently used; only of workloads that may go to zero, are not pinned
 * (`keep_warm`), are of no higher priority than `w`, and have nothing in flight or queued — never a
 * `fixed` one. `covers` says whether they would be enough.
 */
export function evictionPlan(
  snap: Snapshot,
  w: WorkloadSnapshot,
  worker: WorkerSnapshot,
  missing: Map<number, number>,
  ctx: RoomContext,
): { rows: ReplicaSnapshot[]; covers: boolean } {
  const options = snap.replicas
    .filter(
      (a) =>
        a.workerId === worker.id &&
        a.desired === "run" &&
        a.gpuIndices.some((i) => missing.has(i)) &&
        mayGiveWay(snap, a, w),
    )
    .filter((a) => snap.workloads.get(a.workloadId)?.swappable && !ctx.busy.has(a.id))
    .sort(givesWayFirst(snap, ctx.lastBusy));
  const left = new Map(missing);
  const rows: ReplicaSnapshot[] = [];
  for (const a of options) {
    if ([...left.values()].every((m) => m <= 0)) break;
    const other = snap.workloads.get(a.workloadId)!;
    for (const i of a.gpuIndices) {
      const g = worker.gpus.find((x) => x.index === i);
      if (g && left.has(i)) left.set(i, left.get(i)! - needMiB(other.need, g.totalMiB, a.gpuIndices.length));
    }
    rows.push(a);
  }
  return { rows, covers: [...left.values()].every((m) => m <= 0) };
}

/**
 * Whether replicas of other workloads on the worker are stopping, or stopped after its last probe:
 * their memory is not free in the numbers yet, so swapping out more would be too many.
 */
function freeing(snap: Snapshot, worker: WorkerSnapshot, exceptWorkload: string): boolean {
  return snap.replicas.some(
    (a) =>
      a.workerId === worker.id &&
      a.workloadId !== exceptWorkload &&
      a.desired !== "run" &&
      (a.state !== (a.desired === "idle" ? "idle" : "sleeping") || a.updatedAt >= worker.probedAt) &&
      a.state !== "pending",
  );
}

/** "GPU 0 lacks 2.1 GiB, GPU 1 lacks 0.4 GiB". */
const lacks = (missing: Map<number, number>) =>
  [...missing].map(([i, m]) => `GPU ${i} lacks ${gib(m * MiB)}`).join(", ");

/**
 * Room for one idle replica to start: the first spot with room now (`start`); else wait while other
 * replicas' memory is being freed; else the first spot where swapping out idle replicas of other
 * workloads covers what is missing (`swap`: it waits there for the memory); else wait, saying what
 * is missing on its own GPUs. Undefined when its worker is gone.
 */
export function room(snap: Snapshot, replicaId: string, ctx: RoomContext): StartDecision | undefined {
  const r = snap.replicas.find((x) => x.id === replicaId);
  const own = r && snap.workers.find((x) => x.id === r.workerId);
  const w = r && snap.workloads.get(r.workloadId);
  if (!r || !own || !w) return undefined;
  // A sleeping replica wakes where its process is; another may start elsewhere.
  const options = r.state === "sleeping" ? [{ worker: own, gpuIndices: r.gpuIndices }] : spots(snap, w, r, own);
  const open = options.find((p) => deficit(snap, w, p.worker, p.gpuIndices).size === 0);
  if (open) return { start: open };
  if (options.some((p) => freeing(snap, p.worker, w.id))) return { wait: "waiting for GPU memory being freed" };
  for (const p of options) {
    const missing = deficit(snap, w, p.worker, p.gpuIndices);
    const plan = evictionPlan(snap, w, p.worker, missing, ctx);
    if (!plan.covers) continue;
    const names = plan.rows.map((a) => snap.workloads.get(a.workloadId)!.label);
    return {
      swap: p,
      evict: plan.rows,
      names,
      why: `waiting for GPU memory (${lacks(missing)}): swapping out ${names.join(", ")}`,
    };
  }
  return {
    wait: `waiting for GPU memory (${lacks(deficit(snap, w, own, r.gpuIndices))}); no idle replica can be swapped out`,
  };
}

/** A worker for another replica of `w`: a candidate with room for it on some GPU, else the first candidate. */
export function workerForAnother(snap: Snapshot, w: WorkloadSnapshot): WorkerSnapshot | undefined {
  const all = candidates(snap, w);
  const free = freeMemory(snap);
  return all.find((x) => free.get(x.id)!.some((g) => needMiB(w.need, g.total_mib, 1) <= g.free_mib)) ?? all[0];
}
