/**
 * What placement decides from: a snapshot of the workers, their GPUs as last reported, every
 * assigned replica and what each workload's replica needs — read once (src/workers/snapshot.ts), then only
 * computed on. The one free-memory computation of inferd lives here (`freeMemory`).
 */
import type { FreeGpu } from "../models/fit";

/** Bytes in a MiB. */
export const MiB = 1048576;

/** A GPU as its worker last reported it. */
export interface GpuSnapshot {
  index: number;
  uuid: string;
  name: string;
  totalMiB: number;
  /** Memory in use when the worker last probed (what nvidia-smi said). */
  usedMiB: number;
}

/** One worker as placement sees it. */
export interface WorkerSnapshot {
  id: string;
  name: string;
  /** `local`: an inferd host's own machine (CPU backends go there first); `remote`: an agent's. */
  kind: "local" | "remote";
  online: boolean;
  /** Its `--cluster-address`, or null when it hosts no group members. */
  clusterAddress: string | null;
  gpus: GpuSnapshot[];
  /** Free RAM as last reported (all of it when unknown): where a model fits without a GPU. */
  ramFreeBytes: number;
  /** Host RAM (MiB) sleeping replicas may hold on it at most (`--sleep-ram-mib`, else half its RAM). */
  sleepRamMiB: number;
  /** When the reported usage was measured (ms since the epoch; 0: never). */
  probedAt: number;
}

/**
 * What the scaler wants of a replica: `run`; `idle` (stopped: scaled to zero, swapped out, waiting for
 * memory); `sleep` (its runtime kept, asleep at level 1: GPU memory freed, weights held in host RAM);
 * `deep_sleep` (level 2: weights dropped too, the process and its compiled graphs kept).
 */
export type Desired = "run" | "idle" | "sleep" | "deep_sleep";

/** The sleep level a desired state asks for (undefined: awake or stopped). */
export const sleepLevelOf = (d: Desired): 1 | 2 | undefined => (d === "sleep" ? 1 : d === "deep_sleep" ? 2 : undefined);

/** One assigned replica (a member of a multi-node group too). */
export interface ReplicaSnapshot {
  id: string;
  workloadId: string;
  workerId: string;
  /** GPUs it was given: how many, and which (none on a worker without GPUs). */
  gpus: number;
  gpuIndices: number[];
  /** `run`: its agent runs it; `idle`: told to stop, or to wait for memory; `sleep` / `deep_sleep`: kept asleep. */
  desired: Desired;
  /** Its last state (`pending`, `downloading`, `installing`, `starting`, `ready`, `failed`, `stopped`, `idle`). */
  state: string;
  /** Placed by inferd (true) or by hand. */
  auto: boolean;
  groupId: string | null;
  nodeRank: number;
  /** When its row last changed (ms): a replica ready since before its worker's probe is in the reported usage. */
  updatedAt: number;
}

/** The memory one replica of a workload takes. */
export interface Need {
  /** The model's estimate (weights + KV cache + overhead), when the store knows the model. */
  bytes?: number;
  /** The estimate in words, for reasons ("m needs ~8.0 GiB (weights …)"). */
  text?: string;
  /** The share of each of its GPUs vLLM or SGLang preallocates whatever the model (0.9, 0.88 by default). */
  share?: number;
  /** The model's weights alone (what a level-1 sleep holds in host RAM), when the store knows the model. */
  weightsBytes?: number;
}

/** One workload as placement sees it. */
export interface WorkloadSnapshot {
  id: string;
  /** `project/workload`, as reasons name it. */
  label: string;
  backend: string;
  /** Machines it spans (one group when more than 1). */
  nodes: number;
  /** GPUs each replica (each group member) takes: the command's tensor-parallel size, else 1. */
  gpus: number;
  /** Whether it needs a GPU to be placed automatically (vLLM, vLLM-Omni, SGLang). */
  needsGpu: boolean;
  need: Need;
  /** `worker_id` pin (id or name). */
  pinnedWorker: string | null;
  /** `gpu_resource_id` pin (a GPU uuid). */
  pinnedGpu: string | null;
  /** Whether its idle replicas may be swapped out: autoscaling down to zero, not stopped by the operator. */
  swappable: boolean;
  /**
   * `keep_warm`: its replicas are never swapped out for another workload's, and asleep they are never
   * stopped to free host RAM (they still sleep after their own idle timeout).
   */
  keepWarm: boolean;
  /** `priority` (-100…100, default 0): replicas of a lower one give way first, and never for a lower one. */
  priority: number;
  /**
   * The sleep levels an idled replica may take instead of stopping (agent/engines: vLLM 1 and 2, SGLang
   * 1), empty when its engine cannot sleep, its policy never idles it, or `sleep: false` says not to.
   */
  sleep: (1 | 2)[];
}

