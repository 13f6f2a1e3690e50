import { and, desc, eq, getTableColumns, sql } from "drizzle-orm";
import type { Db } from "../db";
import { storeLookup } from "../db/memo";
import { first, type Statement } from "../db/raw";
import type { KeyUsage } from "../usage/recorder";
import { apiKeys, projects, workloadUsage } from "../db/schema";
import { newId, newSecret, nowIso, sha256 } from "../ids";
import { notFound, validation } from "../errors";
import type { KeyCreate } from "./schema";
import type { KeyLimits, LimitsView } from "../limits/schema";
import { audit, diffOf, fieldsOf } from "../audit/service";

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
  usage: {
    requests: number;
    input_tokens: number;
    output_tokens: number;
    total_tokens: number;
    last_used_at: string | null;
  };
  limits: LimitsView;
}

/** A key's stored row with its project's slug. */
type KeyRow = typeof apiKeys.$inferSelect & { projectSlug: string };

/** A key row joined with its project's slug, its priority as the API names it: what authentication works with. */
export type KeyRecord = Omit<KeyRow, "priority"> & {
  priority: "interactive" | "batch" | null;
};

/** A stored priority as the API names it (null: interactive, the default). */
export const priorityOf = (p: string | null): "interactive" | "batch" | null =>
  p === "batch" || p === "interactive" ? p : null;

function view(k: KeyRow | KeyRecord): KeyView {
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
    limits: {
      rpm: k.rpm,
      tpm: k.tpm,
      max_concurrent: k.maxConcurrent,
      tokens_per_day: k.tokensPerDay,
      tokens_per_month: k.tokensPerMonth,
      priority: priorityOf(k.priority),
      weight: k.weight,
    },
  };
}

/** The columns of some limits (only the fields given; `null` clears one). */
function limitColumns(l: KeyLimits): Partial<typeof apiKeys.$inferInsert> {
  const out: Partial<typeof apiKeys.$inferInsert> = {};
  if (l.rpm !== undefined) out.rpm = l.rpm;
  if (l.tpm !== undefined) out.tpm = l.tpm;
  if (l.max_concurrent !== undefined) out.maxConcurrent = l.max_concurrent;
  if (l.tokens_per_day !== undefined) out.tokensPerDay = l.tokens_per_day;
  if (l.tokens_per_month !== undefined) out.tokensPerMonth = l.tokens_per_month;
  if (l.priority !== undefined) out.priority = l.priority;
  if (l.weight !== undefined) out.weight = l.weight;
  return out;
}

/** Sets (or, with `null`, removes) some of a key's limits; they apply from the next request. */
export async function setKeyLimits(db: Db, id: string, limits: KeyLimits): Promise<KeyView> {
  const before = await keyRecord(db, id);
  if (!before) throw notFound(`key "${id}"`);
  const set = limitColumns(limits);
  if (Object.keys(set).length) await db.update(apiKeys).set(set).where(eq(apiKeys.id, id));
  const row = await keyRecord(db, id);
  if (!row) throw notFound(`key "${id}"`);
  await audit(
    db,
    "key.limits",
    { type: "key", id, label: `${row.name} (${row.prefix}…)` },
    diffOf(view(before).limits, view(row).limits),
  );
  return view(row);
}

const keyColumns = { ...getTableColumns(apiKeys), projectSlug: projects.slug };

/** A key's row (with its project's slug) as the rest of inferd reads it: its priority as the API names it. */
const keyRecordOf = (row: KeyRow): KeyRecord => ({
  ...row,
  priority: priorityOf(row.priority),
});

/** A key with its project's slug, by id. */
const keyRecord = (db: Db, id: string) =>
  first(
    db
      .select(keyColumns)
      .from(apiKeys)
      .innerJoin(projects, eq(projects.id, apiKeys.projectId))
      .where(eq(apiKeys.id, id)),
  );

/**
 * Creates a key for a project and returns it with its secret — the only time the secret is seen.
 * `endpoints` entries are `<project_slug>/<workload_slug>` of this project.
 */
