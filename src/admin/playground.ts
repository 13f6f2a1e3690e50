import { Elysia } from "elysia";
import { z } from "zod";
import { jsonBody } from "../http";
import { forwardToWorkload, type DataplaneDeps } from "../dataplane/service";
import { dataRoute } from "../dataplane/table";
import { resolveWorkload } from "../workloads/service";
import { callOf } from "../call";
import type { Tracing } from "../tracing/timeline";

/** What the dashboard's playground sends for each kind of workload. */
const Chat = z.looseObject({ messages: z.array(z.unknown()).min(1) });
const Embeddings = z.looseObject({ input: z.union([z.string().min(1), z.array(z.string().min(1)).min(1).max(64)]) });
const Rerank = z.looseObject({ query: z.string().min(1), documents: z.array(z.string().min(1)).min(1).max(100) });

const route = (path: string) => dataRoute(path)!;

/**
 * The dashboard's playground (admin only, under `/admin`): chat completions (streaming too),
 * embeddings and rerank against a workload's replicas without a data-plane key, through the same
 * queue and meter as the data plane (usage under no key). A workload that only takes async jobs
 * (a reranker) may be tried here directly, without making a job or webhook deliveries. Each try
 * has its request id, as every request does (src/app.ts): sent to the runtime and on the answer
 * and its error as `x-request-id`, so the dashboard can show it and link its record in the request
 * inspector (source `playground`).
 */
export const playgroundRoutes = (deps: DataplaneDeps & { tracing: Tracing }) => {
  const forward = async (path: string, request: Request, id: string, body: unknown) => {
    // A playground try is in the request inspector as any request is, marked as the playground's.
    const call = callOf(request);
    const tl = deps.tracing.begin(request, `POST /v1/${path}`, call.arrivedAt, call.own, call.id);
    tl.source = "playground";
    call.timeline = tl;
    return forwardToWorkload(deps, route(path), request, await resolveWorkload(deps.db, id), null, body, true);
  };
  return new Elysia({ prefix: "/admin/workloads/:id", detail: { tags: ["admin"] } })
    .post(
      "/chat",
      ({ params, request, server, body }) => {
        server?.timeout(request, 0);
        return forward("chat/completions", request, params.id, body);
      },
      {
        ...jsonBody(Chat),
        detail: { summary: "Playground: chat completions (streaming too) without a data-plane key" },
      },
    )
    .post("/embeddings", ({ params, request, body }) => forward("embeddings", request, params.id, body), {
      ...jsonBody(Embeddings),
      detail: { summary: "Playground: embeddings of up to 64 texts without a data-plane key" },
    })
    .post("/rerank", ({ params, request, body }) => forward("rerank", request, params.id, body), {
      ...jsonBody(Rerank),
      detail: { summary: "Playground: up to 100 documents ranked against a query without a data-plane key" },
    });
};