/** Everything placement decides from. */
export interface Snapshot {
  workers: WorkerSnapshot[];
  replicas: ReplicaSnapshot[];
  workloads: Map<string, WorkloadSnapshot>;
}

/**
 * The MiB one replica takes on each of its `count` GPUs: vLLM's and SGLang's share of the GPU
 * (they preallocate it whatever the model), else the model's estimate split evenly, else 0 (unknown).
 * @example needMiB({ share: 0.9 }, 24000, 1) // → 21600
 * @example needMiB({ bytes: 8 * 1024 ** 3 }, 24000, 2) // → 4096
 */
export function needMiB(need: Need, totalMiB: number, count: number): number {
  if (need.share !== undefined) return Math.ceil(totalMiB * need.share);
  return need.bytes ? Math.ceil(need.bytes / Math.max(1, count) / MiB) : 0;
}

/** States of a replica whose runtime is on its way to holding its memory (a sleeping one told to run wakes). */
const STARTING = new Set(["pending", "downloading", "installing", "starting", "sleeping", "waking"]);

/**
 * Whether a replica holds (or is about to hold) memory its worker's last report does not show:
 * told to run and still starting, or ready only since that report was measured. A failed, stopped
 * or idle one holds nothing; one ready before the probe is in `usedMiB` already.
 */
export function unreported(r: ReplicaSnapshot, w: WorkerSnapshot): boolean {
  return r.desired === "run" && (STARTING.has(r.state) || (r.state === "ready" && r.updatedAt >= w.probedAt));
}

/**
 * Free memory of every GPU, by worker id: what the worker reported free (total − used), minus the
 * need of each replica on that GPU the report does not show yet (`unreported`) — once a replica is
 * in the report it is subtracted there, never twice. May be negative: replicas starting there were
 * promised more than is left.
 *
 * Example: a worker with two 24000 MiB GPUs reports 2000 MiB used on GPU 0 and none on GPU 1. A
 * replica ready before the probe (on GPU 0) is in those 2000 already. A vLLM replica starting on
 * GPU 1 takes 0.9 × 24000 = 21600; a llama.cpp replica of an 8 GiB model starting on both takes
 * 4096 on each. Free: GPU 0 = 24000 − 2000 − 4096 = 17904; GPU 1 = 24000 − 21600 − 4096 = −1696.
 * A starting replica whose need is unknown (no share, model not in the store) takes 0 until it reports.
 */
export function freeMemory(snap: Snapshot): Map<string, FreeGpu[]> {
  const out = new Map<string, FreeGpu[]>();
  for (const w of snap.workers) {
    const free = new Map(w.gpus.map((g) => [g.index, g.totalMiB - g.usedMiB]));
    for (const r of snap.replicas) {
      const need = snap.workloads.get(r.workloadId)?.need;
      if (r.workerId !== w.id || !need || !unreported(r, w)) continue;
      for (const i of r.gpuIndices) {
        const g = w.gpus.find((x) => x.index === i);
        if (g) free.set(i, free.get(i)! - needMiB(need, g.totalMiB, r.gpuIndices.length));
      }
    }
    out.set(
      w.id,
      w.gpus.map((g) => ({ index: g.index, name: g.name, total_mib: g.totalMiB, free_mib: free.get(g.index)! })),
    );
  }
  return out;
}

/** How many replicas (any state) use each GPU index of a worker: the least shared are picked when the need is unknown. */
export function gpuUse(snap: Snapshot, workerId: string): Map<number, number> {
  const use = new Map<number, number>();
  for (const r of snap.replicas)
    if (r.workerId === workerId) for (const i of r.gpuIndices) use.set(i, (use.get(i) ?? 0) + 1);
  return use;
}

/** A worker by id, or by name (a pin may say either). */
export const workerNamed = (snap: Snapshot, idOrName: string): WorkerSnapshot | undefined =>
  snap.workers.find((w) => w.id === idOrName || w.name === idOrName);

/** The snapshot without the replicas `drop` picks (replicas about to be replaced). */
export function without(snap: Snapshot, drop: (r: ReplicaSnapshot) => boolean): Snapshot {
  return { ...snap, replicas: snap.replicas.filter((r) => !drop(r)) };
}

/**
 * Keeps a snapshot true to writes just made (a replica added, changed or removed), so later decisions
 * of the same pass see them. The one place a snapshot changes: its appliers call it after each write.
 */
