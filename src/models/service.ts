import { asc, eq } from "drizzle-orm";
import type { Db } from "../db";
import { models } from "../db/schema";
import { notFound } from "../errors";
import { newId, nowIso } from "../ids";
import { listAllWorkloads, type Workload } from "../workloads/service";
import { flagValue, splitCommand } from "../../agent/command";
import { modelRefs } from "../../agent/model-refs";
import { sourceKey, type ModelSource } from "../../agent/models/source";
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
export function modelView(r: Row, extra: { progress?: TransferProgress | null; usedBy?: ModelView["used_by"] } = {}): ModelView {
  const info = r.metadata ? (JSON.parse(r.metadata) as ModelInfo) : null;
  const fallback = r.state === "downloading" && r.bytesTotal > 0 ? { bytes_done: r.bytesDone, bytes_total: r.bytesTotal, percent: Math.floor((r.bytesDone / r.bytesTotal) * 100), rate_bps: 0, eta_s: null } : null;
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
export function getModelRow(db: Db, id: string): Row {
  const r = db.select().from(models).where(eq(models.id, id)).get();
  if (!r) throw notFound(`model "${id}"`);
  return r;
}

/** Every model row, oldest first. */
export function listModelRows(db: Db): Row[] {
  return db.select().from(models).orderBy(asc(models.createdAt)).all();
}

/** The row of a source, if the store has one. */
export function findBySource(db: Db, source: ModelSource): Row | undefined {
  return db.select().from(models).where(eq(models.sourceKey, sourceKey(source))).get();
}

/** Creates the row of a source (state `downloading`), or returns the one there is. */
export function upsertModel(db: Db, spec: string, source: ModelSource): Row {
  const existing = findBySource(db, source);
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
  db.insert(models).values(row).onConflictDoNothing().run();
  return findBySource(db, source)!;
}

/** Writes some columns of a model row (and `updated_at`). */
export function updateModel(db: Db, id: string, set: Partial<Row>): void {
  db.update(models).set({ ...set, updatedAt: nowIso() }).where(eq(models.id, id)).run();
}

/** Removes a model row. */
export function deleteModelRow(db: Db, id: string): void {
  db.delete(models).where(eq(models.id, id)).run();
}

/** The model a workload's command names (by source, or a local file given with -m), and its context. */
export interface WorkloadModel {
  key: string | null;
  localPath: string | null;
  /** Context tokens from the command (-c, --max-model-len, --context-length), when set. */
  context: number | undefined;
}

/** What model a workload runs, read from its command. */
export function workloadModel(w: Pick<Workload, "backend" | "config">): WorkloadModel {
  const command = typeof w.config.command === "string" ? w.config.command : "";
  let words: string[] = [];
  try {
    words = splitCommand(command);
  } catch {
    return { key: null, localPath: null, context: undefined };
  }
  const ref = modelRefs(w.backend, words)[0];
  const local = w.backend === "llamacpp" ? flagValue(words, ["-m", "--model"]) : undefined;
  const ctx = Number(flagValue(words, ["-c", "--ctx-size", "--max-model-len", "--context-length"]));
  return {
    key: ref ? sourceKey(ref.source) : null,
    localPath: !ref && local && local.startsWith("/") ? local : null,
    context: Number.isFinite(ctx) && ctx > 0 ? ctx : undefined,
  };
}

/** The workloads that use each model, by model id. */
export function usersOfModels(db: Db, rows: Row[]): Map<string, ModelView["used_by"]> {
  const out = new Map<string, ModelView["used_by"]>();
  const byKey = new Map(rows.map((r) => [r.sourceKey, r.id]));
  const byEntry = new Map(rows.filter((r) => r.entry).map((r) => [r.entry!, r.id]));
  for (const w of listAllWorkloads(db)) {
    const m = workloadModel(w);
    const id = (m.key && byKey.get(m.key)) || (m.localPath && byEntry.get(m.localPath));
    if (!id) continue;
    const list = out.get(id) ?? [];
    list.push({ id: w.id, project_slug: w.project_slug, slug: w.slug });
    out.set(id, list);
  }
  return out;
}

/** The stored shape and the context of a workload's model, when the store knows it. */
export function modelOfWorkload(db: Db, w: Pick<Workload, "backend" | "config">): { info: ModelInfo; context: number | undefined; model: string } | null {
  const m = workloadModel(w);
  const row = m.key ? db.select().from(models).where(eq(models.sourceKey, m.key)).get() : m.localPath ? db.select().from(models).where(eq(models.entry, m.localPath)).get() : undefined;
  if (!row?.metadata) return null;
  return { info: JSON.parse(row.metadata) as ModelInfo, context: m.context, model: row.source };
}
