/**
 * The one reader of placement's snapshot: workers (their GPUs as last reported, online or not),
 * every assignment, and each workload's need, from the store. src/placement is pure functions over
 * it; `Fleet` (placing.ts), the scaler and the assignment routes load here, ask there, and write.
 */
import { asc } from "drizzle-orm";
import type { Db } from "../db";
import { assignments, workers } from "../db/schema";
import { estimate, gib, type FreeGpu } from "../models/fit";
import { modelOfWorkload } from "../models/service";
import { listAllWorkloads, type Workload } from "../workloads/service";
import { isOnline } from "./online";
import type { GpuInfo } from "../../agent/protocol";
import {
  freeMemory,
  type Desired,
  type ReplicaSnapshot,
  type Snapshot,
  type WorkerSnapshot,
} from "../placement/snapshot";
import { workloadSnapshot } from "../placement/workload";

/** The memory a workload's model needs with its command's context, when the store knows the model. */
export async function workloadNeed(
  db: Db,
  w: Workload,
): Promise<{ bytes: number; text: string; weightsBytes: number } | undefined> {
  const m = await modelOfWorkload(db, w);
  if (!m) return undefined;
  const e = estimate(m.info, { context: m.context });
  return {
    bytes: e.total_bytes,
    weightsBytes: e.weights_bytes,
    text: `${m.model} needs ~${gib(e.total_bytes)} (weights ${gib(e.weights_bytes)} + KV cache ${gib(e.kv_bytes)} for ${e.context} tokens + overhead ${gib(e.overhead_bytes)})`,
  };
}

/** A worker row as placement sees it, online or not at `now`. */
export function workerSnapshot(row: typeof workers.$inferSelect, now: number): WorkerSnapshot {
  const telemetry = JSON.parse(row.telemetry) as {
    probed_at?: string;
    ram_free_bytes?: number;
    sleep_ram_mib?: number;
  };
  return {
    id: row.id,
    name: row.name,
    kind: row.kind,
    online: isOnline(row.lastSeenAt, now),
    clusterAddress: row.clusterAddress,
    gpus: (JSON.parse(row.gpus) as GpuInfo[]).map((g) => ({
      index: g.index,
      uuid: g.uuid,
      name: g.name,
      totalMiB: g.memory_total_mib,
      usedMiB: g.memory_used_mib,
    })),
    ramFreeBytes: telemetry.ram_free_bytes ?? row.ramBytes,
    sleepRamMiB: telemetry.sleep_ram_mib ?? Math.floor(row.ramBytes / 2 / 1048576),
    probedAt: Date.parse(telemetry.probed_at ?? "") || 0,
  };
}

/** An assignment row as placement sees it. */
export function replicaSnapshot(a: typeof assignments.$inferSelect): ReplicaSnapshot {
  return {
    id: a.id,
    workloadId: a.workloadId,
    workerId: a.workerId,
    gpus: a.gpus,
    gpuIndices: JSON.parse(a.gpuIndices),
    desired: a.desired,
    state: a.state,
    auto: a.auto,
    groupId: a.groupId,
    nodeRank: a.nodeRank,
    updatedAt: Date.parse(a.updatedAt),
  };
}

/** An assignment as the admin API shows it (one just written), as placement sees it. */
export function replicaOfView(a: {
  id: string;
  workload_id: string;
  worker_id: string;
  gpus: number;
  gpu_indices: number[];
  desired: Desired;
  state: string;
  auto: boolean;
  group_id: string | null;
  node_rank: number;
  updated_at: string;
}): ReplicaSnapshot {
  return {
    id: a.id,
    workloadId: a.workload_id,
    workerId: a.worker_id,
    gpus: a.gpus,
    gpuIndices: a.gpu_indices,
    desired: a.desired,
    state: a.state,
    auto: a.auto,
    groupId: a.group_id,
    nodeRank: a.node_rank,
    updatedAt: Date.parse(a.updated_at),
  };
}

/** Reads the snapshot for one decision (or one pass of decisions); `workloads` when the caller has just listed them. */
export async function loadSnapshot(db: Db, workloads?: Workload[]): Promise<Snapshot> {
  const all = workloads ?? (await listAllWorkloads(db));
  const byId = new Map(
    await Promise.all(all.map(async (w) => [w.id, workloadSnapshot(w, await workloadNeed(db, w))] as const)),
  );
  const rows = await db.select().from(workers).orderBy(asc(workers.createdAt));
  const now = Date.now();
  const placed = await db.select().from(assignments).orderBy(asc(assignments.createdAt));
  return { workers: rows.map((w) => workerSnapshot(w, now)), replicas: placed.map(replicaSnapshot), workloads: byId };
}

/** Every worker now, with the free memory of its GPUs by worker id (placement's `freeMemory` over a fresh snapshot). */
export async function freeMemoryNow(db: Db): Promise<{ workers: WorkerSnapshot[]; free: Map<string, FreeGpu[]> }> {
  const snap = await loadSnapshot(db);
  return { workers: snap.workers, free: freeMemory(snap) };
}
