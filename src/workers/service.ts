import { and, asc, eq, isNull } from "drizzle-orm";
import type { Db } from "../db";
import { first } from "../db/raw";
import { assignments, workers } from "../db/schema";
import { AppError, conflict, notFound, validation } from "../errors";
import { loadSnapshot } from "./snapshot";
import { placeOn } from "../placement/replica";
import { without, type Desired, type ReplicaSnapshot } from "../placement/snapshot";
import { workloadSnapshot } from "../placement/workload";
import { isOnline } from "./online";
import { newId, nowIso } from "../ids";
import type { GpuInfo, MachineInfo, ReplicaState } from "../../agent/protocol";
import { getWorkloadById, type Workload } from "../workloads/service";
import { audit, diffOf } from "../audit/service";

type WorkerRow = typeof workers.$inferSelect;
type AssignmentRow = typeof assignments.$inferSelect;

/** An assignment as the admin API shows it. */
export interface AssignmentView {
  id: string;
  workload_id: string;
  worker_id: string;
  concurrency: number;
  gpus: number;
  gpu_indices: number[];
  auto: boolean;
  state: ReplicaState | "idle";
  reason?: string;
  /** `run`, `idle`, `sleep` or `deep_sleep` (the scaler's wish; agents run `run` replicas and keep sleeping ones asleep). */
  desired: Desired;
  /** Whether `concurrency` was set by hand (else the runtime's own slots are used once known). */
  concurrency_set: boolean;
  generation: number;
  /** The multi-node group this replica is a member of (null: a single-node replica). */
  group_id: string | null;
  /** Its rank in the group: 0 leads and alone receives requests. */
  node_rank: number;
  /** `address:port` of the member's group listener, once reported. */
  endpoint: string | null;
  created_at: string;
  updated_at: string;
}

/** A worker as the admin API shows it. */
export interface WorkerView {
  id: string;
  name: string;
  kind: "local" | "remote";
  hostname: string | null;
  version: string | null;
  state: "online" | "offline";
  cpu_cores: number;
  ram_bytes: number;
  gpus: GpuInfo[];
  telemetry: Partial<MachineInfo>;
  last_seen_at: string | null;
  created_at: string;
  /** Projects (ids) whose tenants may pin workloads to this worker, or `"*"` for every project. */
  open_to: string[] | "*";
  /** A local worker's host (the machine an `inferd serve` runs on); null for a remote agent. */
  host_id: string | null;
  /** Where other members of a multi-node group reach it (`--cluster-address`); null: it hosts none. */
  cluster_address: string | null;
}

export { setOfflineAfter } from "./online";

const assignmentView = (a: AssignmentRow): AssignmentView => ({
  id: a.id,
  workload_id: a.workloadId,
  worker_id: a.workerId,
  concurrency: a.concurrency,
  gpus: a.gpus,
  gpu_indices: JSON.parse(a.gpuIndices),
  auto: a.auto,
  state: a.state as ReplicaState,
  ...(a.reason ? { reason: a.reason } : {}),
  desired: a.desired,
  concurrency_set: a.concurrencySet,
  generation: a.generation,
  group_id: a.groupId,
  node_rank: a.nodeRank,
  endpoint: a.endpoint,
  created_at: a.createdAt,
  updated_at: a.updatedAt,
});

/** The admin view of a worker row. */
export function workerView(w: WorkerRow, now = Date.now()): WorkerView {
  return {
    id: w.id,
    name: w.name,
    kind: w.kind,
    hostname: w.hostname,
    version: w.version,
    state: isOnline(w.lastSeenAt, now) ? "online" : "offline",
    cpu_cores: w.cpuCores,
    ram_bytes: w.ramBytes,
    gpus: JSON.parse(w.gpus),
    telemetry: JSON.parse(w.telemetry),
    last_seen_at: w.lastSeenAt,
    created_at: w.createdAt,
    open_to: JSON.parse(w.openTo),
    host_id: w.hostId,
    cluster_address: w.clusterAddress,
  };
}

/** Sets which projects' tenants may pin workloads to a worker (`"*"`: all). */
export async function setWorkerOpenTo(db: Db, id: string, openTo: string[] | "*"): Promise<WorkerView> {
  const before = workerView(await getWorker(db, id));
  await db
    .update(workers)
    .set({ openTo: JSON.stringify(openTo) })
    .where(eq(workers.id, id));
  const after = workerView(await getWorker(db, id));
  await audit(db, "worker.update", { type: "worker", id, label: after.name }, diffOf(before, after, ["open_to"]));
  return after;
}

