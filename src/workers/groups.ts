/**
 * Multi-node groups in the store: a workload with `nodes > 1` runs as one group of that many
 * members (assignments sharing a `group_id`, ranked from 0, the leader), placed whole, told about
 * each other, and restarted whole.
 */
import { and, eq, inArray, ne } from "drizzle-orm";
import type { Db } from "../db";
import { assignments } from "../db/schema";
import { newId, nowIso } from "../ids";
import type { GpuInfo, GroupMember } from "../../agent/protocol";
import type { Workload } from "../workloads/service";
import { placeGroup, type WorkerSnapshot } from "./placement";
import { freeGpus, GPU_BACKENDS, workerRows, workerView, workloadNeed, type AssignmentView } from "./service";

type WorkerRow = Awaited<ReturnType<typeof workerRows>>[number];
type AssignmentRow = typeof assignments.$inferSelect;

/** The tensor-parallel size a command sets, if any. */
export const tensorParallel = (w: Workload): number | undefined => {
  const m = /(?:--tensor-parallel-size|-tp|--tp-size|--tp)[= ](\d+)/.exec(String(w.config.command ?? ""));
  return m ? Number(m[1]) : undefined;
};

/**
 * GPUs on each member of a group: vLLM's tensor-parallel size is per machine; SGLang's `--tp` is the
 * whole group's, split over its machines; 1 when the command sets none.
 */
export function gpusPerMember(w: Workload): number {
  const tp = tensorParallel(w) ?? 1;
  return w.backend === "sglang" ? Math.max(1, Math.ceil(tp / w.nodes)) : tp;
}

/** What placement sees of the fleet: every worker with its free GPUs and how many replicas use each. */
export async function fleetSnapshot(db: Db, rows?: WorkerRow[]): Promise<WorkerSnapshot[]> {
  const use = new Map<string, Map<number, number>>();
  for (const a of await db.select({ workerId: assignments.workerId, gpuIndices: assignments.gpuIndices }).from(assignments)) {
    const m = use.get(a.workerId) ?? new Map<number, number>();
    for (const i of JSON.parse(a.gpuIndices) as number[]) m.set(i, (m.get(i) ?? 0) + 1);
    use.set(a.workerId, m);
  }
  return (rows ?? (await workerRows(db))).map((w) => ({
    id: w.id,
    name: w.name,
    online: workerView(w).state === "online",
    clusterAddress: w.clusterAddress,
    gpus: freeGpus(w),
    gpuUuids: (JSON.parse(w.gpus) as GpuInfo[]).map((g) => g.uuid),
    gpuUse: use.get(w.id) ?? new Map(),
  }));
}

/**
 * Whether a placed group still fits its workload: one member per rank of one group, as many as
 * `nodes`, each with the GPU count the command asks for, every worker online with a cluster
 * address, and the leader where a pin says.
 */
export function groupStands(w: Workload, members: AssignmentView[], rows: WorkerRow[]): boolean {
  if (w.nodes <= 1 || members.length !== w.nodes) return false;
  const group = members[0].group_id;
  const ranks = new Set(members.map((a) => a.node_rank));
  if (!group || members.some((a) => a.group_id !== group || !a.auto || a.gpus !== gpusPerMember(w)) || ranks.size !== w.nodes || [...ranks].some((r) => r >= w.nodes)) return false;
  const worker = (id: string) => rows.find((x) => x.id === id);
  if (members.some((a) => { const x = worker(a.worker_id); return !x || !x.clusterAddress || workerView(x).state !== "online"; })) return false;
  const leader = worker(members.find((a) => a.node_rank === 0)!.worker_id)!;
  if (w.worker_id) return leader.id === w.worker_id || leader.name === w.worker_id;
  if (w.gpu_resource_id) return (JSON.parse(leader.gpus) as GpuInfo[]).some((g) => g.uuid === w.gpu_resource_id);
  return true;
}

