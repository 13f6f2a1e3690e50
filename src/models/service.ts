import { asc, eq } from "drizzle-orm";
import type { Db } from "../db";
import { first } from "../db/raw";
import { models } from "../db/schema";
import { notFound } from "../errors";
import { newId, nowIso } from "../ids";
import { listAllWorkloads, type Workload } from "../workloads/service";
import { flagValue, splitCommand } from "../../agent/command";
import { modelRefs } from "../../agent/model-refs";
import { DEFAULT_QUANTS, parseSource, sourceKey, type ModelSource } from "../../agent/models/source";
import type { TransferProgress } from "../../agent/protocol";
import { estimate, type Estimate, type ModelInfo } from "./fit";

type Row = typeof models.$inferSelect;

/** A model as the admin API shows it. */
export interface ModelView {
  id: string;
  source: string;
  kind: Row["kind"];
  repo: string | null;
  revision: string | null;
  state: Row["state"];
  reason: string | null;
  /** The path a runtime is given. */
  entry: string | null;
  files: { path: string; size: number; sha256: string | null }[];
  size_bytes: number;
  progress: TransferProgress | null;
  info: ModelInfo | null;
  /** Memory for the default context (4096 tokens, or less when the model's own is shorter). */
  estimate: Estimate | null;
  used_by: { id: string; project_slug: string; slug: string }[];
  created_at: string;
  updated_at: string;
  last_used_at: string | null;
}

/** The view of a row; `progress` and `used_by` come from the caller (live state, workloads). */
export function modelView(
  r: Row,
  extra: { progress?: TransferProgress | null; usedBy?: ModelView["used_by"] } = {},
): ModelView {
  const info = r.metadata ? (JSON.parse(r.metadata) as ModelInfo) : null;
  const fallback =
    r.state === "downloading" && r.bytesTotal > 0
      ? {
          bytes_done: r.bytesDone,
          bytes_total: r.bytesTotal,
          percent: Math.floor((r.bytesDone / r.bytesTotal) * 100),
          rate_bps: 0,
          eta_s: null,
        }
      : null;
  return {
    id: r.id,
    source: r.source,
    kind: r.kind,
    repo: r.repo,
    revision: r.revision,
    state: r.state,
    reason: r.reason,
    entry: r.entry,
    files: JSON.parse(r.files),
    size_bytes: r.bytesTotal,
    progress: r.state === "downloading" ? (extra.progress ?? fallback) : null,
    info,
    estimate: info ? estimate(info) : null,
    used_by: extra.usedBy ?? [],
    created_at: r.createdAt,
    updated_at: r.updatedAt,
    last_used_at: r.lastUsedAt,
  };
}

/** A model row by id, or 404. */
export async function getModelRow(db: Db, id: string): Promise<Row> {
  const r = await first(db.select().from(models).where(eq(models.id, id)));
  if (!r) throw notFound(`model "${id}"`);
  return r;
}

/** Every model row, oldest first. */
export function listModelRows(db: Db): Promise<Row[]> {
  return db.select().from(models).orderBy(asc(models.createdAt));
}

/** The row of a source, if the store has one. */
export function findBySource(db: Db, source: ModelSource): Promise<Row | undefined> {
  return first(
    db
      .select()
      .from(models)
      .where(eq(models.sourceKey, sourceKey(source))),
  );
}

/** Creates the row of a source (state `downloading`), or returns the one there is. */
export async function upsertModel(db: Db, spec: string, source: ModelSource): Promise<Row> {
  const existing = await findBySource(db, source);
  if (existing) return existing;
  const now = nowIso();
  const row: Row = {
    id: newId("mdl"),
    source: spec,
    sourceKey: sourceKey(source),
    kind: source.kind,
    repo: "repo" in source ? source.repo : null,
    revision: "revision" in source ? source.revision : null,
    state: "downloading",
    reason: null,
    entry: null,
    dir: null,
    files: "[]",
    bytesTotal: 0,
    bytesDone: 0,
    metadata: null,
    createdAt: now,
    updatedAt: now,
    lastUsedAt: null,
  };
  await db.insert(models).values(row).onConflictDoNothing();
  return (await findBySource(db, source))!;
}

/** Writes some columns of a model row (and `updated_at`). */
export async function updateModel(db: Db, id: string, set: Partial<Row>): Promise<void> {
  await db
    .update(models)
    .set({ ...set, updatedAt: nowIso() })
    .where(eq(models.id, id));
}

