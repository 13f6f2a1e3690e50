/**
 * Multi-node groups in the store: a workload with `nodes > 1` runs as one group of that many
 * members (assignments sharing a `group_id`, ranked from 0, the leader), placed whole, told about
 * each other, and restarted whole. Where the members go is src/placement's answer; this writes it.
 */
import { and, eq, inArray, ne } from "drizzle-orm";
import type { Db } from "../db";
import { assignments } from "../db/schema";
import { newId, nowIso } from "../ids";
import type { GroupMember } from "../../agent/protocol";
import type { Workload } from "../workloads/service";
import type { MemberPlacement } from "../placement/group";
import { workerRows, type AssignmentView } from "./service";

type AssignmentRow = typeof assignments.$inferSelect;

/** Writes a group placement decided by src/placement (automatic members, rank = index, 0 first); returns the rows. */
export async function insertGroup(
  db: Db,
  w: Pick<Workload, "id" | "nodes">,
  gpusPerNode: number,
  members: MemberPlacement[],
): Promise<AssignmentRow[]> {
  const groupId = newId("grp");
  const now = nowIso();
  const rows: AssignmentRow[] = members.map((m, rank) => ({
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
  return rows;
}

/** Every member of the given groups as each member is told of them, by group id, in rank order. */
export async function groupMembers(db: Db, groupIds: string[]): Promise<Map<string, GroupMember[]>> {
  const out = new Map<string, GroupMember[]>();
  if (groupIds.length === 0) return out;
  const rows = await db.select().from(assignments).where(inArray(assignments.groupId, groupIds));
  const workers = new Map((await workerRows(db)).map((w) => [w.id, w]));
  for (const a of rows.sort((x, y) => x.nodeRank - y.nodeRank)) {
    const w = workers.get(a.workerId);
    const member: GroupMember = {
      rank: a.nodeRank,
      worker: w?.name ?? a.workerId,
      address: w?.clusterAddress ?? "",
      ready: a.state === "ready",
      ...(a.endpoint ? { endpoint: a.endpoint } : {}),
    };
    out.set(a.groupId!, [...(out.get(a.groupId!) ?? []), member]);
  }
  return out;
}

/** `address:port`, with an IPv6 address bracketed. */
export const endpointOf = (address: string, port: number) =>
  `${address.includes(":") ? `[${address}]` : address}:${port}`;

/** Stores the endpoint a member reported (its group listener on its worker's cluster address); true when it changed. */
export async function recordEndpoint(
  db: Db,
  a: AssignmentView,
  address: string | null,
  port: number | undefined,
): Promise<boolean> {
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
export async function restartGroup(
  db: Db,
  groupId: string,
  generation: number,
  reason: string | null,
): Promise<boolean> {
  const rows = await db
    .select({ id: assignments.id })
    .from(assignments)
    .where(and(eq(assignments.groupId, groupId), eq(assignments.generation, generation)));
  if (rows.length === 0) return false;
  await db
    .update(assignments)
    .set({ generation: generation + 1, desired: "run", state: "pending", reason, endpoint: null, updatedAt: nowIso() })
    .where(and(eq(assignments.groupId, groupId), eq(assignments.generation, generation)));
  return true;
}

/** Gives up on a group: every member stops and shows `failed` with the reason, until restarted. */
export async function failGroup(db: Db, groupId: string, reason: string): Promise<void> {
  await db
    .update(assignments)
    .set({ desired: "idle", state: "failed", reason, updatedAt: nowIso() })
    .where(eq(assignments.groupId, groupId));
}

/** Shows the same reason on every other member of a group (the member that failed, a restart coming). */
export async function noteGroup(db: Db, groupId: string, reason: string, exceptId: string): Promise<void> {
  await db
    .update(assignments)
    .set({ reason, updatedAt: nowIso() })
    .where(and(eq(assignments.groupId, groupId), ne(assignments.id, exceptId)));
}
