import { asc, eq } from "drizzle-orm";
import type { Db } from "../db";
import { workers } from "../db/schema";
import { flagValue, splitCommand } from "../../agent/command";
import type { GpuInfo } from "../../agent/protocol";
import { listAllWorkloads, type Workload } from "../workloads/service";
import type { Fleet } from "../workers/fleet";
import { createAssignment, listAssignmentsOfWorker, moveAssignment, setAssignmentDesired, workerView, workloadNeed, type AssignmentView } from "../workers/service";
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
 * The GPU memory (MiB) one replica of a workload takes on each of its GPUs: the model's estimate
 * split over them when the store knows the model, else vLLM's and SGLang's preallocated share of
 * the GPU, else nothing known (0: it is started without a room check).
 */
export function replicaNeedMiB(db: Db, w: Workload, gpu: GpuInfo, gpuCount: number): number {
  const share = gpuShare(w);
  if (share !== undefined) return Math.ceil(gpu.memory_total_mib * share);
  const need = workloadNeed(db, w);
  return need ? Math.ceil(need.bytes / gpuCount / MiB) : 0;
}

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

  private workloadsById(): Map<string, Workload> {
    return new Map(listAllWorkloads(this.db).map((w) => [w.id, w]));
  }

  /** Free MiB per GPU index on a worker, counting replicas starting there as already using theirs. */
  freeMiB(worker: WorkerRow, byId = this.workloadsById()): Map<number, number> {
    const gpus = JSON.parse(worker.gpus) as GpuInfo[];
    const probedAt = Date.parse((JSON.parse(worker.telemetry) as { probed_at?: string }).probed_at ?? "") || 0;
    const free = new Map(gpus.map((g) => [g.index, g.memory_total_mib - g.memory_used_mib]));
    for (const a of listAssignmentsOfWorker(this.db, worker.id)) {
      const w = byId.get(a.workload_id);
      if (!w || a.desired !== "run" || (a.state === "ready" && Date.parse(a.updated_at) < probedAt)) continue;
      for (const i of a.gpu_indices) {
        const g = gpus.find((x) => x.index === i);
        if (g) free.set(i, (free.get(i) ?? 0) - replicaNeedMiB(this.db, w, g, a.gpu_indices.length));
      }
    }
    return free;
  }

  /** How much memory each of `gpuIdx` on `worker` lacks for a replica of `w` now (empty: room). */
  private deficit(w: Workload, worker: WorkerRow, gpuIdx: number[], byId: Map<string, Workload>): Map<number, number> {
    const gpus = JSON.parse(worker.gpus) as GpuInfo[];
    const free = this.freeMiB(worker, byId);
    const missing = new Map<number, number>();
    for (const i of gpuIdx) {
      const g = gpus.find((x) => x.index === i);
      if (!g) continue;
      const need = replicaNeedMiB(this.db, w, g, gpuIdx.length);
      if (need > (free.get(i) ?? 0)) missing.set(i, need - (free.get(i) ?? 0));
    }
    return missing;
  }

  /** Where an automatic replica could go: its own GPUs first, then each other GPU (set) of a candidate worker. */
  private placements(w: Workload, a: AssignmentView, own: WorkerRow): Placement[] {
    const count = a.gpu_indices.length || 1;
    const out: Placement[] = [{ worker: own, gpus: a.gpu_indices }];
    if (!a.auto) return out;
    for (const worker of this.candidates(w)) {
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
  private startOne(w: Workload, a: AssignmentView, reason: string, byId: Map<string, Workload>, lastBusy: (id: string) => number): string {
    const own = this.db.select().from(workers).where(eq(workers.id, a.worker_id)).get();
    if (!own) return "";
    const options = this.placements(w, a, own);
    const place = (p: Placement) => {
      if (p.worker.id !== a.worker_id || p.gpus.join() !== a.gpu_indices.join()) moveAssignment(this.db, a.id, p.worker.id, p.gpus);
    };
    for (const p of options) {
      if (this.deficit(w, p.worker, p.gpus, byId).size > 0) continue;
      place(p);
      setAssignmentDesired(this.db, a.id, "run", `starting: ${reason}`);
      return `started replica ${a.id} on ${p.worker.name} (GPU ${p.gpus.join(", ") || "none"})`;
    }
    if (options.some((p) => this.freeing(p.worker, w.id))) {
      setAssignmentDesired(this.db, a.id, "idle", "waiting for GPU memory being freed", "pending");
      return "";
    }
    for (const p of options) {
      const missing = this.deficit(w, p.worker, p.gpus, byId);
      const plan = this.evictionPlan(w, p.worker, missing, byId, lastBusy);
      if (!plan.covers) continue;
      place(p);
      for (const x of plan.rows) setAssignmentDesired(this.db, x.id, "idle", `swapped out for ${w.project_slug}/${w.slug}`);
      const short = [...missing].map(([i, m]) => `GPU ${i} lacks ${gib(m * MiB)}`).join(", ");
      setAssignmentDesired(this.db, a.id, "idle", `waiting for GPU memory (${short}): swapping out ${plan.names.join(", ")}`, "pending");
      return `swapping out ${plan.names.join(", ")} for replica ${a.id}`;
    }
    const first = this.deficit(w, own, a.gpu_indices, byId);
    const short = [...first].map(([i, m]) => `GPU ${i} lacks ${gib(m * MiB)}`).join(", ");
    setAssignmentDesired(this.db, a.id, "idle", `waiting for GPU memory (${short}); no idle replica can be swapped out`, "pending");
    return "";
  }

  /**
   * Starts up to `count` more replicas of `w`: idle ones first (see `startOne`), then new ones on a
   * worker with room. Returns what it did.
   */
  startMore(w: Workload, rows: AssignmentView[], count: number, reason: string, lastBusy: (id: string) => number): string {
    const byId = this.workloadsById();
    const done: string[] = [];
    for (const a of rows.filter((x) => x.desired === "idle").slice(0, count)) {
      const did = this.startOne(w, a, reason, byId, lastBusy);
      if (did) done.push(did);
      count--;
    }
    // Replicas placed by hand replace automatic ones: more are not added beside them.
    for (; count > 0 && !rows.some((a) => !a.auto); count--) {
      const worker = this.placeNew(w);
      if (!worker) break;
      const a = createAssignment(this.db, w, { worker_id: worker.id, gpus: 1 }, true);
      setAssignmentDesired(this.db, a.id, "idle", "placed", "pending");
      done.push(`placed replica ${a.id} on ${worker.name}`, this.startOne(w, { ...a, desired: "idle" }, reason, this.workloadsById(), lastBusy));
    }
    return done.filter(Boolean).join("; ");
  }

  /** Online workers a workload could run on: those with GPUs for GPU backends, any otherwise. */
  private candidates(w: Workload): WorkerRow[] {
    const all = this.db.select().from(workers).orderBy(asc(workers.createdAt)).all().filter((x) => workerView(x).state === "online");
    return ["vllm", "vllm-omni", "sglang"].includes(w.backend) ? all.filter((x) => (JSON.parse(x.gpus) as GpuInfo[]).length > 0) : all;
  }

  /** A worker for another replica: online, a GPU for GPU backends (the local worker otherwise). */
  private placeNew(w: Workload): WorkerRow | undefined {
    const candidates = this.candidates(w);
    const byId = this.workloadsById();
    const withRoom = candidates.find((x) => {
      const free = this.freeMiB(x, byId);
      return (JSON.parse(x.gpus) as GpuInfo[]).some((g) => replicaNeedMiB(this.db, w, g, 1) <= (free.get(g.index) ?? 0));
    });
    return withRoom ?? candidates[0];
  }

  /**
   * Which replicas of other workloads on `worker` to swap out to cover the missing memory: least
   * recently used first, only of workloads whose policy allows zero replicas and with nothing in
   * flight or queued — never a `fixed` one. `covers` says whether they would be enough.
   */
  private evictionPlan(w: Workload, worker: WorkerRow, missing: Map<number, number>, byId: Map<string, Workload>, lastBusy: (id: string) => number): { rows: AssignmentView[]; names: string[]; covers: boolean } {
    const gpus = JSON.parse(worker.gpus) as GpuInfo[];
    const candidates = listAssignmentsOfWorker(this.db, worker.id)
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
        if (g && left.has(i)) left.set(i, left.get(i)! - replicaNeedMiB(this.db, o, g, a.gpu_indices.length));
      }
      rows.push(a);
    }
    return { rows, names: rows.map((a) => `${byId.get(a.workload_id)!.project_slug}/${byId.get(a.workload_id)!.slug}`), covers: [...left.values()].every((m) => m <= 0) };
  }

  /**
   * Whether replicas of other workloads on the worker are stopping, or stopped after its last
   * telemetry: their memory is not free in the numbers yet, so swapping out more would be too many.
   */
  private freeing(worker: WorkerRow, exceptWorkload: string): boolean {
    const probedAt = Date.parse((JSON.parse(worker.telemetry) as { probed_at?: string }).probed_at ?? "") || 0;
    return listAssignmentsOfWorker(this.db, worker.id).some((a) => a.workload_id !== exceptWorkload && a.desired === "idle" && (a.state !== "idle" || Date.parse(a.updated_at) >= probedAt) && a.state !== "pending");
  }
}
