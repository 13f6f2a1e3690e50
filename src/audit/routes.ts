import { Elysia } from "elysia";
import type { AppDeps } from "../deps";
import { listAudit } from "./service";

/** What this module uses of the app's dependencies. */
type Deps = Pick<AppDeps, "db">;

/** `GET /admin/audit`: who changed what, newest first. */
export const auditRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["admin"] } }).get("/audit", ({ query }) => {
    const q = query as Record<string, string | undefined>;
    return { entries: listAudit(deps.db, { since: q.since, until: q.until, actor: q.actor, target: q.target, action: q.action, limit: q.limit ? Number(q.limit) : undefined }) };
  }, { detail: { summary: "The audit log: every admin and control-plane change with its actor and a diff (?since, ?until, ?actor, ?target, ?action, ?limit)" } });
