import type { Db } from "../db";
import type { workers } from "../db/schema";
import { flagValue, splitCommand } from "../../agent/command";
import type { GpuInfo } from "../../agent/protocol";
import { listAllWorkloads, type Workload } from "../workloads/service";
import type { Fleet } from "../workers/fleet";
import { createAssignment, listAllAssignments, moveAssignment, setAssignmentDesired, workerRows, workerView, workloadNeed, type AssignmentView } from "../workers/service";
import { gib } from "../models/fit";

type WorkerRow = typeof workers.$inferSelect;

/** Where a replica could run: a worker and GPU indices on it. */
interface Placement {
  worker: WorkerRow;
  gpus: number[];
}

const MiB = 1048576;

/** The share of each GPU a vLLM or SGLang runtime takes for itself whatever the model (their defaults). */
function gpuShare(w: Pick<Workload, "backend" | "config">): number | undefined {
  let words: string[] = [];
  try {
    words = splitCommand(String(w.config.command ?? ""));
  } catch {}
  if (w.backend === "vllm" || w.backend === "vllm-omni") return Number(flagValue(words, ["--gpu-memory-utilization"]) ?? 0.9) || 0.9;
  if (w.backend === "sglang") return Number(flagValue(words, ["--mem-fraction-static"]) ?? 0.88) || 0.88;
  return undefined;
}

/**
 * What Room decides from, read once per decision: workloads, workers, every assignment, and the
 * memory each workload's model needs when the store knows it. Writes made while deciding update it.
 */
interface Snapshot {
  byId: Map<string, Workload>;
  workers: WorkerRow[];
  assignments: AssignmentView[];
  needBytes: Map<string, number | undefined>;
}

/** Reads a snapshot of the fleet for one decision. */
async function loadSnapshot(db: Db): Promise<Snapshot> {
  const workloads = await listAllWorkloads(db);
  const needBytes = new Map<string, number | undefined>();
  for (const w of workloads) if (gpuShare(w) === undefined) needBytes.set(w.id, (await workloadNeed(db, w))?.bytes);
  return { byId: new Map(workloads.map((w) => [w.id, w])), workers: await workerRows(db), assignments: await listAllAssignments(db), needBytes };
}

/**
 * The GPU memory (MiB) one replica of a workload takes on each of its GPUs: the model's estimate
 * split over them when the store knows the model, else vLLM's and SGLang's preallocated share of
 * the GPU, else nothing known (0: it is started without a room check).
 */
export function replicaNeedMiB(needBytes: number | undefined, w: Workload, gpu: GpuInfo, gpuCount: number): number {
  const share = gpuShare(w);
  if (share !== undefined) return Math.ceil(gpu.memory_total_mib * share);
  return needBytes ? Math.ceil(needBytes / gpuCount / MiB) : 0;
}

const needOf = (snap: Snapshot, w: Workload, gpu: GpuInfo, gpuCount: number) => replicaNeedMiB(snap.needBytes.get(w.id), w, gpu, gpuCount);

/**
 * Room on GPUs for starting replicas: free memory as the worker last reported it, minus what
 * replicas told to run but not yet seen in that report will take; and the swapping out of least
 * recently used idle replicas (of workloads whose policy allows zero) when there is not enough.
 */
export class Room {
  constructor(
    private db: Db,
    private fleet: Fleet,
  ) {}

  /** Free MiB per GPU index on a worker, counting replicas starting there as already using theirs. */
  private freeMiB(worker: WorkerRow, snap: Snapshot): Map<number, number> {
    const gpus = JSON.parse(worker.gpus) as GpuInfo[];
    const probedAt = Date.parse((JSON.parse(worker.telemetry) as { probed_at?: string }).probed_at ?? "") || 0;
    const free = new Map(gpus.map((g) => [g.index, g.memory_total_mib - g.memory_used_mib]));
    for (const a of snap.assignments.filter((x) => x.worker_id === worker.id)) {
      const w = snap.byId.get(a.workload_id);
      if (!w || a.desired !== "run" || (a.state === "ready" && Date.parse(a.updated_at) < probedAt)) continue;
      for (const i of a.gpu_indices) {
        const g = gpus.find((x) => x.index === i);
        if (g) free.set(i, (free.get(i) ?? 0) - needOf(snap, w, g, a.gpu_indices.length));
      }
    }
    return free;
  }

