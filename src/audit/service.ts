/**
 * The audit log: who changed what. Services that change state call `audit()`; the actor comes from
 * the request being served (set by the auth gate: the admin token, a dashboard session or a
 * control-plane key), or from the CLI, or is the system. Diffs name changed fields only, never secrets.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { and, desc, eq, gte, lt, or, type SQL } from "drizzle-orm";
import type { Db } from "../db";
import { auditLog } from "../db/schema";
import { startsWith } from "../db/raw";

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
export function diffOf(beforeObj: object, afterObj: object, fields = Object.keys(afterObj)): Record<string, { from: unknown; to: unknown }> {
  const [before, after] = [beforeObj as Record<string, unknown>, afterObj as Record<string, unknown>];
  const out: Record<string, { from: unknown; to: unknown }> = {};
  for (const f of fields) {
    if (JSON.stringify(before[f]) !== JSON.stringify(after[f])) out[f] = { from: safe(f, before[f]), to: safe(f, after[f]) };
  }
  return out;
}

/** The fields of a new thing, for a creation's entry (secrets hidden). */
export function fieldsOf(o: object, fields: string[]): Record<string, unknown> {
  const obj = o as Record<string, unknown>;
  return Object.fromEntries(fields.filter((f) => obj[f] !== undefined).map((f) => [f, safe(f, obj[f])]));
}

/** Records one change by the current actor. */
export async function audit(db: Db, action: string, target: Target, diff: Record<string, unknown> = {}, actor = actorNow()): Promise<void> {
  diff = Object.fromEntries(Object.entries(diff).map(([k, v]) => [k, safe(k, v)]));
  await db
    .insert(auditLog)
    .values({ at: new Date().toISOString(), actorType: actor.type, actorId: actor.id ?? null, actorLabel: actor.label, action, targetType: target.type, targetId: target.id ?? null, targetLabel: target.label ?? null, diff: JSON.stringify(diff), requestId: actor.requestId ?? null });
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
}

/**
 * Entries newest first, filtered by time, actor (id or label), target (id or label) and action prefix;
 * `before` (an entry's id) pages to older entries without skipping any written in the same millisecond.
 */
export async function listAudit(db: Db, q: { since?: string; until?: string; actor?: string; target?: string; action?: string; limit?: number; before?: number }): Promise<AuditEntry[]> {
  const conds: (SQL | undefined)[] = [
    q.before !== undefined ? lt(auditLog.id, q.before) : undefined,
    q.since ? gte(auditLog.at, q.since) : undefined,
    q.until ? lt(auditLog.at, q.until) : undefined,
    q.actor ? or(eq(auditLog.actorId, q.actor), eq(auditLog.actorLabel, q.actor), eq(auditLog.actorType, q.actor)) : undefined,
    q.target ? or(eq(auditLog.targetId, q.target), eq(auditLog.targetLabel, q.target)) : undefined,
    q.action ? or(eq(auditLog.action, q.action), startsWith(auditLog.action, `${q.action}.`)) : undefined,
  ];
  const rows = await db.select().from(auditLog).where(and(...conds)).orderBy(desc(auditLog.id)).limit(Math.min(Math.max(q.limit ?? 100, 1), 1000));
  return rows.map((r) => ({ id: r.id, at: r.at, actor: { type: r.actorType, id: r.actorId, label: r.actorLabel }, action: r.action, target: { type: r.targetType, id: r.targetId, label: r.targetLabel }, diff: JSON.parse(r.diff), request_id: r.requestId }));
}

/** Deletes entries older than `days`; returns how many. */
export async function pruneAudit(db: Db, days: number): Promise<number> {
  const cutoff = new Date(Date.now() - days * 86_400_000).toISOString();
  return (await db.delete(auditLog).where(lt(auditLog.at, cutoff)).returning({ id: auditLog.id })).length;
}