export function note(
  snap: Snapshot,
  change: { add?: ReplicaSnapshot; set?: { id: string } & Partial<ReplicaSnapshot>; remove?: string },
): void {
  if (change.add) snap.replicas.push(change.add);
  if (change.remove) snap.replicas = snap.replicas.filter((r) => r.id !== change.remove);
  if (change.set) {
    const i = snap.replicas.findIndex((r) => r.id === change.set!.id);
    if (i >= 0) snap.replicas[i] = { ...snap.replicas[i], ...change.set };
  }
}

/**
 * The host RAM (MiB) a replica of `w` holds asleep at level 1: its weights (offloaded to CPU memory),
 * else, when the model is unknown, the GPU memory it takes on its GPUs (an upper bound of its weights).
 * Level 2 drops the weights: it holds none.
 * @example sleepRamMiB({ need: { weightsBytes: 4 * 1024 ** 3 } } as WorkloadSnapshot, [{ totalMiB: 24000 }]) // → 4096
 */
export function sleepRamMiB(w: Pick<WorkloadSnapshot, "need">, gpus: { totalMiB: number }[]): number {
  if (w.need.weightsBytes) return Math.ceil(w.need.weightsBytes / MiB);
  return gpus.reduce((s, g) => s + needMiB(w.need, g.totalMiB, gpus.length), 0);
}

/** The GPUs of `worker` a replica was given (its snapshots). */
const gpusOf = (worker: WorkerSnapshot, r: ReplicaSnapshot) =>
  worker.gpus.filter((g) => r.gpuIndices.includes(g.index));

/**
 * The ledger's host side: RAM (MiB) held on a worker by replicas asleep at level 1 (or told to be),
 * and by those still asleep though told to stop or wake (they hold it until they have; their level is
 * not known here, so level 1 is assumed), except `exceptId`. The GPU side is `freeMemory`: a sleeping
 * replica holds no GPU memory there (it is not `run`), a waking one does again (`run`, state `waking`).
 */
export function ramHeld(snap: Snapshot, worker: WorkerSnapshot, exceptId?: string): number {
  let held = 0;
  for (const r of snap.replicas) {
    if (r.workerId !== worker.id || r.id === exceptId) continue;
    if (r.desired !== "sleep" && !(r.desired !== "deep_sleep" && (r.state === "sleeping" || r.state === "waking")))
      continue;
    const w = snap.workloads.get(r.workloadId);
    if (w) held += sleepRamMiB(w, gpusOf(worker, r));
  }
  return held;
}

/**
 * Whether replica `x` may give way (be swapped out, or stopped asleep to free host RAM) for a replica
 * of `w`: not pinned (`keep_warm`), of no higher priority, and of another workload.
 */
export function mayGiveWay(snap: Snapshot, x: ReplicaSnapshot, w: Pick<WorkloadSnapshot, "id" | "priority">): boolean {
  const other = snap.workloads.get(x.workloadId);
  return !!other && other.id !== w.id && !other.keepWarm && other.priority <= w.priority;
}

/**
 * The order in which replicas give way: lower priority first, then the least recently used.
 * @example [a, b].sort(givesWayFirst(snap, lastBusy))
 */
export const givesWayFirst =
  (snap: Snapshot, lastBusy: (workloadId: string) => number) =>
  (a: ReplicaSnapshot, b: ReplicaSnapshot): number =>
    (snap.workloads.get(a.workloadId)?.priority ?? 0) - (snap.workloads.get(b.workloadId)?.priority ?? 0) ||
    lastBusy(a.workloadId) - lastBusy(b.workloadId);

/**
 * Replicas asleep at level 1 on `worker` that may give way for a replica of `w` (see `mayGiveWay`),
 * in the order they do, as many as free `need` MiB beside `free`; undefined when all of them would not.
 */
function sleepersToStop(
  snap: Snapshot,
  worker: WorkerSnapshot,
  w: WorkloadSnapshot,
  exceptId: string,
  free: number,
  need: number,
  lastBusy: (workloadId: string) => number,
  strictlyLower = false,
): ReplicaSnapshot[] | undefined {
  const stop: ReplicaSnapshot[] = [];
  const lower = (x: ReplicaSnapshot) => !strictlyLower || snap.workloads.get(x.workloadId)!.priority < w.priority;
  const sleepers = snap.replicas
    .filter(
      (x) =>
        x.workerId === worker.id && x.id !== exceptId && x.desired === "sleep" && mayGiveWay(snap, x, w) && lower(x),
    )
    .sort(givesWayFirst(snap, lastBusy));
  for (const x of sleepers) {
    if (free >= need) break;
    stop.push(x);
    free += sleepRamMiB(snap.workloads.get(x.workloadId)!, gpusOf(worker, x));
  }
  return free >= need ? stop : undefined;
}