  /** How much memory each of `gpuIdx` on `worker` lacks for a replica of `w` now (empty: room). */
  private deficit(w: Workload, worker: WorkerRow, gpuIdx: number[], snap: Snapshot): Map<number, number> {
    const gpus = JSON.parse(worker.gpus) as GpuInfo[];
    const free = this.freeMiB(worker, snap);
    const missing = new Map<number, number>();
    for (const i of gpuIdx) {
      const g = gpus.find((x) => x.index === i);
      if (!g) continue;
      const need = needOf(snap, w, g, gpuIdx.length);
      if (need > (free.get(i) ?? 0)) missing.set(i, need - (free.get(i) ?? 0));
    }
    return missing;
  }

  /** Where an automatic replica could go: its own GPUs first, then each other GPU (set) of a candidate worker. */
  private placements(w: Workload, a: AssignmentView, own: WorkerRow, snap: Snapshot): Placement[] {
    const count = a.gpu_indices.length || 1;
    const out: Placement[] = [{ worker: own, gpus: a.gpu_indices }];
    if (!a.auto) return out;
    for (const worker of this.candidates(w, snap)) {
      const gpus = (JSON.parse(worker.gpus) as GpuInfo[]).map((g) => g.index);
      const sets = count === 1 ? gpus.map((i) => [i]) : gpus.length >= count ? [gpus.slice(0, count)] : [];
      for (const set of sets) if (!(worker.id === own.id && set.join() === a.gpu_indices.join())) out.push({ worker, gpus: set });
    }
    return out;
  }

  /**
   * Starts one idle replica if it can: where there is room now (its own GPUs, else elsewhere), else
   * where swapping out idle replicas of other workloads makes room (it waits there for the memory).
   */
  private async startOne(w: Workload, a: AssignmentView, reason: string, snap: Snapshot, lastBusy: (id: string) => number): Promise<string> {
    const own = snap.workers.find((x) => x.id === a.worker_id);
    if (!own) return "";
    const options = this.placements(w, a, own, snap);
    const place = async (p: Placement) => {
      if (p.worker.id !== a.worker_id || p.gpus.join() !== a.gpu_indices.join()) await moveAssignment(this.db, a.id, p.worker.id, p.gpus);
      this.noteIn(snap, a.id, { worker_id: p.worker.id, gpu_indices: p.gpus });
    };
    const desire = async (id: string, desired: "run" | "idle", why: string, state?: string) => {
      await setAssignmentDesired(this.db, id, desired, why, state);
      this.noteIn(snap, id, { desired, reason: why, ...(state ? { state: state as AssignmentView["state"] } : {}) });
    };
    for (const p of options) {
      if (this.deficit(w, p.worker, p.gpus, snap).size > 0) continue;
      await place(p);
      await desire(a.id, "run", `starting: ${reason}`);
      return `started replica ${a.id} on ${p.worker.name} (GPU ${p.gpus.join(", ") || "none"})`;
    }
    if (options.some((p) => this.freeing(p.worker, w.id, snap))) {
      await desire(a.id, "idle", "waiting for GPU memory being freed", "pending");
      return "";
    }
    for (const p of options) {
      const missing = this.deficit(w, p.worker, p.gpus, snap);
      const plan = this.evictionPlan(w, p.worker, missing, snap, lastBusy);
      if (!plan.covers) continue;
      await place(p);
      for (const x of plan.rows) await desire(x.id, "idle", `swapped out for ${w.project_slug}/${w.slug}`);
      const short = [...missing].map(([i, m]) => `GPU ${i} lacks ${gib(m * MiB)}`).join(", ");
      await desire(a.id, "idle", `waiting for GPU memory (${short}): swapping out ${plan.names.join(", ")}`, "pending");
      return `swapping out ${plan.names.join(", ")} for replica ${a.id}`;
    }
    const lacking = this.deficit(w, own, a.gpu_indices, snap);
    const short = [...lacking].map(([i, m]) => `GPU ${i} lacks ${gib(m * MiB)}`).join(", ");
    await desire(a.id, "idle", `waiting for GPU memory (${short}); no idle replica can be swapped out`, "pending");
    return "";
  }

  /** Keeps the snapshot true to a write just made (later decisions of the same pass see it). */
  private noteIn(snap: Snapshot, id: string, change: Partial<AssignmentView>): void {
    const i = snap.assignments.findIndex((x) => x.id === id);
    if (i >= 0) snap.assignments[i] = { ...snap.assignments[i], ...change };
  }

