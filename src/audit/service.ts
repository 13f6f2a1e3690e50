/**
 * The audit log: who changed what. Services that change state call `audit()`; the actor comes from
 * the request being served (set by the auth gate: the admin token, a dashboard session or a
 * control-plane key), or from the CLI, or is the system. Diffs name changed fields only, never secrets.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { and, desc, eq, gte, inArray, isNotNull, lt, or, sql, type SQL } from "drizzle-orm";
import type { Db } from "../db";
import { apiKeys, assignments, auditLog, webhooks, workloads } from "../db/schema";
import { first, startsWith } from "../db/raw";

/** Who is acting. */
export interface Actor {
  type: "admin" | "session" | "user" | "key" | "cli" | "system" | "anonymous";
  id?: string;
  label: string;
  /** The `x-request-id` of the request acting, when a request is. */
  requestId?: string;
}

/** What was acted on. */
export interface Target {
  type: string;
  id?: string | null;
  label?: string | null;
  /** The project it belongs to, when the caller knows it (else `audit()` finds it for projects, workloads, keys, webhooks and assignments). */
  projectId?: string | null;
}

const SYSTEM: Actor = { type: "system", label: "inferd" };
const current = new AsyncLocalStorage<Actor>();

/** Makes `actor` the one for the rest of this request (called by the auth gate); returns it. */
export function actAs(actor: Actor): Actor {
  current.enterWith(actor);
  return actor;
}

/** Runs `fn` as `actor` (the CLI). */
export function withActor<T>(actor: Actor, fn: () => T): T {
  return current.run(actor, fn);
}

/** The actor now: the request's, or the system. */
export function actorNow(): Actor {
  return current.getStore() ?? SYSTEM;
}

/**
 * Field names whose values are never written to the log: secrets, hashes and tokens (`join_token`,
 * `admin_token`), but not token counts (`tokens_per_day`, `max_tokens`), which a reader needs.
 */
const SECRET = /secret|token$|hash|password|api_?key|credential/i;

/** A value fit for the log: secrets replaced, long text cut. */
function safe(field: string, v: unknown): unknown {
  if (SECRET.test(field)) return "(hidden)";
  if (typeof v === "string" && v.length > 2000) return `${v.slice(0, 2000)}…`;
  return v;
}

/**
 * The fields that differ between two versions, as `{field: {from, to}}` (secrets hidden).
 * @example diffOf({ name: "a", slug: "x" }, { name: "b", slug: "x" }) // → { name: { from: "a", to: "b" } }
 */
export function diffOf(
  beforeObj: object,
  afterObj: object,
  fields = Object.keys(afterObj),
): Record<string, { from: unknown; to: unknown }> {
  const [before, after] = [beforeObj as Record<string, unknown>, afterObj as Record<string, unknown>];
  const out: Record<string, { from: unknown; to: unknown }> = {};
  for (const f of fields) {
    if (JSON.stringify(before[f]) !== JSON.stringify(after[f]))
      out[f] = { from: safe(f, before[f]), to: safe(f, after[f]) };
  }
  return out;
}

/** The fields of a new thing, for a creation's entry (secrets hidden). */
export function fieldsOf(o: object, fields: string[]): Record<string, unknown> {
  const obj = o as Record<string, unknown>;
  return Object.fromEntries(fields.filter((f) => obj[f] !== undefined).map((f) => [f, safe(f, obj[f])]));
}

/**
 * The project a target belongs to: given, its own id for a project, else looked up through the
 * workload it belongs to; for a thing already deleted, the project an earlier entry on it named.
 * One or two reads: audit writes are rare.
 */
async function projectOfTarget(db: Db, t: Target): Promise<string | null> {
  if (t.projectId !== undefined) return t.projectId;
  if (!t.id) return null;
  const id = t.id;
  const viaWorkload = <T extends typeof webhooks | typeof assignments>(table: T) =>
    first(
      db
        .select({ p: workloads.projectId })
        .from(table)
        .innerJoin(workloads, eq(workloads.id, table.workloadId))
        .where(eq(table.id, id)),
    );
  let found: { p: string } | undefined;
  if (t.type === "project") return id;
  else if (t.type === "workload")
    found = await first(db.select({ p: workloads.projectId }).from(workloads).where(eq(workloads.id, id)));
  else if (t.type === "key")
    found = await first(db.select({ p: apiKeys.projectId }).from(apiKeys).where(eq(apiKeys.id, id)));
  else if (t.type === "webhook") found = await viaWorkload(webhooks);
  else if (t.type === "assignment") found = await viaWorkload(assignments);
  else return null;
  if (found) return found.p;
  const earlier = await first(
    db
      .select({ p: auditLog.projectId })
      .from(auditLog)
      .where(and(eq(auditLog.targetId, id), isNotNull(auditLog.projectId))),
  );
  return earlier?.p ?? null;
}

