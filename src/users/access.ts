/**
 * Who a request to /admin is (its principal) and the one access rule of the admin plane: a table of
 * paths, each saying what a role needs to read and to change there and how the path names its
 * project. The admin token and admin users pass; operators and viewers reach only their projects
 * (anything of another project is 404, as if it did not exist) and only what their role allows (403
 * `forbidden_role`). A path the table does not know is refused to everyone but admins. Only admins
 * are the operator of the machine: workers, join tokens and launch commands beyond the launch policy
 * are theirs; every other principal is a tenant (see `isMachineOperator`).
 */
import { eq, or } from "drizzle-orm";
import type { Db } from "../db";
import { first } from "../db/raw";
import {
  apiKeys,
  assignments,
  deliveries,
  jobs,
  projectMembers,
  projects,
  requestLog,
  users,
  webhooks,
  workloads,
} from "../db/schema";
import { AppError, notFound } from "../errors";
import type { Role } from "./schema";

/** Who a request to /admin is: the admin token (or a session opened with it), or a user. */
export interface Principal {
  kind: "admin_token" | "user";
  role: Role;
  userId: string | null;
  email: string | null;
  /** The projects it may see: all (admins), or the user's memberships. */
  projectIds: Set<string> | "all";
  /** The public id of the dashboard session it came with (`ses_…`), null for a bearer token. */
  sessionId: string | null;
}

/** The principal of the admin token, over a bearer header or a session opened with it. */
export const adminTokenPrincipal = (sessionId: string | null): Principal => ({
  kind: "admin_token",
  role: "admin",
  userId: null,
  email: null,
  projectIds: "all",
  sessionId,
});

/** A user's principal, read from the store now (so a changed role or membership applies at once); undefined when the user is gone. */
export async function userPrincipal(db: Db, userId: string, sessionId: string | null): Promise<Principal | undefined> {
  const u = await first(
    db.select({ id: users.id, email: users.email, role: users.role }).from(users).where(eq(users.id, userId)),
  );
  if (!u) return undefined;
  const projectIds =
    u.role === "admin"
      ? "all"
      : new Set(
          (
            await db
              .select({ p: projectMembers.projectId })
              .from(projectMembers)
              .where(eq(projectMembers.userId, userId))
          ).map((r) => r.p),
        );
  return { kind: "user", role: u.role, userId: u.id, email: u.email, projectIds, sessionId };
}

/**
 * Whether the principal is the operator of the machine (the admin token, an admin user): its launch
 * commands are trusted. Everyone else is a tenant, held to the launch policy and its open workers.
 */
export const isMachineOperator = (p: Principal): boolean => p.role === "admin";

/** Whether the principal may see things of `projectId`. */
export const seesProject = (p: Principal, projectId: string | null | undefined): boolean =>
  p.projectIds === "all" || (!!projectId && p.projectIds.has(projectId));

/** What a role needs on a path: anyone signed in, a member who may look, an operator, an admin, or the user the path names. */
type Need = "any" | "view" | "operate" | "admin" | "self";

/** What the id in a path is, to find the project it belongs to. */
type Find = "project" | "workload" | "key" | "webhook" | "assignment" | "delivery" | "job" | "request";

/** One row of the table: reads (GET, HEAD) and changes need one thing each, unless a method says otherwise. */
interface Rule {
  path: RegExp;
  read: Need;
  write: Need;
  /** Per-method needs that override read/write. */
  methods?: Record<string, Need>;
  /** How the first group of `path` is looked up to find the project. */
  find?: Find;
  /** What is refused, in words ("create or delete projects"), for the 403 message. */
  what: string;
}

/** Paths of captured request and answer bodies (the request inspector): operators only, never viewers. */
const BODIES = "(?:/.*)?/bod(?:y|ies)(?:/.*)?";

/** Paths of what a workload's runtimes and jobs produced (runtime logs, job results): operators only, like bodies. */
const OUTPUTS = "/(?:logs|jobs)";

