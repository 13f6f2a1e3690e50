/**
 * Models pulled for a project's workload (the `tenant_models` table), as opposed to those the admin
 * pulled by hand: the project a model counts against, its `model_bytes` cap (when the pull starts
 * and when a workload naming a known model is saved), and what the model views show of it.
 */
import { eq } from "drizzle-orm";
import type { Db } from "../db";
import { first } from "../db/raw";
import { models, projects, tenantModels } from "../db/schema";
import { projectLimit } from "../errors";
import { nowIso } from "../ids";
import { capsOf, modelBytesOf, sizeText } from "../limits/project";
import { workloadModel, type ModelView } from "./service";

/** A model as the admin API shows it, with the project it was pulled for and when it will be collected. */
export type StoreModel = ModelView & {
  /** The project whose workload started its download; null when the admin pulled it by hand (or before this was recorded). */
  pulled_for: { project_id: string; project_slug: string | null } | null;
  /** When the collector removes it unless a workload uses it again (unused tenant models only; null otherwise). */
  removes_at: string | null;
};

/** What the store records of a model pulled for a project. */
export interface Tenancy {
  project_id: string;
  /** Null once the project is deleted. */
  project_slug: string | null;
  unused_since: string | null;
}

/** Records that a project's workload started a model's download: it counts against the project and may be collected. */
export async function markPulledFor(db: Db, modelId: string, projectId: string): Promise<void> {
  const now = nowIso();
  await db
    .insert(tenantModels)
    .values({ modelId, projectId, pulledAt: now, unusedSince: null })
    .onConflictDoUpdate({ target: tenantModels.modelId, set: { projectId, pulledAt: now, unusedSince: null } });
}

/** The admin pulled a model by hand: it is theirs from now on, counted against no project and never collected. */
export async function adoptModel(db: Db, modelId: string): Promise<void> {
  await db.delete(tenantModels).where(eq(tenantModels.modelId, modelId));
}

/** Notes since when no workload uses a tenant model (null: in use again). */
export async function setUnusedSince(db: Db, modelId: string, at: string | null): Promise<void> {
  await db.update(tenantModels).set({ unusedSince: at }).where(eq(tenantModels.modelId, modelId));
}

/** Every model pulled for a project, by model id. */
export async function tenancy(db: Db): Promise<Map<string, Tenancy>> {
  const rows = await db
    .select({ t: tenantModels, slug: projects.slug })
    .from(tenantModels)
    .leftJoin(projects, eq(projects.id, tenantModels.projectId));
  return new Map(
    rows.map((r) => [r.t.modelId, { project_id: r.t.projectId, project_slug: r.slug, unused_since: r.t.unusedSince }]),
  );
}

/**
 * Adds `pulled_for` and `removes_at` to model views; `afterMs` is the collection's grace period
 * (0: off). A tenant model no workload uses is removed `afterMs` after it was first seen unused
 * (from `now` when it has not been looked at yet).
 */
export async function withTenancy(
  db: Db,
  views: ModelView[],
  afterMs: number,
  now = Date.now(),
): Promise<StoreModel[]> {
  const t = await tenancy(db);
  return views.map((v) => {
    const x = t.get(v.id);
    const unusedFrom =
      x && afterMs > 0 && v.used_by.length === 0 ? (x.unused_since ? Date.parse(x.unused_since) : now) : null;
    return {
      ...v,
      pulled_for: x ? { project_id: x.project_id, project_slug: x.project_slug } : null,
      removes_at: unusedFrom === null ? null : new Date(unusedFrom + afterMs).toISOString(),
    };
  });
}

/** The sentence refusing `bytes` more of models for a project past its `model_bytes`, or null when they fit. */
async function overCap(
  db: Db,
  projectId: string,
  modelId: string,
  source: string,
  bytes: number,
): Promise<{ cap: number; message: string } | null> {
  const caps = await capsOf(db, projectId);
  if (caps.modelBytes === null) return null;
  const used = await modelBytesOf(db, projectId, modelId);
  if (used + bytes <= caps.modelBytes) return null;
  return {
    cap: caps.modelBytes,
    message: `project "${caps.slug}" is at its model_bytes limit (${caps.modelBytes} bytes, ${sizeText(caps.modelBytes)}): ${source} is ${sizeText(bytes)} and the models pulled for it already take ${sizeText(used)}`,
  };
}

/** Why pulling a model of `bytes` would pass the `model_bytes` cap of the project it is pulled for, or null (also for the admin's own models). */
export async function overModelBytes(db: Db, modelId: string, source: string, bytes: number): Promise<string | null> {
  const t = await first(db.select().from(tenantModels).where(eq(tenantModels.modelId, modelId)));
  return t ? ((await overCap(db, t.projectId, modelId, source, bytes))?.message ?? null) : null;
}

/**
 * Refuses (429 `project_limit`, at `config.command`) saving a workload whose model the store knows
 * and would pull anew for the project (it failed or was cancelled) when it is too big for its
 * `model_bytes`. A model in the store or on its way costs no new download; an unknown one is
 * checked when its pull starts.
 */
export async function requireModelRoom(
  db: Db,
  projectId: string,
  w: { backend: string; config: Record<string, unknown> },
): Promise<void> {
  const key = workloadModel(w).key;
  const row = key ? await first(db.select().from(models).where(eq(models.sourceKey, key))) : undefined;
  if (!row || row.bytesTotal <= 0 || row.state === "ready" || row.state === "downloading") return;
  const over = await overCap(db, projectId, row.id, row.source, row.bytesTotal);
  if (over) throw projectLimit("model_bytes", over.cap, over.message, "config.command");
}