/**
 * How a replica told to stop running rests: asleep at level 1 when its engine and policy allow it and
 * the worker's sleep RAM has room for its weights; else, when replicas asleep there give way to it
 * (`stop`, see `mayGiveWay`: lower priority first, then least recently used; never pinned ones),
 * asleep at level 1 once they are stopped — of the same priority only when its engine has no level 2
 * (a level-2 sleep costs a slower wake; a stopped one, a cold start) —; else at level 2 (weights
 * dropped) when its engine has it; else stopped (`idle`). With the reason in words ("" when it
 * cannot sleep at all). While replicas stopped for host RAM still hold theirs, a
 * replica that would need it to sleep at level 1 keeps running (`desired: "run"`) if it `mayWait` (the
 * scaler asks again), else takes level 2 or stops.
 * The ones in `stop` are to be stopped before it is put to sleep (the agent stops before it sleeps).
 */
export function restFor(
  snap: Snapshot,
  replicaId: string,
  lastBusy: (workloadId: string) => number = () => 0,
  mayWait = false,
): { desired: Desired; why: string; stop?: ReplicaSnapshot[] } {
  const r = snap.replicas.find((x) => x.id === replicaId);
  const w = r && snap.workloads.get(r.workloadId);
  const worker = r && snap.workers.find((x) => x.id === r.workerId);
  if (!r || !w || !worker || !w.sleep.length || r.groupId) return { desired: "idle", why: "" };
  const need = sleepRamMiB(w, gpusOf(worker, r));
  const held = ramHeld(snap, worker, r.id);
  const level1 = `asleep (level 1: its weights, ${need} MiB, held in host RAM)`;
  if (w.sleep.includes(1) && held + need <= worker.sleepRamMiB) return { desired: "sleep", why: level1 };
  if (w.sleep.includes(1) && need <= worker.sleepRamMiB && freeingRam(snap, worker, r.id)) {
    if (mayWait) return { desired: "run", why: "waiting for host RAM being freed to sleep" };
  } else if (w.sleep.includes(1) && need <= worker.sleepRamMiB) {
    const free = worker.sleepRamMiB - held;
    const stop = sleepersToStop(snap, worker, w, r.id, free, need, lastBusy, w.sleep.includes(2));
    if (stop?.length)
      return { desired: "sleep", why: `${level1}; ${stop.length} older sleeping replica(s) stopped for it`, stop };
  }
  const short = `host RAM for sleeping replicas is short (${held} of ${worker.sleepRamMiB} MiB held, ${need} MiB more needed)`;
  if (w.sleep.includes(2)) return { desired: "deep_sleep", why: `asleep (level 2: weights dropped; ${short})` };
  return { desired: "idle", why: `stopped: ${short}` };
}

/** Whether replicas on `worker` (but `exceptId`) were told to stop while asleep and still hold their host RAM. */
const freeingRam = (snap: Snapshot, worker: WorkerSnapshot, exceptId: string) =>
  snap.replicas.some(
    (x) => x.workerId === worker.id && x.id !== exceptId && x.desired === "idle" && x.state === "sleeping",
  );

/**
 * What waking a replica asleep at level 2 needs of host RAM (it reads its weights back through host
 * memory, and an engine refuses when that is short): nothing when the worker's sleep RAM has room
 * (undefined); else the replicas asleep at level 1 there to stop for it, those that give way first
 * (`stop`: see `mayGiveWay`, `givesWayFirst`); or `wait` while some stopped for that still hold theirs. Undefined too when stopping
 * them all would not be enough (the wake is tried; a refused one starts the runtime again).
 */
export function roomToReload(
  snap: Snapshot,
  replicaId: string,
  lastBusy: (workloadId: string) => number,
): { stop: ReplicaSnapshot[] } | { wait: string } | undefined {
  const r = snap.replicas.find((x) => x.id === replicaId);
  const w = r && snap.workloads.get(r.workloadId);
  const worker = r && snap.workers.find((x) => x.id === r.workerId);
  if (!r || !w || !worker || r.desired !== "deep_sleep") return undefined;
  if (freeingRam(snap, worker, r.id)) return { wait: "waiting for host RAM being freed to read its weights back" };
  const need = sleepRamMiB(w, gpusOf(worker, r));
  const free = worker.sleepRamMiB - ramHeld(snap, worker, r.id);
  if (need <= free) return undefined;
  const stop = sleepersToStop(snap, worker, w, r.id, free, need, lastBusy);
  return stop ? { stop } : undefined;
}
