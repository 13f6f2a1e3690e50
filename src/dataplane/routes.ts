import { Elysia } from "elysia";
import type { DataplaneDeps } from "./service";
import { keyOf } from "../auth/service";
import { messagesRoute } from "./messages";
import { forwardToWorkload, SYNC_ROUTES, workloadOf } from "./service";

/**
 * Inference may sit in the queue, or wait for a slow first token, longer than Bun's idle timeout:
 * the connection of an inference request never times out while it is open.
 */
function noIdleTimeout(server: { timeout(req: Request, seconds: number): void } | null, request: Request): void {
  server?.timeout(request, 0);
}

/** Data-plane routes (`/endpoint/<project_slug>/<workload_slug>/v1/...`, `ik_live_` keys). */
export const dataRoutes = (deps: DataplaneDeps) => {
  let app = new Elysia({ prefix: "/endpoint/:project/:workload", detail: { tags: ["data plane"] } })
    .get("/v1/models", async ({ params }) => {
      const w = await workloadOf(deps, params.project, params.workload);
      return {
        object: "list",
        data: [{ id: w.model_name, object: "model", created: Math.floor(Date.parse(w.created_at) / 1000), owned_by: w.project_slug }],
      };
    }, { detail: { summary: "The model this endpoint serves (OpenAI models.list)" } })
    .post("/v1/messages", ({ request, params, server }) => {
      noIdleTimeout(server, request);
      return messagesRoute(deps, request, params);
    }, {
      parse: "none",
      detail: { summary: "Anthropic Messages-style chat" },
    });
  for (const spec of SYNC_ROUTES) {
    app = app.post(`/v1/${spec.path}`, async ({ request, params, server }) => {
      noIdleTimeout(server, request);
      return forwardToWorkload(deps, spec, request, await workloadOf(deps, params.project, params.workload), keyOf(request).id);
    }, {
      parse: "none",
      detail: { summary: `Forwarded to the runtime's /v1/${spec.path}` },
    });
  }
  return app;
};