/** Places a workload's whole group (automatic assignments, rank 0 first), or says why it cannot be. */
export async function placeGroupOf(db: Db, w: Workload, gpusPerNode: number): Promise<{ ids: string[] } | { why: string }> {
  const need = await workloadNeed(db, w);
  const placed = placeGroup(await fleetSnapshot(db), {
    nodes: w.nodes,
    gpusPerNode,
    needsGpu: GPU_BACKENDS.has(w.backend),
    bytes: need?.bytes,
    text: need?.text,
    pinnedWorker: w.worker_id,
    pinnedGpu: w.gpu_resource_id,
  });
  if ("why" in placed) return placed;
  const groupId = newId("grp");
  const now = nowIso();
  const rows: AssignmentRow[] = placed.members.map((m, rank) => ({
    id: newId("asg"),
    workloadId: w.id,
    workerId: m.workerId,
    concurrency: 20,
    concurrencySet: false,
    desired: "run",
    generation: 0,
    groupId,
    nodeRank: rank,
    endpoint: null,
    gpus: gpusPerNode,
    gpuIndices: JSON.stringify(m.gpuIndices),
    auto: true,
    state: "pending",
    reason: rank === 0 ? null : `member ${rank} of ${w.nodes}: the leader serves the requests`,
    createdAt: now,
    updatedAt: now,
  }));
  await db.insert(assignments).values(rows);
  return { ids: rows.map((r) => r.id) };
}

/** Every member of the given groups as each member is told of them, by group id, in rank order. */
export async function groupMembers(db: Db, groupIds: string[]): Promise<Map<string, GroupMember[]>> {
  const out = new Map<string, GroupMember[]>();
  if (groupIds.length === 0) return out;
  const rows = await db.select().from(assignments).where(inArray(assignments.groupId, groupIds));
  const workers = new Map((await workerRows(db)).map((w) => [w.id, w]));
  for (const a of rows.sort((x, y) => x.nodeRank - y.nodeRank)) {
    const w = workers.get(a.workerId);
    const member: GroupMember = { rank: a.nodeRank, worker: w?.name ?? a.workerId, address: w?.clusterAddress ?? "", ready: a.state === "ready", ...(a.endpoint ? { endpoint: a.endpoint } : {}) };
    out.set(a.groupId!, [...(out.get(a.groupId!) ?? []), member]);
  }
  return out;
}

/** `address:port`, with an IPv6 address bracketed. */
export const endpointOf = (address: string, port: number) => `${address.includes(":") ? `[${address}]` : address}:${port}`;

/** Stores the endpoint a member reported (its group listener on its worker's cluster address); true when it changed. */
export async function recordEndpoint(db: Db, a: AssignmentView, address: string | null, port: number | undefined): Promise<boolean> {
  const endpoint = address && port ? endpointOf(address, port) : null;
  if (!endpoint || endpoint === a.endpoint) return false;
  await db.update(assignments).set({ endpoint }).where(eq(assignments.id, a.id));
  return true;
}

/**
 * Starts a group anew: every member gets the next generation (its agent restarts it), `run`, state
 * `pending` and no endpoint (the new leader reports a fresh one). Only from `generation`: two hosts
 * (or a report and the operator) restarting the same group at once restart it once.
 */
export async function restartGroup(db: Db, groupId: string, generation: number, reason: string | null): Promise<boolean> {
  const rows = await db.select({ id: assignments.id }).from(assignments).where(and(eq(assignments.groupId, groupId), eq(assignments.generation, generation)));
  if (rows.length === 0) return false;
  await db.update(assignments).set({ generation: generation + 1, desired: "run", state: "pending", reason, endpoint: null, updatedAt: nowIso() }).where(and(eq(assignments.groupId, groupId), eq(assignments.generation, generation)));
  return true;
}

/** Gives up on a group: every member stops and shows `failed` with the reason, until restarted. */
export async function failGroup(db: Db, groupId: string, reason: string): Promise<void> {
  await db.update(assignments).set({ desired: "idle", state: "failed", reason, updatedAt: nowIso() }).where(eq(assignments.groupId, groupId));
}

/** Shows the same reason on every other member of a group (the member that failed, a restart coming). */
export async function noteGroup(db: Db, groupId: string, reason: string, exceptId: string): Promise<void> {
  await db.update(assignments).set({ reason, updatedAt: nowIso() }).where(and(eq(assignments.groupId, groupId), ne(assignments.id, exceptId)));
}