/**
 * Refuses (403 `worker_not_allowed`) a tenant's pin — `worker_id` (id or name) or `gpu_resource_id`
 * (a GPU uuid) — unless it names a worker the operator opened to the tenant's project. An unknown
 * worker is refused the same way, so tenants learn nothing about the fleet.
 */
export async function requireOpenWorker(
  db: Db,
  projectId: string,
  pin: { worker_id?: string | null; gpu_resource_id?: string | null },
): Promise<void> {
  const all = await db.select().from(workers);
  const check = (field: string, value: string, w: WorkerRow | undefined) => {
    const open: string[] | "*" = w ? JSON.parse(w.openTo) : [];
    if (open === "*" || open.includes(projectId)) return;
    throw new AppError(
      403,
      "worker_not_allowed",
      `${field}: "${value}" is not a worker open to this project; the operator opens one with PATCH /admin/workers/:id {"open_to": [...]}`,
      {},
      field,
    );
  };
  if (pin.worker_id)
    check(
      "worker_id",
      pin.worker_id,
      all.find((x) => x.id === pin.worker_id || x.name === pin.worker_id),
    );
  if (pin.gpu_resource_id)
    check(
      "gpu_resource_id",
      pin.gpu_resource_id,
      all.find((x) => (JSON.parse(x.gpus) as GpuInfo[]).some((g) => g.uuid === pin.gpu_resource_id)),
    );
}

/**
 * Records this host's machine as a worker (one per host: a cluster has one local worker per host),
 * creating it on first start. A local worker from before hosts were recorded becomes this host's.
 */
export async function upsertLocalWorker(
  db: Db,
  machine: MachineInfo,
  version: string,
  hostId: string | null = null,
): Promise<WorkerRow> {
  const local = (cond: ReturnType<typeof eq>) =>
    first(
      db
        .select()
        .from(workers)
        .where(and(eq(workers.kind, "local"), cond)),
    );
  const mine = hostId ? await local(eq(workers.hostId, hostId)) : await local(isNull(workers.hostId));
  const existing = mine ?? (hostId ? await local(isNull(workers.hostId)) : undefined);
  const id = existing?.id ?? newId("wk");
  if (!existing) {
    // Two hosts on machines of the same name keep two names.
    const taken = await first(db.select({ id: workers.id }).from(workers).where(eq(workers.name, machine.hostname)));
    const name = taken && hostId ? `${machine.hostname}-${hostId.slice(-4)}` : machine.hostname;
    await db
      .insert(workers)
      .values({ id, name, kind: "local", hostname: machine.hostname, createdAt: nowIso(), hostId });
  } else if (hostId && existing.hostId !== hostId) {
    await db.update(workers).set({ hostId }).where(eq(workers.id, id));
  }
  await recordMachine(db, id, machine, version);
  return (await first(db.select().from(workers).where(eq(workers.id, id))))!;
}

/** Stores a heartbeat: the machine's GPUs and telemetry, and that the worker was seen now. */
export async function recordMachine(db: Db, workerId: string, machine: MachineInfo, version?: string): Promise<void> {
  await db
    .update(workers)
    .set({
      hostname: machine.hostname,
      cpuCores: machine.cpu_cores,
      ramBytes: machine.ram_bytes,
      gpus: JSON.stringify(machine.gpus),
      telemetry: JSON.stringify({
        ram_free_bytes: machine.ram_free_bytes,
        load_avg: machine.load_avg,
        probed_at: machine.probed_at,
        ...(machine.sleep_ram_mib !== undefined ? { sleep_ram_mib: machine.sleep_ram_mib } : {}),
      }),
      lastSeenAt: nowIso(),
      clusterAddress: machine.cluster_address ?? null,
      ...(version ? { version } : {}),
    })
    .where(eq(workers.id, workerId));
}

/** Every worker, oldest first. */
export async function listWorkers(db: Db): Promise<WorkerView[]> {
  return (await db.select().from(workers).orderBy(asc(workers.createdAt))).map((w) => workerView(w));
}