/** The access table of the admin plane (non-admins); first match wins. */
const RULES: Rule[] = [
  { path: /^\/admin\/me$/, read: "any", write: "admin", what: "change this" },
  { path: /^\/admin\/sessions$/, read: "admin", write: "admin", what: "sign everyone out" },
  {
    path: /^\/admin\/(info|policy|projector|webhooks\/delivery|audit|usage|metrics\/series)$/,
    read: "view",
    write: "admin",
    what: "change this",
  },
  { path: /^\/admin\/launch-preview$/, read: "operate", write: "operate", what: "preview launch commands" },
  { path: /^\/admin\/settings$/, read: "operate", write: "admin", what: "change the settings" },
  { path: /^\/admin\/projects$/, read: "view", write: "admin", what: "create projects" },
  {
    path: /^\/admin\/projects\/([^/]+)$/,
    find: "project",
    read: "view",
    write: "admin",
    what: "edit or delete projects",
  },
  {
    path: /^\/admin\/projects\/([^/]+)\/(keys|workloads|requests)$/,
    find: "project",
    read: "view",
    write: "operate",
    what: "change this",
  },
  {
    path: /^\/admin\/projects\/([^/]+)\/files\/[^/]+\/content$/,
    find: "project",
    read: "operate",
    write: "admin",
    what: "read batch files (they hold prompts and answers)",
  },
  {
    path: /^\/admin\/projects\/([^/]+)\/batches(\/[^/]+)?$/,
    find: "project",
    read: "view",
    write: "admin",
    what: "change this",
  },
  { path: /^\/admin\/keys\/([^/]+)$/, find: "key", read: "view", write: "operate", what: "change keys" },
  {
    path: new RegExp(`^/admin/workloads/([^/]+)${BODIES}$`),
    find: "workload",
    read: "operate",
    write: "operate",
    what: "read captured bodies",
  },
  {
    path: new RegExp(`^/admin/workloads/([^/]+)${OUTPUTS}$`),
    find: "workload",
    read: "operate",
    write: "operate",
    what: "read runtime logs or job results",
  },
  {
    path: /^\/admin\/workloads\/([^/]+)(\/.*)?$/,
    find: "workload",
    read: "view",
    write: "operate",
    what: "change workloads",
  },
  {
    path: new RegExp(`^/admin/requests/([^/]+)${BODIES}$`),
    find: "request",
    read: "operate",
    write: "operate",
    what: "read captured bodies",
  },
  { path: /^\/admin\/requests\/([^/]+)(\/.*)?$/, find: "request", read: "view", write: "operate", what: "change this" },
  { path: /^\/admin\/jobs\/([^/]+)(\/.*)?$/, find: "job", read: "view", write: "operate", what: "change jobs" },
  {
    path: /^\/admin\/assignments\/([^/]+)(\/retry)?$/,
    find: "assignment",
    read: "view",
    write: "operate",
    what: "change assignments",
  },
  {
    path: /^\/admin\/webhooks\/([^/]+)(\/test)?$/,
    find: "webhook",
    read: "view",
    write: "operate",
    what: "change webhooks",
  },
  {
    path: /^\/admin\/deliveries\/([^/]+)\/attempts$/,
    find: "delivery",
    read: "view",
    write: "operate",
    what: "change deliveries",
  },
  {
    path: /^\/admin\/workers\/join-tokens(\/[^/]+)?$/,
    read: "admin",
    write: "admin",
    what: "manage join tokens (workers belong to the admin)",
  },
  {
    path: /^\/admin\/cloud\/(workers|pods)$/,
    read: "admin",
    write: "admin",
    what: "manage cloud GPU workers (they spend the operator's provider account)",
  },
  {
    path: /^\/admin\/workers(\/[^/]+)?$/,
    read: "view",
    write: "admin",
    what: "add, delete or open workers to projects",
  },
  {
    path: /^\/admin\/models\/discover$/,
    read: "admin",
    write: "admin",
    what: "list the model files found on this machine (the machine is the admin's)",
  },
  { path: /^\/admin\/models(\/.*)?$/, read: "view", write: "operate", what: "change models" },
  { path: /^\/admin\/users$/, read: "admin", write: "admin", what: "manage users" },
  {
    path: /^\/admin\/users\/([^/]+)$/,
    read: "self",
    write: "self",
    methods: { DELETE: "admin" },
    what: "manage other users",
  },
  {
    path: /^\/admin\/users\/([^/]+)\/sessions(\/[^/]+)?$/,
    read: "self",
    write: "self",
    what: "manage other users' sessions",
  },
];

