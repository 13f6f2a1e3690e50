import { Elysia } from "elysia";
import type { Db } from "../db";
import { jsonBody } from "../http";
import { ProjectCreate } from "./schema";
import { createProject, deleteProject, getProject, listProjectsWithCounts, setProjectLimits } from "./service";
import { ProjectPatch } from "../limits/schema";
import { projectUsage } from "../limits/project";
import { principalOf } from "../auth/service";
import { seesProject } from "../users/access";
import { listRequests } from "../inspector/service";
import { requestQuery } from "../inspector/schema";
import type { RequestSink } from "../inspector/record";

/** What this module uses of the app's dependencies. */
interface Deps {
  db: Db;
  /** The request inspector's sink, written before its list is read (a request just ended is listed). */
  inspector: RequestSink;
  /** Told after a change that places workloads again. */
  events: { workloadsChanged(): Promise<void> };
}

/** Admin routes for projects. */
export const projectRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin/projects", detail: { tags: ["admin"] } })
    .post(
      "",
      async ({ body, set }) => {
        set.status = 201;
        return createProject(deps.db, body);
      },
      { ...jsonBody(ProjectCreate), detail: { summary: "Create a project" } },
    )
    .get(
      "",
      async ({ request }) => {
        const who = principalOf(request);
        return (await listProjectsWithCounts(deps.db)).filter((p) => seesProject(who, p.id));
      },
      {
        detail: { summary: "List projects with their workload and live-key counts (a project member: their projects)" },
      },
    )
    .get(
      "/:project/requests",
      async ({ params, query }) => {
        const q = requestQuery(query);
        const p = await getProject(deps.db, params.project);
        await deps.inspector.flush?.();
        return listRequests(deps.db, { projectId: p.id }, q);
      },
      {
        detail: {
          summary:
            "A project's recent requests across its workloads, refusals included (a key's limit, a quota, a switched-off route), newest first; the same filters as a workload's list, and ?workload=<id>, ?source=api|playground",
        },
      },
    )
    .get(
      "/:project",
      async ({ params }) => {
        const p = await getProject(deps.db, params.project);
        return { ...p, usage: await projectUsage(deps.db, p.id) };
      },
      { detail: { summary: "A project with its token quotas, its caps and what it uses against them" } },
    )
    .patch("/:project", ({ params, body }) => setProjectLimits(deps.db, params.project, body.limits), {
      ...jsonBody(ProjectPatch),
      detail: {
        summary:
          "Set the project's token quotas per day and month and its caps (max_workloads, max_replicas, model_bytes); null removes one",
      },
    })
    .delete(
      "/:project",
      async ({ params }) => {
        const p = await deleteProject(deps.db, params.project);
        await deps.events.workloadsChanged();
        return p;
      },
      {
        detail: { summary: "Delete a project with its workloads and keys" },
      },
    );
