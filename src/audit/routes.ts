import { Elysia } from "elysia";
import type { AppDeps } from "../app";
import { listAudit } from "./service";

/** `GET /admin/audit`: who changed what, newest first. */
export const auditRoutes = (deps: AppDeps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["admin"] } }).get("/audit", ({ query }) => {
    const q = query as Record<string, string | undefined>;
    return { entries: listAudit(deps.db, { since: q.since, until: q.until, actor: q.actor, target: q.target, action: q.action, limit: q.limit ? Number(q.limit) : undefined }) };
  }, { detail: { summary: "The audit log: every admin and control-plane change with its actor and a diff (?since, ?until, ?actor, ?target, ?action, ?limit)" } });