/** The project a path's id belongs to (id and slug), or undefined when there is no such thing. */
async function projectOf(db: Db, find: Find, id: string): Promise<{ id: string; slug: string } | undefined> {
  const p = { id: projects.id, slug: projects.slug };
  const viaWorkload = <T extends typeof webhooks | typeof assignments | typeof jobs>(t: T, idCol: T["id"]) =>
    first(
      db
        .select(p)
        .from(t)
        .innerJoin(workloads, eq(workloads.id, t.workloadId))
        .innerJoin(projects, eq(projects.id, workloads.projectId))
        .where(eq(idCol, id)),
    );
  switch (find) {
    case "project":
      return first(
        db
          .select(p)
          .from(projects)
          .where(or(eq(projects.id, id), eq(projects.slug, id))),
      );
    case "workload":
      return first(
        db
          .select(p)
          .from(workloads)
          .innerJoin(projects, eq(projects.id, workloads.projectId))
          .where(eq(workloads.id, id)),
      );
    case "key":
      return first(
        db.select(p).from(apiKeys).innerJoin(projects, eq(projects.id, apiKeys.projectId)).where(eq(apiKeys.id, id)),
      );
    case "request":
      return first(
        db
          .select(p)
          .from(requestLog)
          .innerJoin(projects, eq(projects.id, requestLog.projectId))
          .where(eq(requestLog.id, id)),
      );
    case "webhook":
      return viaWorkload(webhooks, webhooks.id);
    case "assignment":
      return viaWorkload(assignments, assignments.id);
    case "job":
      return viaWorkload(jobs, jobs.id);
    case "delivery":
      return first(
        db
          .select(p)
          .from(deliveries)
          .innerJoin(webhooks, eq(webhooks.id, deliveries.webhookId))
          .innerJoin(workloads, eq(workloads.id, webhooks.workloadId))
          .innerJoin(projects, eq(projects.id, workloads.projectId))
          .where(eq(deliveries.id, id)),
      );
  }
}

/** 403 `forbidden_role`: what the role cannot do and who can. */
function refused(role: Role, need: Need, what: string, project: string | undefined): AppError {
  const of = project ? ` of project "${project}"` : "";
  if (need !== "operate")
    return new AppError(403, "forbidden_role", `your role (${role}) cannot ${what}; an admin can`);
  if (what.startsWith("change"))
    return new AppError(
      403,
      "forbidden_role",
      `your role (${role}) can only look; an operator or admin${of} can change this`,
    );
  return new AppError(403, "forbidden_role", `your role (${role}) cannot ${what}; an operator or admin${of} can`);
}

/**
 * Applies the access table to a request of a principal: returns when allowed, throws 404
 * `not_found` for a thing of a project it is not a member of and 403 `forbidden_role` for what
 * its role cannot do. Admins pass without a lookup.
 */
export async function authorize(db: Db, principal: Principal, method: string, path: string): Promise<void> {
  if (principal.role === "admin") return;
  const rule = RULES.find((r) => r.path.test(path));
  if (!rule)
    throw new AppError(
      403,
      "forbidden_role",
      `your role (${principal.role}) cannot use ${method} ${path}; an admin can`,
    );
  const reading = method === "GET" || method === "HEAD";
  const need = rule.methods?.[method] ?? (reading ? rule.read : rule.write);
  const group = rule.path.exec(path)?.[1];
  let id = group;
  try {
    id = group === undefined ? undefined : decodeURIComponent(group);
  } catch {
    throw new AppError(400, "invalid_path", "the URL path has a malformed percent-escape");
  }
  if (need === "self") {
    if (id !== principal.userId) throw refused(principal.role, "admin", rule.what, undefined);
    return;
  }
  let project: { id: string; slug: string } | undefined;
  if (rule.find && id !== undefined) {
    project = await projectOf(db, rule.find, id);
    if (!project || !seesProject(principal, project.id)) throw notFound(`${rule.find} "${id}"`);
  }
  if (need === "any" || need === "view" || (need === "operate" && principal.role === "operator")) return;
  throw refused(principal.role, need, rule.what, project?.slug);
}

/** Project ids a list shows the principal: every project ("all"), or its own. */
export const projectScope = (p: Principal): string[] | "all" => (p.projectIds === "all" ? "all" : [...p.projectIds]);