/** Every worker row, oldest first. */
export function workerRows(db: Db): Promise<WorkerRow[]> {
  return db.select().from(workers).orderBy(asc(workers.createdAt));
}

/** A worker by id, or 404. */
export async function getWorker(db: Db, id: string): Promise<WorkerRow> {
  const w = await first(db.select().from(workers).where(eq(workers.id, id)));
  if (!w) throw notFound(`worker "${id}"`);
  return w;
}

/** Assignments of a workload. */
export async function listAssignments(db: Db, workloadId: string): Promise<AssignmentView[]> {
  return (
    await db
      .select()
      .from(assignments)
      .where(eq(assignments.workloadId, workloadId))
      .orderBy(asc(assignments.createdAt))
  ).map(assignmentView);
}

/** Every assignment, oldest first. */
export async function listAllAssignments(db: Db): Promise<AssignmentView[]> {
  return (await db.select().from(assignments).orderBy(asc(assignments.createdAt))).map(assignmentView);
}

/** Assignments on a worker. */
export async function listAssignmentsOfWorker(db: Db, workerId: string): Promise<AssignmentView[]> {
  return (
    await db.select().from(assignments).where(eq(assignments.workerId, workerId)).orderBy(asc(assignments.createdAt))
  ).map(assignmentView);
}

/** An assignment by id, or 404. */
export async function getAssignment(db: Db, id: string): Promise<AssignmentView> {
  const a = await first(db.select().from(assignments).where(eq(assignments.id, id)));
  if (!a) throw notFound(`assignment "${id}"`);
  return assignmentView(a);
}

/** Input of a manual assignment. */
export interface AssignmentInput {
  worker_id: string;
  concurrency?: number;
  gpus?: number;
  /** Place it even when the model's estimate does not fit the worker's free GPU memory. */
  force?: boolean;
}

/**
 * Places a workload on a worker with a slot count and a GPU count, GPUs picked by placement. A
 * placement by hand (not `auto`) is refused (409 `does_not_fit`, with the numbers) when the model's
 * estimate does not fit the worker's free GPU memory, unless forced; the workload's automatic
 * replicas, which it replaces, are not counted against it.
 */
export async function createAssignment(
  db: Db,
  workload: Workload,
  input: AssignmentInput,
  auto = false,
): Promise<AssignmentView> {
  if (workload.nodes > 1)
    throw validation(
      "worker_id",
      `this workload spans ${workload.nodes} machines: inferd places its group itself (pin its leader with the workload's worker_id)`,
    );
  const row = await getWorker(db, input.worker_id);
  const snap = await loadSnapshot(db);
  const mine = (r: ReplicaSnapshot) => !auto && r.workloadId === workload.id && r.auto;
  const gpus = input.gpus ?? 1;
  const placed = placeOn(
    without(snap, mine),
    snap.workloads.get(workload.id) ?? workloadSnapshot(workload),
    snap.workers.find((w) => w.id === row.id)!,
    gpus,
    !auto && !input.force,
  );
  if ("why" in placed)
    throw placed.code === "does_not_fit" ? conflict(placed.why, "does_not_fit") : validation("gpus", placed.why);
  const a = await insertAssignment(db, workload, {
    workerId: row.id,
    gpus,
    gpuIndices: placed.gpuIndices,
    concurrency: input.concurrency,
    auto,
  });
  // Placements by hand are audited; automatic ones are the system's own bookkeeping.
  if (!auto)
    await audit(
      db,
      "assignment.create",
      { type: "assignment", id: a.id, label: `${workload.project_slug}/${workload.slug}` },
      {
        workload_id: workload.id,
        worker_id: row.id,
        worker: row.name,
        concurrency: a.concurrency,
        gpus,
        gpu_indices: a.gpu_indices,
        force: !!input.force,
      },
    );
  return a;
}

/** Writes a single-machine replica placement decided elsewhere (`desired` run unless said; slots 20 unless set). */
export async function insertAssignment(
  db: Db,
  workload: Pick<Workload, "id">,
  p: {
    workerId: string;
    gpus: number;
    gpuIndices: number[];
    concurrency?: number;
    auto: boolean;
    desired?: Desired;
    reason?: string;
  },
): Promise<AssignmentView> {
  const now = nowIso();
  const row: AssignmentRow = {
    id: newId("asg"),
    workloadId: workload.id,
    workerId: p.workerId,
    concurrency: p.concurrency ?? 20,
    concurrencySet: p.concurrency !== undefined,
    desired: p.desired ?? "run",
    generation: 0,
    groupId: null,
    nodeRank: 0,
    endpoint: null,
    gpus: p.gpus,
    gpuIndices: JSON.stringify(p.gpuIndices),
    auto: p.auto,
    state: "pending",
    reason: p.reason ?? null,
    createdAt: now,
    updatedAt: now,
  };
  await db.insert(assignments).values(row);
  return assignmentView(row);
}

