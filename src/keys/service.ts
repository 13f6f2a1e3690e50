import { and, desc, eq, getTableColumns, sql } from "drizzle-orm";
import type { Db } from "../db";
import { apiKeys, projects } from "../db/schema";
import { newId, newSecret, nowIso, sha256 } from "../ids";
import { notFound, validation } from "../errors";
import type { KeyCreate } from "./schema";

/** Secret prefixes by key type: the prefix alone tells which plane a token belongs to. */
export const KEY_PREFIX = { sdk: "ik_sdk_", live: "ik_live_" } as const;

/** How many characters of a secret stay visible after creation. */
const VISIBLE = 12;

/** A key as the admin API shows it: never the secret, always its prefix and usage. */
export interface KeyView {
  id: string;
  name: string;
  type: "sdk" | "live";
  scope: "project" | "endpoints";
  endpoints: string[];
  prefix: string;
  project_id: string;
  project_slug: string;
  created_at: string;
  revoked_at: string | null;
  usage: { requests: number; input_tokens: number; output_tokens: number; total_tokens: number; last_used_at: string | null };
}

/** A key row joined with its project's slug: what authentication works with. */
export type KeyRecord = typeof apiKeys.$inferSelect & { projectSlug: string };

function view(k: KeyRecord): KeyView {
  return {
    id: k.id,
    name: k.name,
    type: k.type,
    scope: k.scope,
    endpoints: JSON.parse(k.endpoints),
    prefix: k.prefix,
    project_id: k.projectId,
    project_slug: k.projectSlug,
    created_at: k.createdAt,
    revoked_at: k.revokedAt,
    usage: {
      requests: k.requests,
      input_tokens: k.inputTokens,
      output_tokens: k.outputTokens,
      total_tokens: k.inputTokens + k.outputTokens,
      last_used_at: k.lastUsedAt,
    },
  };
}

const keyColumns = { ...getTableColumns(apiKeys), projectSlug: projects.slug };

/**
 * Creates a key for a project and returns it with its secret — the only time the secret is seen.
 * `endpoints` entries are `<project_slug>/<workload_slug>` of this project.
 */
export function createKey(db: Db, project: { id: string; slug: string }, input: KeyCreate): KeyView & { secret: string } {
  const scope = input.scope ?? (input.endpoints?.length ? "endpoints" : "project");
  const endpoints = scope === "endpoints" ? [...new Set(input.endpoints ?? [])] : [];
  if (scope === "endpoints" && endpoints.length === 0) throw validation("endpoints", "a key with scope \"endpoints\" needs at least one endpoint");
  if (scope === "project" && input.endpoints?.length) throw validation("endpoints", "endpoints are only allowed with scope \"endpoints\"");
  endpoints.forEach((e, i) => {
    const [p, w, extra] = e.split("/");
    if (!p || !w || extra !== undefined) throw validation(`endpoints.${i}`, `"${e}" is not of the form <project_slug>/<workload_slug>`);
    if (p !== project.slug) throw validation(`endpoints.${i}`, `"${e}" is not in project "${project.slug}"`);
  });
  const secret = newSecret(KEY_PREFIX[input.type]);
  const row = {
    id: newId("key"),
    projectId: project.id,
    name: input.name,
    type: input.type,
    scope,
    endpoints: JSON.stringify(endpoints),
    prefix: secret.slice(0, KEY_PREFIX[input.type].length + VISIBLE - 4),
    hash: sha256(secret),
    createdAt: nowIso(),
  } as const;
  db.insert(apiKeys).values(row).run();
  return { ...view({ ...row, revokedAt: null, requests: 0, inputTokens: 0, outputTokens: 0, lastUsedAt: null, projectSlug: project.slug }), secret };
}

/** Keys of a project, newest first, revoked ones included (their usage stays visible). */
export function listKeys(db: Db, projectId: string): KeyView[] {
  return db
    .select(keyColumns)
    .from(apiKeys)
    .innerJoin(projects, eq(projects.id, apiKeys.projectId))
    .where(eq(apiKeys.projectId, projectId))
    .orderBy(desc(apiKeys.createdAt))
    .all()
    .map(view);
}

/** Revokes a key; the next request that presents it is refused. Revoking twice is harmless. */
export function revokeKey(db: Db, id: string): KeyView {
  db.update(apiKeys).set({ revokedAt: sql`coalesce(${apiKeys.revokedAt}, ${nowIso()})` }).where(eq(apiKeys.id, id)).run();
  const row = db.select(keyColumns).from(apiKeys).innerJoin(projects, eq(projects.id, apiKeys.projectId)).where(eq(apiKeys.id, id)).get();
  if (!row) throw notFound(`key "${id}"`);
  return view(row);
}

/** Finds the live (not revoked) key whose secret is `token`, or undefined. */
export function findKeyBySecret(db: Db, token: string): KeyRecord | undefined {
  return db
    .select(keyColumns)
    .from(apiKeys)
    .innerJoin(projects, eq(projects.id, apiKeys.projectId))
    .where(and(eq(apiKeys.hash, sha256(token)), sql`${apiKeys.revokedAt} IS NULL`))
    .get();
}

/** Usage to add to one key. */
export interface UsageDelta {
  requests?: number;
  inputTokens?: number;
  outputTokens?: number;
}

/**
 * Per-key usage, counted in memory and written in one transaction per flush, so the request path
 * never waits for a disk write. `flush()` runs on a timer, before usage is read, and at shutdown.
 */
export class UsageRecorder {
  private pending = new Map<string, { requests: number; inputTokens: number; outputTokens: number; lastUsedAt: string }>();

  constructor(private readonly db: Db) {}

  /** Adds usage to a key; cheap, no I/O. */
  record(keyId: string, delta: UsageDelta): void {
    const cur = this.pending.get(keyId) ?? { requests: 0, inputTokens: 0, outputTokens: 0, lastUsedAt: "" };
    cur.requests += delta.requests ?? 0;
    cur.inputTokens += delta.inputTokens ?? 0;
    cur.outputTokens += delta.outputTokens ?? 0;
    cur.lastUsedAt = nowIso();
    this.pending.set(keyId, cur);
  }

  /** Writes what was counted since the last flush. */
  flush(): void {
    if (this.pending.size === 0) return;
    const batch = this.pending;
    this.pending = new Map();
    this.db.transaction((tx) => {
      for (const [id, d] of batch) {
        tx.update(apiKeys)
          .set({
            requests: sql`${apiKeys.requests} + ${d.requests}`,
            inputTokens: sql`${apiKeys.inputTokens} + ${d.inputTokens}`,
            outputTokens: sql`${apiKeys.outputTokens} + ${d.outputTokens}`,
            lastUsedAt: d.lastUsedAt,
          })
          .where(eq(apiKeys.id, id))
          .run();
      }
    });
  }
}
