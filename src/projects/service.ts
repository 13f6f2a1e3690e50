import { asc, eq, or, sql, type SQL } from "drizzle-orm";
import type { Db } from "../db";
import { first, rows } from "../db/raw";
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
const COLUMNS = {
  tokens_per_day: "tokensPerDay",
  tokens_per_month: "tokensPerMonth",
  max_workloads: "maxWorkloads",
  max_replicas: "maxReplicas",
  model_bytes: "modelBytes",
} as const satisfies Record<keyof ProjectLimits, keyof Row>;

const view = (p: Row): ProjectView => ({
  id: p.id,
  name: p.name,
  slug: p.slug,
  created_at: p.createdAt,
  limits: Object.fromEntries(Object.entries(COLUMNS).map(([k, c]) => [k, p[c]])) as ProjectLimitsView,
});

/** Sets (or, with `null`, removes) a project's token quotas and caps; fields not sent stay. */
export async function setProjectLimits(db: Db, idOrSlug: string, limits: ProjectLimits): Promise<ProjectView> {
  const p = await getProject(db, idOrSlug);
  const set: Partial<typeof projects.$inferInsert> = {};
  for (const [k, c] of Object.entries(COLUMNS) as [keyof ProjectLimits, (typeof COLUMNS)[keyof ProjectLimits]][])
    if (limits[k] !== undefined) set[c] = limits[k];
  if (Object.keys(set).length) await db.update(projects).set(set).where(eq(projects.id, p.id));
  const after = await getProject(db, p.id);
  await audit(db, "project.limits", { type: "project", id: p.id, label: p.slug }, diffOf(p.limits, after.limits));
  return after;
}

/**
 * Picks a free slug: the explicit one (409 when taken) or one derived from the name, suffixed
 * `-2`, `-3`… until free. `taken` answers whether a candidate is in use.
 * @example await uniqueSlug("Chat Bot", undefined, async (s) => s === "chat-bot") // → "chat-bot-2"
 */
export async function uniqueSlug(
  name: string,
  explicit: string | undefined,
  taken: (slug: string) => Promise<boolean>,
  what: string,
): Promise<string> {
  if (explicit !== undefined) {
    if (await taken(explicit)) throw conflict(`${what} slug "${explicit}" is already taken`, "slug_taken", "slug");
    return explicit;
  }
  const base = slugify(name);
  for (let i = 1; ; i++) {
    const suffix = i === 1 ? "" : `-${i}`;
    const candidate = base.slice(0, 63 - suffix.length).replace(/-+$/, "") + suffix;
    if (!(await taken(candidate))) return candidate;
  }
}

/** Creates a project; its slug comes from the name unless given. */
export async function createProject(db: Db, input: ProjectCreate): Promise<ProjectView> {
  const slug = await uniqueSlug(
    input.name,
    input.slug,
    async (s) => !!(await first(db.select({ id: projects.id }).from(projects).where(eq(projects.slug, s)))),
    "project",
  );
  const row: Row = {
    id: newId("prj"),
    name: input.name,
    slug,
    createdAt: nowIso(),
    tokensPerDay: null,
    tokensPerMonth: null,
    maxWorkloads: null,
    maxReplicas: null,
    modelBytes: null,
  };
  await db.insert(projects).values(row);
  await audit(db, "project.create", { type: "project", id: row.id, label: slug }, fieldsOf(row, ["name", "slug"]));
  return view(row);
}

/** All projects, oldest first. */
export async function listProjects(db: Db): Promise<ProjectView[]> {
  return (await db.select().from(projects).orderBy(asc(projects.createdAt))).map(view);
}

/** A project in the list: its fields plus how many workloads and live (unrevoked) keys it has. */
export type ProjectListed = ProjectView & { workload_count: number; key_count: number };

/** All projects, oldest first, with their workload and live-key counts (one query each). */
export async function listProjectsWithCounts(db: Db): Promise<ProjectListed[]> {
  const count = async (q: SQL) =>
    new Map((await rows<{ id: string; n: number | string }>(db, q)).map((r) => [r.id, Number(r.n)]));
  const workloadsOf = await count(sql`SELECT project_id AS id, COUNT(*) AS n FROM workloads GROUP BY project_id`);
  const keysOf = await count(
    sql`SELECT project_id AS id, COUNT(*) AS n FROM api_keys WHERE revoked_at IS NULL GROUP BY project_id`,
  );
  return (await listProjects(db)).map((p) => ({
    ...p,
    workload_count: workloadsOf.get(p.id) ?? 0,
    key_count: keysOf.get(p.id) ?? 0,
  }));
}

/** A project by id or slug, or 404. */
export async function getProject(db: Db, idOrSlug: string): Promise<ProjectView> {
  const row = await first(
    db
      .select()
      .from(projects)
      .where(or(eq(projects.id, idOrSlug), eq(projects.slug, idOrSlug))),
  );
  if (!row) throw notFound(`project "${idOrSlug}"`);
  return view(row);
}

/** A project by slug, or undefined. */
export async function findProjectBySlug(db: Db, slug: string): Promise<ProjectView | undefined> {
  const row = await first(db.select().from(projects).where(eq(projects.slug, slug)));
  return row && view(row);
}

/** Deletes a project with its workloads and keys (the keys stop working at once). */
export async function deleteProject(db: Db, idOrSlug: string): Promise<ProjectView> {
  const p = await getProject(db, idOrSlug);
  await db.delete(projects).where(eq(projects.id, p.id));
  await audit(db, "project.delete", { type: "project", id: p.id, label: p.slug });
  return p;
}
