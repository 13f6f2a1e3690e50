import { Elysia } from "elysia";
import type { AppDeps } from "../app";
import { notFound } from "../errors";
import { findWorkload } from "../workloads/service";

/** Data-plane routes (`/endpoint/<project_slug>/<workload_slug>/v1/...`, `ik_live_` keys). */
export const dataRoutes = (deps: AppDeps) =>
  new Elysia({ prefix: "/endpoint/:project/:workload", detail: { tags: ["data plane"] } })
    .get("/v1/models", ({ params }) => {
      const w = findWorkload(deps.db, params.project, params.workload);
      if (!w) throw notFound(`workload "${params.project}/${params.workload}"`);
      return {
        object: "list",
        data: [{ id: w.model_name, object: "model", created: Math.floor(Date.parse(w.created_at) / 1000), owned_by: w.project_slug }],
      };
    }, { detail: { summary: "The model this endpoint serves (OpenAI models.list)" } });
