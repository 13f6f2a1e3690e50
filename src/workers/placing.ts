/**
 * Workload placement as the fleet applies it: reads placement's snapshot once per pass, asks
 * src/placement where each unplaced workload (or multi-node group) goes, and writes the answers —
 * new assignments, stale automatic ones removed — keeping the snapshot in step with each write.
 */
import { engineOf } from "../../agent/engines";
import type { Db } from "../db";
import { initialDesired } from "../execution/decide";
import { replicaRoom } from "../limits/project";
import { listAllWorkloads, type Workload } from "../workloads/service";
import { loadSnapshot, replicaOfView, replicaSnapshot } from "./snapshot";
import { groupStands, placeGroup } from "../placement/group";
import { placeReplica, staleReplicas } from "../placement/replica";
import { note, type ReplicaSnapshot, type Snapshot, type WorkloadSnapshot } from "../placement/snapshot";
import { deleteAssignment, insertAssignment, setAssignmentDesired } from "./service";
import { insertGroup } from "./groups";

/**
 * Gives every workload without assignments one on a worker that can host it (honouring
 * `worker_id` / `gpu_resource_id` pins), moves automatic ones whose pin changed, and drops the
 * automatic one once the user has placed the workload by hand. A workload spanning machines gets
 * a whole group (placed again, as a whole, when a member's worker is lost or the workload changed).
 * Returns, per workload that could not be placed, the reason.
 */
export async function autoAssign(db: Db): Promise<Map<string, string>> {
  const unplaced = new Map<string, string>();
  const all = await listAllWorkloads(db);
  const snap = await loadSnapshot(db, all);
  for (const w of all) {
    // An external provider's workload runs nowhere here: the host calls the provider (src/providers).
    if (engineOf(w.backend)?.external) continue;
    const ws = snap.workloads.get(w.id)!;
    const current = snap.replicas.filter((r) => r.workloadId === w.id);
    if (w.nodes > 1 || current.some((r) => r.groupId)) {
      const why = await keepGroup(db, snap, w, ws, current);
      if (why) unplaced.set(w.id, why);
      continue;
    }
    const stale = staleReplicas(snap, ws);
    await drop(db, snap, stale);
    if (current.length > stale.length) continue;
    const placed = placeReplica(snap, ws);
    if ("why" in placed) {
      unplaced.set(w.id, placed.why);
      continue;
    }
    const a = await insertAssignment(db, w, { ...placed, auto: true });
    note(snap, { add: replicaOfView(a) });
    await startOrHold(db, snap, w, [a.id]);
  }
  return unplaced;
}

/** Removes replicas from the store and the snapshot. */
async function drop(db: Db, snap: Snapshot, replicas: ReplicaSnapshot[]): Promise<void> {
  for (const r of replicas) {
    await deleteAssignment(db, r.id);
    note(snap, { remove: r.id });
  }
}

/**
 * Keeps a workload's group standing: a group that no longer fits the workload (nodes changed, a
 * member's worker offline or gone, the pin moved) is removed whole and placed anew. Returns why
 * no group could be placed, if none stands.
 */
async function keepGroup(
  db: Db,
  snap: Snapshot,
  w: Workload,
  ws: WorkloadSnapshot,
  current: ReplicaSnapshot[],
): Promise<string | undefined> {
  if (current.length > 0 && groupStands(snap, ws, current)) return undefined;
  await drop(db, snap, current);
  if (w.nodes <= 1) return undefined; // back to one machine: placed as a single replica on the next pass
  const placed = placeGroup(snap, ws);
  if ("why" in placed) return placed.why;
  const rows = await insertGroup(db, w, ws.gpus, placed.members);
  for (const r of rows) note(snap, { add: replicaSnapshot(r) });
  await startOrHold(
    db,
    snap,
    w,
    rows.map((r) => r.id),
  );
  return undefined;
}

/** Idles new replicas (every member of a group alike) that their schedule or the project's replica cap keeps from starting now. */
async function startOrHold(db: Db, snap: Snapshot, w: Workload, ids: string[]): Promise<void> {
  const start = initialDesired(w, Date.now());
  const cap = start.desired === "run" ? await replicaRoom(db, w.project_id) : null;
  const why = start.desired === "idle" ? start.reason : cap && cap.room < 0 ? `not started: ${cap.why}` : undefined;
  if (!why) return;
  for (const id of ids) {
    note(snap, { set: { id, desired: "idle", state: await setAssignmentDesired(db, id, "idle", why) } });
  }
}
