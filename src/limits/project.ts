/**
 * A project's caps next to its token quotas: what it uses (workloads, the replicas its workloads'
 * policies may run and those running now, bytes of models pulled for it) and the refusals, 429
 * `project_limit` naming the cap and its value, when one more would pass it.
 */
import { eq, sql } from "drizzle-orm";
import type { Db } from "../db";
import { first, rows } from "../db/raw";
import { projects } from "../db/schema";
import { projectLimit } from "../errors";
import { DEFAULTS } from "../execution/schema";
import { plural } from "../words";

/** A project's caps (null: none) and its slug for messages. */
export interface Caps {
  slug: string;
  maxWorkloads: number | null;
  maxReplicas: number | null;
  modelBytes: number | null;
}

/** The caps of a project (all null for one that is gone). */
export async function capsOf(db: Db, projectId: string): Promise<Caps> {
  const p = await first(
    db
      .select({ slug: projects.slug, w: projects.maxWorkloads, r: projects.maxReplicas, b: projects.modelBytes })
      .from(projects)
      .where(eq(projects.id, projectId)),
  );
  return {
    slug: p?.slug ?? projectId,
    maxWorkloads: p?.w ?? null,
    maxReplicas: p?.r ?? null,
    modelBytes: p?.b ?? null,
  };
}

/**
 * Bytes as a message says them.
 * @example sizeText(3145728) // → "3.0 MiB"
 */
export function sizeText(bytes: number): string {
  return bytes >= 1073741824 ? `${(bytes / 1073741824).toFixed(1)} GiB` : `${(bytes / 1048576).toFixed(1)} MiB`;
}

/**
 * The most replicas a policy may run at once: fixed `replicas`, autoscaling `max_replicas`, the
 * larger of a schedule's `replicas` and `min_replicas_outside` (defaults filled in when absent).
 * @example policyMax("autoscaling", { max_replicas: 4 }) // → 4
 */
export function policyMax(policy: string, params: Record<string, unknown>): number {
  const n = (k: string, d: number) => (typeof params[k] === "number" ? (params[k] as number) : d);
  if (policy === "autoscaling") return n("max_replicas", DEFAULTS.autoscaling.max_replicas);
  if (policy === "scheduled") return Math.max(n("replicas", DEFAULTS.scheduled.replicas), n("min_replicas_outside", 0));
  return n("replicas", DEFAULTS.fixed.replicas);
}

/** The policies of a project's workloads, by workload id. */
async function policiesOf(db: Db, projectId: string): Promise<Map<string, number>> {
  const found = await rows<{ id: string; p: string; params: string }>(
    db,
    sql`SELECT id, execution_policy AS p, execution_params AS params FROM workloads WHERE project_id = ${projectId}`,
  );
  return new Map(found.map((r) => [r.id, policyMax(r.p, JSON.parse(r.params))]));
}

/** A count or sum a query answers (PostgreSQL gives 64-bit numbers as text), 0 for none. */
const number = async (db: Db, q: ReturnType<typeof sql>) =>
  Number((await rows<{ n: number | string | null }>(db, q))[0]?.n ?? 0);

/** Replicas of the project told to run now (idle and stopped ones not counted). */
export function runningReplicas(db: Db, projectId: string): Promise<number> {
  return number(
    db,
    sql`SELECT COUNT(*) AS n FROM assignments a JOIN workloads w ON w.id = a.workload_id WHERE w.project_id = ${projectId} AND a.desired = 'run' AND w.paused = 0`,
  );
}

/** Bytes of the models pulled for the project that are in the store or on their way (one model left out, when named). */
export function modelBytesOf(db: Db, projectId: string, except = ""): Promise<number> {
  return number(
    db,
    sql`SELECT SUM(m.bytes_total) AS n FROM tenant_models t JOIN models m ON m.id = t.model_id WHERE t.project_id = ${projectId} AND m.id != ${except} AND m.state IN ('ready', 'downloading') AND m.bytes_total > 0`,
  );
}

/** What a project uses against its caps (`GET /admin/projects/:project` → `usage`). */
export async function projectUsage(db: Db, projectId: string) {
  const policies = await policiesOf(db, projectId);
  return {
    workloads: policies.size,
    /** The replicas its workloads' policies may run together (what `max_replicas` is checked against when one is saved). */
    replicas: [...policies.values()].reduce((s, n) => s + n, 0),
    running_replicas: await runningReplicas(db, projectId),
    model_bytes: await modelBytesOf(db, projectId),
  };
}

/** Refuses one more workload in a project at its `max_workloads`. */
export async function requireWorkloadRoom(db: Db, projectId: string): Promise<void> {
  const caps = await capsOf(db, projectId);
  if (caps.maxWorkloads === null) return;
  const n = (await policiesOf(db, projectId)).size;
  if (n >= caps.maxWorkloads)
    throw projectLimit(
      "max_workloads",
      caps.maxWorkloads,
      `project "${caps.slug}" has ${n} workloads and its max_workloads limit is ${caps.maxWorkloads}; delete one first or ask the operator to raise the limit`,
    );
}

/**
 * Refuses saving a workload whose policy would let the project's workloads run more replicas
 * together than its `max_replicas`. An update is refused only when it raises the workload's own
 * maximum, so a project left above a lowered cap can still edit (and lower) its workloads.
 */
export async function requireReplicaRoom(
  db: Db,
  projectId: string,
  next: { policy: string; params: Record<string, unknown> },
  workloadId?: string,
): Promise<void> {
  const caps = await capsOf(db, projectId);
  if (caps.maxReplicas === null) return;
  const policies = await policiesOf(db, projectId);
  const mine = policyMax(next.policy, next.params);
  if (workloadId !== undefined && mine <= (policies.get(workloadId) ?? 0)) return;
  const others = [...policies].filter(([id]) => id !== workloadId).reduce((s, [, n]) => s + n, 0);
  if (others + mine <= caps.maxReplicas) return;
  const field = next.policy === "autoscaling" ? "max_replicas" : "replicas";
  throw projectLimit(
    "max_replicas",
    caps.maxReplicas,
    `project "${caps.slug}" may run ${caps.maxReplicas} replicas together (max_replicas) and its other workloads may already run ${others}; this one asks for up to ${mine}`,
    `execution_params.${field}`,
  );
}

/** How many more replicas of the project may start now (Infinity without a cap), and why not when none. */
export async function replicaRoom(db: Db, projectId: string): Promise<{ room: number; why: string }> {
  const caps = await capsOf(db, projectId);
  if (caps.maxReplicas === null) return { room: Infinity, why: "" };
  const running = await runningReplicas(db, projectId);
  return {
    room: caps.maxReplicas - running,
    why: `the project's max_replicas limit (${caps.maxReplicas}) is reached: ${plural(running, "replica")} of "${caps.slug}" run`,
  };
}
