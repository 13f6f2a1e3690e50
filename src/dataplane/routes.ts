import { Elysia } from "elysia";
import type { DataplaneDeps } from "./service";
import { keyOf } from "../auth/service";
import { countTokensRoute, messagesRoute } from "./messages";
import { forwardOnProject, forwardToWorkload } from "./service";
import { DATA_ROUTES, OLLAMA_ROUTES, type DataRoute } from "./table";
import { workloadOf, type RouteBase } from "./target";
import { offeredModels } from "./offered";
import { responsesRoute } from "./responses";
import { ollamaRoute } from "./ollama";

/**
 * Inference may sit in the queue, or wait for a slow first token, longer than Bun's idle timeout:
 * the connection of an inference request never times out while it is open.
 */
function noIdleTimeout(server: { timeout(req: Request, seconds: number): void } | null, request: Request): void {
  server?.timeout(request, 0);
}

/** The base of a data-plane path's params: a workload's when the path names one. */
const baseOf = (params: { project: string; workload?: string }): RouteBase => ({
  project: params.project,
  workload: params.workload,
});

/** `GET /v1/models` (OpenAI models.list): what the key may call on this base and would be answered (./offered.ts). */
async function modelList(deps: DataplaneDeps, request: Request, base: RouteBase) {
  const models = await offeredModels(deps, request, base);
  return {
    object: "list",
    data: models.map(({ id, workloads, parent }) => ({
      id,
      object: "model",
      created: Math.floor(Math.min(...workloads.map((w) => Date.parse(w.created_at))) / 1000),
      owned_by: base.project,
      // A LoRA adapter names its base model, as vLLM lists its adapters.
      ...(parent ? { parent } : {}),
    })),
  };
}

/** How a row of ./table.ts is answered (its `serve`), once its connection may stay open as long as the answer takes. */
async function serve(deps: DataplaneDeps, route: DataRoute, request: Request, base: RouteBase): Promise<Response> {
  if (route.serve === "messages") return messagesRoute(deps, request, base);
  if (route.serve === "responses") return responsesRoute(deps, request, base);
  const key = keyOf(request);
  if (base.workload === undefined) return forwardOnProject(deps, route, request, base, key);
  return forwardToWorkload(deps, route, request, await workloadOf(deps, base.project, base.workload), key);
}

/** The API docs' summary of each kind of route. */
const SUMMARIES: Record<DataRoute["serve"], (route: DataRoute, onProject: boolean) => string> = {
  forward: (r, onProject) => `Forwarded to the runtime's /v1/${r.path}${onProject ? ", routed by model" : ""}`,
  messages: () => "Anthropic Messages-style chat",
  count_tokens: () => "Anthropic token counting for a Messages request",
  responses: () => "OpenAI Responses API (passed through, or translated to chat completions)",
};

/**
 * The routes one base serves. `prefix` is the workload's base (`/endpoint/:project/:workload`) or
 * the project's (`/endpoint/:project`, routed by `model`: ./target.ts).
 */
function baseRoutes(deps: DataplaneDeps, prefix: string, onProject: boolean) {
  const app = new Elysia({ prefix, detail: { tags: ["data plane"] } }).get(
    "/v1/models",
    ({ params, request }) => modelList(deps, request, baseOf(params as RouteBase)),
    {
      detail: {
        summary: onProject
          ? "The models this key may call on the project's base URL (OpenAI models.list)"
          : "The model this endpoint serves (OpenAI models.list)",
      },
    },
  );
  for (const route of DATA_ROUTES) {
    app.post(
      `/v1/${route.path}`,
      ({ request, params, server }) => {
        const base = baseOf(params as RouteBase);
        if (route.serve === "count_tokens") return countTokensRoute(deps, request, base);
        noIdleTimeout(server, request);
        return serve(deps, route, request, base);
      },
      { parse: "none", detail: { summary: SUMMARIES[route.serve](route, onProject) } },
    );
  }
  for (const r of OLLAMA_ROUTES) {
    const handler = ({
      request,
      params,
      server,
    }: {
      request: Request;
      params: unknown;
      server: { timeout(req: Request, seconds: number): void } | null;
    }) => {
      noIdleTimeout(server, request);
      return ollamaRoute(deps, request, baseOf(params as RouteBase), r.name);
    };
    const opts = { parse: "none" as const, detail: { summary: `Ollama API /api/${r.name}` } };
    // Elysia's route methods add to the app they are called on.
    if (r.method === "GET") app.get(`/api/${r.name}`, handler, opts);
    else app.post(`/api/${r.name}`, handler, opts);
  }
  return app;
}

/**
 * Data-plane routes, `ik_live_` keys: a project's base URL (`/endpoint/<project_slug>/v1/...`,
 * routed by `model`) and each workload's (`/endpoint/<project_slug>/<workload_slug>/v1/...`).
 */
export const dataRoutes = (deps: DataplaneDeps) =>
  new Elysia()
    .use(baseRoutes(deps, "/endpoint/:project", true))
    .use(baseRoutes(deps, "/endpoint/:project/:workload", false));