/**
 * The source a row was pulled from, to pull it again (a resumed download): as written, except a
 * `-hf owner/repo` pull, whose default-tag chain (Q4_K_M, Q8_0, the first GGUF) is kept.
 */
export function sourceOfRow(r: Row): ModelSource {
  if (r.kind === "hf-quant" && r.sourceKey.endsWith(":(default)") && r.repo)
    return {
      kind: "hf-quant",
      repo: r.repo,
      revision: r.sourceKey.slice(r.sourceKey.indexOf("@") + 1, r.sourceKey.lastIndexOf(":")),
      quant: DEFAULT_QUANTS[0],
      defaulted: true,
    };
  return parseSource(r.source);
}

/** Removes a model row. */
export async function deleteModelRow(db: Db, id: string): Promise<void> {
  await db.delete(models).where(eq(models.id, id));
}

/** The model a workload's command names (by source, or a local file given with -m), and its context. */
export interface WorkloadModel {
  key: string | null;
  localPath: string | null;
  /** Context tokens from the command (-c, --max-model-len, --context-length), when set. */
  context: number | undefined;
}

/**
 * What model a workload runs, read from its command. A command that cannot be read (a row written
 * before save-time checks, or by hand) names an unknown model: this never throws, so one bad row
 * cannot break model lists, pulls or placement for everyone else.
 */
export function workloadModel(w: Pick<Workload, "backend" | "config">): WorkloadModel {
  const unknown = { key: null, localPath: null, context: undefined };
  const command = typeof w.config.command === "string" ? w.config.command : "";
  let words: string[];
  let ref: ReturnType<typeof modelRefs>[number] | undefined;
  try {
    words = splitCommand(command);
    ref = modelRefs(w.backend, words)[0];
  } catch {
    return unknown;
  }
  const local = w.backend === "llamacpp" ? flagValue(words, ["-m", "--model"]) : undefined;
  const ctx = Number(flagValue(words, ["-c", "--ctx-size", "--max-model-len", "--context-length"]));
  return {
    key: ref ? sourceKey(ref.source) : null,
    localPath: !ref && local && local.startsWith("/") ? local : null,
    context: Number.isFinite(ctx) && ctx > 0 ? ctx : undefined,
  };
}

/**
 * The workloads that use each of `rows`, by model id. A workload uses the row its command names
 * (by source, or a local file by path) and every other row holding the same file: `-hf owner/repo`
 * (the default tag) and an explicit pull of that tag share one snapshot file.
 */
export async function usersOfModels(db: Db, rows: Row[]): Promise<Map<string, ModelView["used_by"]>> {
  const out = new Map<string, ModelView["used_by"]>();
  const all = await listModelRows(db);
  const byKey = new Map(all.map((r) => [r.sourceKey, r]));
  const byEntry = new Map<string, Row[]>();
  for (const r of all) if (r.entry) byEntry.set(r.entry, [...(byEntry.get(r.entry) ?? []), r]);
  const wanted = new Set(rows.map((r) => r.id));
  for (const w of await listAllWorkloads(db)) {
    const m = workloadModel(w);
    const named = (m.key && byKey.get(m.key)) || undefined;
    const entry = named?.entry ?? m.localPath;
    const used = new Set([...(named ? [named.id] : []), ...((entry && byEntry.get(entry)) || []).map((r) => r.id)]);
    for (const id of used) {
      if (!wanted.has(id)) continue;
      out.set(id, [...(out.get(id) ?? []), { id: w.id, project_slug: w.project_slug, slug: w.slug }]);
    }
  }
  return out;
}

/** The stored shape and the context of a workload's model, when the store knows it. */
export async function modelOfWorkload(
  db: Db,
  w: Pick<Workload, "backend" | "config">,
): Promise<{ info: ModelInfo; context: number | undefined; model: string } | null> {
  const m = workloadModel(w);
  const row = m.key
    ? await first(db.select().from(models).where(eq(models.sourceKey, m.key)))
    : m.localPath
      ? await first(db.select().from(models).where(eq(models.entry, m.localPath)))
      : undefined;
  if (!row?.metadata) return null;
  return { info: JSON.parse(row.metadata) as ModelInfo, context: m.context, model: row.source };
}
