import type { Db } from "../db";
import { fitOnGpus, gib } from "../models/fit";
import { initialDesired } from "../scaling/decide";
import { replicaRoom } from "../limits/project";
import type { GpuInfo } from "../../agent/protocol";
import { listAllWorkloads, type Workload } from "../workloads/service";
import { createAssignment, deleteAssignment, freeGpus, GPU_BACKENDS, listAllAssignments, setAssignmentDesired, workerRows, workerView, workloadNeed, type AssignmentView } from "./service";
import { groupStands, gpusPerMember, placeGroupOf, tensorParallel } from "./groups";

/** A worker row as the store holds it. */
type WorkerRow = Awaited<ReturnType<typeof workerRows>>[number];

/** Which worker can host a workload, or why none can. */
async function chooseWorker(db: Db, w: Workload): Promise<{ worker?: WorkerRow; why?: string }> {
  const all = await workerRows(db);
  const online = all.filter((x) => workerView(x).state === "online");
  if (w.worker_id) {
    const pinned = all.find((x) => x.id === w.worker_id || x.name === w.worker_id);
    return pinned ? { worker: pinned } : { why: `the pinned worker "${w.worker_id}" does not exist` };
  }
  if (w.gpu_resource_id) {
    const owner = all.find((x) => (JSON.parse(x.gpus) as GpuInfo[]).some((g) => g.uuid === w.gpu_resource_id));
    return owner ? { worker: owner } : { why: `no worker has the pinned GPU "${w.gpu_resource_id}"` };
  }
  const withGpu = online.filter((x) => JSON.parse(x.gpus).length > 0);
  if (GPU_BACKENDS.has(w.backend)) {
    if (!withGpu[0]) return { why: `no online worker has a GPU, which backend "${w.backend}" needs` };
    const need = await workloadNeed(db, w);
    if (!need) return { worker: withGpu[0] };
    const fitting = withGpu.find((x) => fitOnGpus(need.bytes, freeGpus(x), defaultGpus(w, x)).fits);
    if (fitting) return { worker: fitting };
    const best = withGpu.flatMap((x) => freeGpus(x).map((g) => ({ x, g }))).sort((a, b) => b.g.free_mib - a.g.free_mib)[0];
    return { why: `${need.text}; the most free GPU memory is ${gib(best.g.free_mib * 1048576)} on GPU ${best.g.index} of "${best.x.name}"` };
  }
  const local = online.find((x) => x.kind === "local");
  return local ?? online[0] ? { worker: local ?? online[0] } : { why: "no worker is online" };
}

/**
 * Gives every workload without assignments one on a worker that can host it (honouring
 * `worker_id` / `gpu_resource_id` pins), moves automatic ones whose pin changed, and drops the
 * automatic one once the user has placed the workload by hand. A workload spanning machines gets
 * a whole group (placed again, as a whole, when a member's worker is lost or the workload changed).
 * Returns, per workload that could not be placed, the reason.
 */
export async function autoAssign(db: Db): Promise<Map<string, string>> {
  const unplaced = new Map<string, string>();
  const byWorkload = new Map<string, AssignmentView[]>();
  for (const a of await listAllAssignments(db)) byWorkload.set(a.workload_id, [...(byWorkload.get(a.workload_id) ?? []), a]);
  const rows = await workerRows(db);
  const ownsGpu = (workerId: string, uuid: string) => (JSON.parse(rows.find((x) => x.id === workerId)?.gpus ?? "[]") as GpuInfo[]).some((g) => g.uuid === uuid);
  // A pin names a worker by id or by name.
  const pinnedTo = (workerId: string, pin: string) => workerId === pin || rows.find((x) => x.id === workerId)?.name === pin;
  for (const w of await listAllWorkloads(db)) {
    let current = byWorkload.get(w.id) ?? [];
    if (w.nodes > 1 || current.some((a) => a.group_id)) {
      const why = await keepGroup(db, w, current, rows);
      if (why) unplaced.set(w.id, why);
      continue;
    }
    const manual = current.some((a) => !a.auto);
    const stale = current.filter((a) => a.auto && (manual || (w.worker_id && !pinnedTo(a.worker_id, w.worker_id)) || (!w.worker_id && w.gpu_resource_id && !ownsGpu(a.worker_id, w.gpu_resource_id))));
    for (const a of stale) await deleteAssignment(db, a.id);
    current = current.filter((a) => !stale.includes(a));
    if (current.length > 0) continue;
    const { worker, why } = await chooseWorker(db, w);
    if (!worker) {
      unplaced.set(w.id, why!);
      continue;
    }
    const a = await createAssignment(db, w, { worker_id: worker.id, gpus: defaultGpus(w, worker) }, true);
    await startOrHold(db, w, [a.id]);
  }
  return unplaced;
}

/**
 * Keeps a workload's group standing: a group that no longer fits the workload (nodes changed, a
 * member's worker offline or gone, the pin moved) is removed whole and placed anew. Returns why
 * no group could be placed, if none stands.
 */
async function keepGroup(db: Db, w: Workload, current: AssignmentView[], rows: WorkerRow[]): Promise<string | undefined> {
  if (current.length > 0 && groupStands(w, current, rows)) return undefined;
  for (const a of current) await deleteAssignment(db, a.id);
  if (w.nodes <= 1) return undefined; // back to one machine: placed as a single replica on the next pass
  const placed = await placeGroupOf(db, w, gpusPerMember(w));
  if ("why" in placed) return placed.why;
  await startOrHold(db, w, placed.ids);
  return undefined;
}

/** Idles new replicas (every member of a group alike) that their schedule or the project's replica cap keeps from starting now. */
async function startOrHold(db: Db, w: Workload, ids: string[]): Promise<void> {
  const start = initialDesired(w, Date.now());
  const cap = start.desired === "run" ? await replicaRoom(db, w.project_id) : null;
  const why = start.desired === "idle" ? start.reason : cap && cap.room < 0 ? `not started: ${cap.why}` : undefined;
  if (why) for (const id of ids) await setAssignmentDesired(db, id, "idle", why);
}

/** GPUs for an automatic assignment: an explicit tensor-parallel size in the command, else 1. */
function defaultGpus(w: Workload, worker: WorkerRow): number {
  const want = tensorParallel(w) ?? 1;
  const have = (JSON.parse(worker.gpus) as GpuInfo[]).length;
  return have > 0 ? Math.min(want, have) : 1;
}
