import { Elysia } from "elysia";
import type { AppDeps } from "../app";
import { jsonBody } from "../http";
import { ProjectCreate } from "./schema";
import { createProject, deleteProject, listProjects } from "./service";

/** Admin routes for projects. */
export const projectRoutes = (deps: AppDeps) =>
  new Elysia({ prefix: "/admin/projects", detail: { tags: ["admin"] } })
    .post("", ({ body, set }) => {
      set.status = 201;
      return createProject(deps.db, body);
    }, { ...jsonBody(ProjectCreate), detail: { summary: "Create a project" } })
    .get("", () => listProjects(deps.db), { detail: { summary: "List projects" } })
    .delete("/:project", ({ params }) => deleteProject(deps.db, params.project), {
      detail: { summary: "Delete a project with its workloads and keys" },
    });