/** Removes an assignment; its runtime is stopped by the agent's next reconcile. */
export async function deleteAssignment(db: Db, id: string): Promise<AssignmentView> {
  const a = await getAssignment(db, id);
  await db.delete(assignments).where(eq(assignments.id, id));
  return a;
}

/** How the audit log names an assignment: its workload as project/slug. */
async function assignmentLabel(db: Db, workloadId: string): Promise<string> {
  const w = await getWorkloadById(db, workloadId);
  return w ? `${w.project_slug}/${w.slug}` : workloadId;
}

/** Removes a replica placed by hand (the operator's request; audited). */
export async function removeAssignment(db: Db, id: string): Promise<AssignmentView> {
  const a = await deleteAssignment(db, id);
  await audit(
    db,
    "assignment.delete",
    { type: "assignment", id, label: await assignmentLabel(db, a.workload_id) },
    { workload_id: a.workload_id, worker_id: a.worker_id },
  );
  return a;
}

/** Changes how many requests an assignment's replica takes at once (set by hand from now on). */
export async function setAssignmentConcurrency(db: Db, id: string, concurrency: number): Promise<void> {
  const a = await getAssignment(db, id);
  await db
    .update(assignments)
    .set({ concurrency, concurrencySet: true, updatedAt: nowIso() })
    .where(eq(assignments.id, id));
  await audit(
    db,
    "assignment.update",
    { type: "assignment", id, label: await assignmentLabel(db, a.workload_id) },
    { concurrency: { from: a.concurrency, to: concurrency } },
  );
}

/** Replica states in which a runtime may be up (an idled one stays in them until its agent reports it stopped). */
const ACTIVE = ["ready", "starting", "downloading", "installing", "sleeping", "waking"];

/**
 * Tells the agents to run an assignment's replica or to stop it (`idle`: scaled to zero, swapped
 * out, stopped by the operator), with the reason shown. An idled replica whose runtime may be up
 * keeps its state until the agent reports it stopped; `state` overrides the shown state. Returns
 * the state written.
 */
export async function setAssignmentDesired(
  db: Db,
  id: string,
  desired: Desired,
  reason: string,
  state?: string,
): Promise<string> {
  const a = await getAssignment(db, id);
  // A sleeping replica told to run shows `sleeping` until its agent says it wakes; one told to sleep
  // shows its state until its agent says it sleeps.
  const next =
    state ??
    (desired === "run"
      ? a.state === "sleeping" || a.state === "waking"
        ? a.state
        : "pending"
      : ACTIVE.includes(a.state)
        ? a.state
        : "idle");
  await db.update(assignments).set({ desired, state: next, reason, updatedAt: nowIso() }).where(eq(assignments.id, id));
  return next;
}

/** Moves a replica that is not running to other GPUs (of the same or another worker). */
export async function moveAssignment(db: Db, id: string, workerId: string, gpuIndices: number[]): Promise<void> {
  await db
    .update(assignments)
    .set({ workerId, gpuIndices: JSON.stringify(gpuIndices), updatedAt: nowIso() })
    .where(eq(assignments.id, id));
}

/** Makes an assignment's replica start anew (restart, retry): its generation is part of the revision. */
export async function bumpGeneration(db: Db, id: string): Promise<void> {
  const a = await getAssignment(db, id);
  await db
    .update(assignments)
    .set({ generation: a.generation + 1, desired: "run", state: "pending", reason: null, updatedAt: nowIso() })
    .where(eq(assignments.id, id));
}

/** Stores the state an agent reported for an assignment's replica. */
export async function setAssignmentState(
  db: Db,
  id: string,
  state: ReplicaState | "idle",
  reason?: string,
): Promise<void> {
  await db
    .update(assignments)
    .set({ state, reason: reason ?? null, updatedAt: nowIso() })
    .where(eq(assignments.id, id));
}
