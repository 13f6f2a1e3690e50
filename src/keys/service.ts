import { and, desc, eq, getTableColumns, sql } from "drizzle-orm";
import type { Db } from "../db";
import { memoize } from "../db/memo";
import { apiKeys, projects, workloadUsage } from "../db/schema";
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

const keyLookups = new WeakMap<Db, (hash: string) => KeyRecord | undefined>();

/** Finds the live (not revoked) key whose secret is `token`, or undefined (memoised until the store changes). */
export function findKeyBySecret(db: Db, token: string): KeyRecord | undefined {
  let find = keyLookups.get(db);
  if (!find) {
    const q = db
      .select(keyColumns)
      .from(apiKeys)
      .innerJoin(projects, eq(projects.id, apiKeys.projectId))
      .where(and(eq(apiKeys.hash, sql.placeholder("hash")), sql`${apiKeys.revokedAt} IS NULL`))
      .prepare();
    find = memoize(db, (hash) => q.get({ hash }));
    keyLookups.set(db, find);
  }
  return find(sha256(token));
}

/** Usage to add to one key or workload. */
export interface UsageDelta {
  requests?: number;
  errors?: number;
  inputTokens?: number;
  outputTokens?: number;
}

type Counter = { requests: number; errors: number; inputTokens: number; outputTokens: number; lastUsedAt: number };

function add(map: Map<string, Counter>, id: string, delta: UsageDelta): void {
  const cur = map.get(id) ?? { requests: 0, errors: 0, inputTokens: 0, outputTokens: 0, lastUsedAt: 0 };
  cur.requests += delta.requests ?? 0;
  cur.errors += delta.errors ?? 0;
  cur.inputTokens += delta.inputTokens ?? 0;
  cur.outputTokens += delta.outputTokens ?? 0;
  cur.lastUsedAt = Date.now();
  map.set(id, cur);
}

/**
 * Usage per key and per workload, counted in memory and written in one transaction per flush, so
 * the request path never waits for a disk write. `flush()` runs on a timer, before usage is read,
 * and at shutdown.
 */
export class UsageRecorder {
  private keys = new Map<string, Counter>();
  private workloads = new Map<string, Counter>();

  constructor(private readonly db: Db) {}

  /** Adds usage to a key; cheap, no I/O. */
  record(keyId: string, delta: UsageDelta): void {
    add(this.keys, keyId, delta);
  }

  /** Adds usage to a workload; cheap, no I/O. */
  recordWorkload(workloadId: string, delta: UsageDelta): void {
    add(this.workloads, workloadId, delta);
  }

  /** Writes what was counted since the last flush. */
  flush(): void {
    if (this.keys.size === 0 && this.workloads.size === 0) return;
    const [keys, wls] = [this.keys, this.workloads];
    this.keys = new Map();
    this.workloads = new Map();
    this.db.transaction((tx) => {
      for (const [id, d] of keys) {
        tx.update(apiKeys)
          .set({
            requests: sql`${apiKeys.requests} + ${d.requests}`,
            inputTokens: sql`${apiKeys.inputTokens} + ${d.inputTokens}`,
            outputTokens: sql`${apiKeys.outputTokens} + ${d.outputTokens}`,
            lastUsedAt: new Date(d.lastUsedAt).toISOString(),
          })
          .where(eq(apiKeys.id, id))
          .run();
      }
      for (const [id, d] of wls) {
        // The workload may have been deleted since: insert only while it exists.
        tx.run(sql`INSERT INTO workload_usage (workload_id, requests, errors, input_tokens, output_tokens, last_used_at)
          SELECT ${id}, ${d.requests}, ${d.errors}, ${d.inputTokens}, ${d.outputTokens}, ${new Date(d.lastUsedAt).toISOString()} WHERE EXISTS (SELECT 1 FROM workloads WHERE id = ${id})
          ON CONFLICT(workload_id) DO UPDATE SET requests = requests + excluded.requests, errors = errors + excluded.errors,
            input_tokens = input_tokens + excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens, last_used_at = excluded.last_used_at`);
      }
    });
  }
}

/** A workload's recorded usage (zeros when never used). */
export function workloadUsageOf(db: Db, workloadId: string) {
  const u = db.select().from(workloadUsage).where(eq(workloadUsage.workloadId, workloadId)).get();
  return {
    requests: u?.requests ?? 0,
    errors: u?.errors ?? 0,
    input_tokens: u?.inputTokens ?? 0,
    output_tokens: u?.outputTokens ?? 0,
    total_tokens: (u?.inputTokens ?? 0) + (u?.outputTokens ?? 0),
    last_used_at: u?.lastUsedAt ?? null,
  };
}