  /**
   * Starts up to `count` more replicas of `w`: idle ones first (see `startOne`), then new ones on a
   * worker with room. Returns what it did.
   */
  async startMore(w: Workload, rows: AssignmentView[], count: number, reason: string, lastBusy: (id: string) => number): Promise<string> {
    const snap = await loadSnapshot(this.db);
    const done: string[] = [];
    for (const a of rows.filter((x) => x.desired === "idle").slice(0, count)) {
      const did = await this.startOne(w, snap.assignments.find((x) => x.id === a.id) ?? a, reason, snap, lastBusy);
      if (did) done.push(did);
      count--;
    }
    // Replicas placed by hand replace automatic ones: more are not added beside them.
    for (; count > 0 && !rows.some((a) => !a.auto); count--) {
      const worker = this.placeNew(w, snap);
      if (!worker) break;
      const a = await createAssignment(this.db, w, { worker_id: worker.id, gpus: 1 }, true);
      await setAssignmentDesired(this.db, a.id, "idle", "placed", "pending");
      const placed: AssignmentView = { ...a, desired: "idle", state: "pending" };
      snap.assignments.push(placed);
      done.push(`placed replica ${a.id} on ${worker.name}`, await this.startOne(w, placed, reason, snap, lastBusy));
    }
    return done.filter(Boolean).join("; ");
  }

  /** Online workers a workload could run on: those with GPUs for GPU backends, any otherwise. */
  private candidates(w: Workload, snap: Snapshot): WorkerRow[] {
    const all = snap.workers.filter((x) => workerView(x).state === "online");
    return ["vllm", "vllm-omni", "sglang"].includes(w.backend) ? all.filter((x) => (JSON.parse(x.gpus) as GpuInfo[]).length > 0) : all;
  }

  /** A worker for another replica: online, a GPU for GPU backends (the local worker otherwise). */
  private placeNew(w: Workload, snap: Snapshot): WorkerRow | undefined {
    const candidates = this.candidates(w, snap);
    const withRoom = candidates.find((x) => {
      const free = this.freeMiB(x, snap);
      return (JSON.parse(x.gpus) as GpuInfo[]).some((g) => needOf(snap, w, g, 1) <= (free.get(g.index) ?? 0));
    });
    return withRoom ?? candidates[0];
  }

  /**
   * Which replicas of other workloads on `worker` to swap out to cover the missing memory: least
   * recently used first, only of workloads whose policy allows zero replicas and with nothing in
   * flight or queued — never a `fixed` one. `covers` says whether they would be enough.
   */
  private evictionPlan(w: Workload, worker: WorkerRow, missing: Map<number, number>, snap: Snapshot, lastBusy: (id: string) => number): { rows: AssignmentView[]; names: string[]; covers: boolean } {
    const gpus = JSON.parse(worker.gpus) as GpuInfo[];
    const byId = snap.byId;
    const candidates = snap.assignments
      .filter((a) => a.worker_id === worker.id)
      .filter((a) => a.desired === "run" && a.workload_id !== w.id && a.gpu_indices.some((i) => missing.has(i)))
      .filter((a) => {
        const o = byId.get(a.workload_id);
        const mayBeZero = o && !o.paused && o.execution_policy === "autoscaling" && ((o.execution_params as { min_replicas?: number }).min_replicas ?? 0) === 0;
        const busy = this.fleet.dispatcher.targetsOf(a.workload_id).some((t) => t.id === a.id && t.inFlight > 0) || this.fleet.dispatcher.depth(a.workload_id) > 0;
        return mayBeZero && !busy;
      })
      .sort((x, y) => lastBusy(x.workload_id) - lastBusy(y.workload_id));
    const left = new Map(missing);
    const rows: AssignmentView[] = [];
    for (const a of candidates) {
      if ([...left.values()].every((m) => m <= 0)) break;
      const o = byId.get(a.workload_id)!;
      for (const i of a.gpu_indices) {
        const g = gpus.find((x) => x.index === i);
        if (g && left.has(i)) left.set(i, left.get(i)! - needOf(snap, o, g, a.gpu_indices.length));
      }
      rows.push(a);
    }
    return { rows, names: rows.map((a) => `${byId.get(a.workload_id)!.project_slug}/${byId.get(a.workload_id)!.slug}`), covers: [...left.values()].every((m) => m <= 0) };
  }

  /**
   * Whether replicas of other workloads on the worker are stopping, or stopped after its last
   * telemetry: their memory is not free in the numbers yet, so swapping out more would be too many.
   */
  private freeing(worker: WorkerRow, exceptWorkload: string, snap: Snapshot): boolean {
    const probedAt = Date.parse((JSON.parse(worker.telemetry) as { probed_at?: string }).probed_at ?? "") || 0;
    return snap.assignments.some((a) => a.worker_id === worker.id && a.workload_id !== exceptWorkload && a.desired === "idle" && (a.state !== "idle" || Date.parse(a.updated_at) >= probedAt) && a.state !== "pending");
  }
}
