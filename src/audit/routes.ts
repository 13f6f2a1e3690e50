import { Elysia } from "elysia";
import { eq, or } from "drizzle-orm";
import type { Db } from "../db";
import { validation } from "../errors";
import { first } from "../db/raw";
import { projects } from "../db/schema";
import { principalOf } from "../auth/service";
import { listAudit } from "./service";

/** What this module uses of the app's dependencies. */
interface Deps {
  db: Db;
}

/** `GET /admin/audit`: who changed what, newest first; a project member sees their projects' entries and their own. */
export const auditRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["admin"] } }).get(
    "/audit",
    async ({ query, request }) => {
      const q = query as Record<string, string | undefined>;
      const whole = (f: string, v: string | undefined) => {
        if (v === undefined || v === "") return undefined;
        if (!/^\d{1,15}$/.test(v)) throw validation(f, "must be a whole number");
        return Number(v);
      };
      const limit = whole("limit", q.limit);
      const before = whole("before", q.before);
      const who = principalOf(request);
      const scope = who.projectIds === "all" ? "all" : { projectIds: [...who.projectIds], actorId: who.userId };
      // A project by slug or id (a deleted project's id still finds its entries).
      const project = q.project
        ? ((
            await first(
              deps.db
                .select({ id: projects.id })
                .from(projects)
                .where(or(eq(projects.id, q.project), eq(projects.slug, q.project))),
            )
          )?.id ?? q.project)
        : undefined;
      const entries = await listAudit(deps.db, {
        since: q.since,
        until: q.until,
        actor: q.actor,
        target: q.target,
        action: q.action,
        project,
        limit,
        before,
        scope,
      });
      // The cursor for the next (older) page, when this one is full.
      const next_before =
        entries.length === Math.min(Math.max(limit ?? 100, 1), 1000) ? entries[entries.length - 1].id : null;
      return { entries, next_before };
    },
    {
      detail: {
        summary:
          "The audit log: every admin and control-plane change with its actor, its project and a diff, newest first (?since, ?until, ?actor, ?target, ?action, ?project=<slug or id>, ?limit up to 1000, ?before=<id> for the page after `next_before`); a project member sees their projects' entries and their own actions",
      },
    },
  );
