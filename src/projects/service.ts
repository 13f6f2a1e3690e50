import { asc, eq, or } from "drizzle-orm";
import type { Db } from "../db";
import { projects } from "../db/schema";
import { conflict, notFound } from "../errors";
import { newId, nowIso, slugify } from "../ids";
import type { ProjectCreate } from "./schema";
import { audit, diffOf, fieldsOf } from "../audit/service";
import type { ProjectLimits, ProjectLimitsView } from "../limits/schema";

/** A project as the API shows it, with its token quotas and caps. */
export type ProjectView = { id: string; name: string; slug: string; created_at: string; limits: ProjectLimitsView };

type Row = typeof projects.$inferSelect;

/** Each limit of the API with its column. */
const COLUMNS = { tokens_per_day: "tokensPerDay", tokens_per_month: "tokensPerMonth", max_workloads: "maxWorkloads", max_replicas: "maxReplicas", model_bytes: "modelBytes" } as const satisfies Record<keyof ProjectLimits, keyof Row>;

const view = (p: Row): ProjectView => ({
  id: p.id,
  name: p.name,
  slug: p.slug,
  created_at: p.createdAt,
  limits: Object.fromEntries(Object.entries(COLUMNS).map(([k, c]) => [k, p[c]])) as ProjectLimitsView,
});

/** Sets (or, with `null`, removes) a project's token quotas and caps; fields not sent stay. */
export function setProjectLimits(db: Db, idOrSlug: string, limits: ProjectLimits): ProjectView {
  const p = getProject(db, idOrSlug);
  const set: Partial<typeof projects.$inferInsert> = {};
  for (const [k, c] of Object.entries(COLUMNS) as [keyof ProjectLimits, (typeof COLUMNS)[keyof ProjectLimits]][]) if (limits[k] !== undefined) set[c] = limits[k];
  if (Object.keys(set).length) db.update(projects).set(set).where(eq(projects.id, p.id)).run();
  const after = getProject(db, p.id);
  audit(db, "project.limits", { type: "project", id: p.id, label: p.slug }, diffOf(p.limits, after.limits));
  return after;
}

/**
 * Picks a free slug: the explicit one (409 when taken) or one derived from the name, suffixed
 * `-2`, `-3`… until free. `taken` answers whether a candidate is in use.
 * @example uniqueSlug("Chat Bot", undefined, (s) => s === "chat-bot") // → "chat-bot-2"
 */
export function uniqueSlug(name: string, explicit: string | undefined, taken: (slug: string) => boolean, what: string): string {
  if (explicit !== undefined) {
    if (taken(explicit)) throw conflict(`${what} slug "${explicit}" is already taken`, "slug_taken", "slug");
    return explicit;
  }
  const base = slugify(name);
  for (let i = 1; ; i++) {
    const suffix = i === 1 ? "" : `-${i}`;
    const candidate = base.slice(0, 63 - suffix.length).replace(/-+$/, "") + suffix;
    if (!taken(candidate)) return candidate;
  }
}

/** Creates a project; its slug comes from the name unless given. */
export function createProject(db: Db, input: ProjectCreate): ProjectView {
  const slug = uniqueSlug(input.name, input.slug, (s) => !!db.select({ id: projects.id }).from(projects).where(eq(projects.slug, s)).get(), "project");
  const row: Row = { id: newId("prj"), name: input.name, slug, createdAt: nowIso(), tokensPerDay: null, tokensPerMonth: null, maxWorkloads: null, maxReplicas: null, modelBytes: null };
  db.insert(projects).values(row).run();
  audit(db, "project.create", { type: "project", id: row.id, label: slug }, fieldsOf(row, ["name", "slug"]));
  return view(row);
}

/** All projects, oldest first. */
export function listProjects(db: Db): ProjectView[] {
  return db.select().from(projects).orderBy(asc(projects.createdAt)).all().map(view);
}

/** A project in the list: its fields plus how many workloads and live (unrevoked) keys it has. */
export type ProjectListed = ProjectView & { workload_count: number; key_count: number };

/** All projects, oldest first, with their workload and live-key counts (one query each). */
export function listProjectsWithCounts(db: Db): ProjectListed[] {
  const count = (sql: string) => new Map(db.$client.query<{ id: string; n: number }, []>(sql).all().map((r) => [r.id, r.n]));
  const workloadsOf = count("SELECT project_id AS id, COUNT(*) AS n FROM workloads GROUP BY project_id");
  const keysOf = count("SELECT project_id AS id, COUNT(*) AS n FROM api_keys WHERE revoked_at IS NULL GROUP BY project_id");
  return listProjects(db).map((p) => ({ ...p, workload_count: workloadsOf.get(p.id) ?? 0, key_count: keysOf.get(p.id) ?? 0 }));
}

/** A project by id or slug, or 404. */
export function getProject(db: Db, idOrSlug: string): ProjectView {
  const row = db.select().from(projects).where(or(eq(projects.id, idOrSlug), eq(projects.slug, idOrSlug))).get();
  if (!row) throw notFound(`project "${idOrSlug}"`);
  return view(row);
}

/** A project by slug, or undefined. */
export function findProjectBySlug(db: Db, slug: string): ProjectView | undefined {
  const row = db.select().from(projects).where(eq(projects.slug, slug)).get();
  return row && view(row);
}

/** Deletes a project with its workloads and keys (the keys stop working at once). */
export function deleteProject(db: Db, idOrSlug: string): ProjectView {
  const p = getProject(db, idOrSlug);
  db.delete(projects).where(eq(projects.id, p.id)).run();
  audit(db, "project.delete", { type: "project", id: p.id, label: p.slug });
  return p;
}