/** Records one change by the current actor, with the project of its target. */
export async function audit(
  db: Db,
  action: string,
  target: Target,
  diff: Record<string, unknown> = {},
  actor = actorNow(),
): Promise<void> {
  diff = Object.fromEntries(Object.entries(diff).map(([k, v]) => [k, safe(k, v)]));
  const projectId = await projectOfTarget(db, target);
  await db.insert(auditLog).values({
    at: new Date().toISOString(),
    actorType: actor.type,
    actorId: actor.id ?? null,
    actorLabel: actor.label,
    action,
    targetType: target.type,
    targetId: target.id ?? null,
    targetLabel: target.label ?? null,
    projectId,
    diff: JSON.stringify(diff),
    requestId: actor.requestId ?? null,
  });
}

/** An entry as `GET /admin/audit` shows it. */
export interface AuditEntry {
  id: number;
  at: string;
  actor: { type: string; id: string | null; label: string };
  action: string;
  target: { type: string; id: string | null; label: string | null };
  diff: Record<string, unknown>;
  /** The `x-request-id` of the request that made the change (null for the CLI and inferd itself). */
  request_id: string | null;
  /** The project the target belongs to (null: none, such as a worker, a model or a user). */
  project_id: string | null;
}

/** Which entries a reader may see: all, or those of their projects and their own actions. */
export type AuditScope = "all" | { projectIds: string[]; actorId: string | null };

/**
 * Entries newest first, filtered by time, actor (id or label), target (id or label), action prefix
 * and project (id); `before` (an entry's id) pages to older entries without skipping any written in
 * the same millisecond; `scope` keeps a project member to their projects' entries and their own.
 */
export async function listAudit(
  db: Db,
  q: {
    since?: string;
    until?: string;
    actor?: string;
    target?: string;
    action?: string;
    project?: string;
    limit?: number;
    before?: number;
    scope?: AuditScope;
  },
): Promise<AuditEntry[]> {
  const scope = q.scope ?? "all";
  const conds: (SQL | undefined)[] = [
    q.before !== undefined ? lt(auditLog.id, q.before) : undefined,
    q.since ? gte(auditLog.at, q.since) : undefined,
    q.until ? lt(auditLog.at, q.until) : undefined,
    q.actor
      ? or(eq(auditLog.actorId, q.actor), eq(auditLog.actorLabel, q.actor), eq(auditLog.actorType, q.actor))
      : undefined,
    q.target ? or(eq(auditLog.targetId, q.target), eq(auditLog.targetLabel, q.target)) : undefined,
    q.action ? or(eq(auditLog.action, q.action), startsWith(auditLog.action, `${q.action}.`)) : undefined,
    q.project ? eq(auditLog.projectId, q.project) : undefined,
    scope === "all"
      ? undefined
      : or(
          scope.projectIds.length ? inArray(auditLog.projectId, scope.projectIds) : sql`1 = 0`,
          scope.actorId ? and(eq(auditLog.actorType, "user"), eq(auditLog.actorId, scope.actorId)) : undefined,
        ),
  ];
  const rows = await db
    .select()
    .from(auditLog)
    .where(and(...conds))
    .orderBy(desc(auditLog.id))
    .limit(Math.min(Math.max(q.limit ?? 100, 1), 1000));
  return rows.map((r) => ({
    id: r.id,
    at: r.at,
    actor: { type: r.actorType, id: r.actorId, label: r.actorLabel },
    action: r.action,
    target: { type: r.targetType, id: r.targetId, label: r.targetLabel },
    diff: JSON.parse(r.diff),
    request_id: r.requestId,
    project_id: r.projectId,
  }));
}

/** Deletes entries older than `days`; returns how many. */
export async function pruneAudit(db: Db, days: number): Promise<number> {
  const cutoff = new Date(Date.now() - days * 86_400_000).toISOString();
  return (await db.delete(auditLog).where(lt(auditLog.at, cutoff)).returning({ id: auditLog.id })).length;
}