export async function createKey(
  db: Db,
  project: { id: string; slug: string },
  input: KeyCreate,
): Promise<KeyView & { secret: string }> {
  const scope = input.scope ?? (input.endpoints?.length ? "endpoints" : "project");
  const endpoints = scope === "endpoints" ? [...new Set(input.endpoints ?? [])] : [];
  if (scope === "endpoints" && endpoints.length === 0)
    throw validation("endpoints", 'a key with scope "endpoints" needs at least one endpoint');
  if (scope === "project" && input.endpoints?.length)
    throw validation("endpoints", 'endpoints are only allowed with scope "endpoints"');
  endpoints.forEach((e, i) => {
    const [p, w, extra] = e.split("/");
    if (!p || !w || extra !== undefined)
      throw validation(`endpoints.${i}`, `"${e}" is not of the form <project_slug>/<workload_slug>`);
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
    rpm: null,
    tpm: null,
    maxConcurrent: null,
    tokensPerDay: null,
    tokensPerMonth: null,
    priority: null,
    weight: null,
    ...limitColumns(input.limits ?? {}),
  } as const;
  await db.insert(apiKeys).values(row);
  await audit(
    db,
    "key.create",
    { type: "key", id: row.id, label: `${row.name} (${row.prefix}…)` },
    {
      project: project.slug,
      ...fieldsOf(row, ["name", "type", "scope", "prefix"]),
      endpoints,
      limits: input.limits ?? {},
    },
  );
  return {
    ...view({
      ...row,
      revokedAt: null,
      requests: 0,
      inputTokens: 0,
      outputTokens: 0,
      lastUsedAt: null,
      projectSlug: project.slug,
    }),
    secret,
  };
}

/** Keys of a project, newest first, revoked ones included (their usage stays visible). */
export async function listKeys(db: Db, projectId: string): Promise<KeyView[]> {
  const rows = await db
    .select(keyColumns)
    .from(apiKeys)
    .innerJoin(projects, eq(projects.id, apiKeys.projectId))
    .where(eq(apiKeys.projectId, projectId))
    .orderBy(desc(apiKeys.createdAt));
  return rows.map(view);
}

/** Revokes a key; the next request that presents it is refused. Revoking twice is harmless. */
export async function revokeKey(db: Db, id: string): Promise<KeyView> {
  await db
    .update(apiKeys)
    .set({ revokedAt: sql`coalesce(${apiKeys.revokedAt}, ${nowIso()})` })
    .where(eq(apiKeys.id, id));
  const row = await keyRecord(db, id);
  if (!row) throw notFound(`key "${id}"`);
  await audit(db, "key.revoke", { type: "key", id, label: `${row.name} (${row.prefix}…)` });
  return view(row);
}

/**
 * Finds the live (not revoked) key whose secret is `token`, or undefined: from memory while the
 * store is unchanged (the value at once), else a promise of it.
 */
export function findKeyBySecret(db: Db, token: string): KeyRecord | undefined | Promise<KeyRecord | undefined> {
  return findKeyByHash(db, sha256(token));
}

/** `findKeyBySecret` for a secret whose SHA-256 (`sha256(token)`) the caller has made already. */
export const findKeyByHash = storeLookup(
  (db, hash) =>
    first(
      db
        .select(keyColumns)
        .from(apiKeys)
        .innerJoin(projects, eq(projects.id, apiKeys.projectId))
        .where(and(eq(apiKeys.hash, hash), sql`${apiKeys.revokedAt} IS NULL`)),
    ).then((row) => row && keyRecordOf(row)),
  ["api_keys", "projects"],
);

/** The write adding usage counted since the last flush to a key's counters (the usage recorder runs it). */
export function keyUsageWrite(db: Db, keyId: string, used: KeyUsage): Statement {
  return db
    .update(apiKeys)
    .set({
      requests: sql`${apiKeys.requests} + ${used.requests}`,
      inputTokens: sql`${apiKeys.inputTokens} + ${used.inputTokens}`,
      outputTokens: sql`${apiKeys.outputTokens} + ${used.outputTokens}`,
      lastUsedAt: new Date(used.lastUsedAt).toISOString(),
    })
    .where(eq(apiKeys.id, keyId));
}

/** A workload's recorded usage (zeros when never used). */
export async function workloadUsageOf(db: Db, workloadId: string) {
  const u = await first(db.select().from(workloadUsage).where(eq(workloadUsage.workloadId, workloadId)));
  return {
    requests: u?.requests ?? 0,
    errors: u?.errors ?? 0,
    input_tokens: u?.inputTokens ?? 0,
    output_tokens: u?.outputTokens ?? 0,
    total_tokens: (u?.inputTokens ?? 0) + (u?.outputTokens ?? 0),
    last_used_at: u?.lastUsedAt ?? null,
  };
}
