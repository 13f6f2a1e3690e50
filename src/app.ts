import { Elysia } from "elysia";
import { openapi } from "@elysiajs/openapi";
import { z } from "zod";
import { setRetryHint } from "./errors";
import { errorPlugin } from "./error-plugin";
import { callOf } from "./call";
import { parseJsonBody } from "./http";
import { modelRoutes } from "./models/routes";
import { adapterAdminRoutes, adapterControlRoutes } from "./adapters/routes";
import { controlRoutes as replicaControlRoutes } from "./scaling/routes";
import { actorOf, authenticateRequest, bodyDeadline } from "./auth/service";
import { actAs } from "./audit/service";
import { auditRoutes } from "./audit/routes";
import { usageRoutes } from "./usage/routes";
import { projectRoutes } from "./projects/routes";
import { keyRoutes } from "./keys/routes";
import { adminWorkloadRoutes, controlRoutes } from "./workloads/routes";
import { cloudRoutes } from "./cloud/routes";
import { inspectorRoutes } from "./inspector/routes";
import { adminRoutes, loginRoute } from "./admin/routes";
import { oidcRoutes } from "./auth/oidc-routes";
import { userRoutes } from "./users/routes";
import { dataRoutes } from "./dataplane/routes";
import { batchRoutes } from "./batches/routes";
import { adminBatchRoutes } from "./batches/admin-routes";
import { workerRoutes } from "./workers/routes";
import { agentRoutes } from "./agents/routes";
import { joinTokenRoutes } from "./agents/join-token-routes";
import { adminExtraRoutes } from "./admin/extras";
import { playgroundRoutes } from "./admin/playground";
import { adminJobRoutes, jobRoutes } from "./jobs/routes";
import { webhookRoutes } from "./webhooks/routes";
import { settingsRoutes } from "./settings/routes";
import { uiRoutes } from "./ui/routes";
import { docsRoutes } from "./docs/routes";
import { andThen } from "./db/memo";

import type { AppDeps } from "./deps";

export type { AppDeps, AppEvents } from "./deps";

const JSON_PLANES = /^\/(api|admin)(\/|$)/;

/** Builds the inferd HTTP app (no listen): error mapping, the auth gate, body parsing, every route. */
export function createApp(deps: AppDeps) {
  return (
    new Elysia()
      .use(
        errorPlugin((request, err) => {
          // A request that fails before it ends in a meter gives its key's slot back here; a
          // data-plane one is counted as refused for its key and recorded with its reason.
          const call = callOf(request);
          call.ticket?.release();
          if (!call.timeline || call.timeline.ended) return;
          const key = call.key;
          deps.metering.refused(
            {
              keyId: key?.id ?? null,
              projectId: key?.projectId ?? call.timeline.projectId,
              status: err.status,
              code: err.code,
              message: err.message,
            },
            call.timeline,
          );
        }),
      )
      .onRequest(({ request }) => {
        // The request's one object (../call.ts): its ids, arrival and, as they are learnt, its key,
        // principal, ticket and timeline. Made here unless the HTTPS listener made it.
        const call = callOf(request);
        const data = call.path.startsWith("/endpoint/");
        // The request's timeline (the inspector's record, a trace when tracing is on) starts at its
        // arrival; its record is keyed on inferd's own id, the client's id is kept beside it.
        if (data) call.timeline = deps.tracing.begin(request, call.path, call.arrivedAt, call.own, call.id);
        // Who changes what, for the audit log: entered now (before any wait, so the rest of the
        // request sees it), filled in once authentication has said who it is.
        const actor = data ? undefined : actAs({ type: "anonymous", label: "anonymous", requestId: call.id });
        return andThen(authenticateRequest(deps, request, call.path), () => {
          if (actor) Object.assign(actor, actorOf(request));
          // The key's limits, next to authentication: inference and job submissions count.
          if (data && request.method === "POST")
            return andThen(deps.limiter.admit(call.key!, request), () => {
              // Its timeline's `auth` span ends here (a mark, made a span at the request's end).
              if (call.timeline) call.timeline.authedAt = performance.now();
            });
        });
      })
      // Every answer carries its request id (`request-id` too, where Anthropic's SDK reads it), a
      // data-plane error its retry hint; a limited key's
      // x-ratelimit-* headers go on every answer it gets.
      .onAfterHandle({ as: "global" }, ({ request, response, set }) => {
        const { id, path, ticket } = callOf(request);
        if (response instanceof Response) {
          response.headers.set("x-request-id", id);
          response.headers.set("request-id", id);
          if (response.status >= 400 && path.startsWith("/endpoint/")) setRetryHint(response.headers, response.status);
          if (ticket) for (const k in ticket.headers) response.headers.set(k, ticket.headers[k]);
        } else {
          set.headers["x-request-id"] = set.headers["request-id"] = id;
          if (ticket) Object.assign(set.headers, ticket.headers);
        }
      })
      // Our parser handles every body: JSON planes get limits and clear errors; elsewhere (the data
      // plane) the body is left unread (null marks it handled) for the route to stream or forward.
      // Sign-in, open to anyone, must send its body within a bounded time.
      .onParse({ as: "global" }, ({ request, path }) =>
        JSON_PLANES.test(path) ? parseJsonBody(request, deps.config.maxBodyBytes, bodyDeadline(path)) : null,
      )
      .use(
        openapi({
          path: "/docs",
          // The viewer is ours (src/docs): pinned and bundled, no CDN.
          provider: null,
          mapJsonSchema: { zod: z.toJSONSchema },
          documentation: {
            info: {
              title: "inferd",
              version: deps.version,
              description: "Workloads, inference endpoints and async jobs on your own GPUs.",
            },
          },
        }),
      )
      .use(docsRoutes())
      .get("/healthz", () => ({ status: "ok", version: deps.version }))
      .use(adminRoutes(deps))
      .use(loginRoute(deps))
      .use(oidcRoutes(deps))
      .use(userRoutes(deps))
      .use(adminExtraRoutes(deps))
      .use(playgroundRoutes(deps))
      .use(projectRoutes(deps))
      .use(keyRoutes(deps))
      .use(adminWorkloadRoutes(deps))
      .use(cloudRoutes(deps))
      .use(inspectorRoutes(deps))
      .use(controlRoutes(deps))
      .use(joinTokenRoutes(deps))
      .use(workerRoutes(deps))
      .use(modelRoutes(deps))
      .use(adapterAdminRoutes(deps))
      .use(adapterControlRoutes(deps))
      .use(replicaControlRoutes(deps))
      .use(auditRoutes(deps))
      .use(usageRoutes(deps))
      .use(webhookRoutes(deps))
      .use(settingsRoutes(deps))
      .use(adminJobRoutes(deps))
      .use(agentRoutes(deps))
      .use(jobRoutes(deps))
      .use(batchRoutes(deps))
      .use(adminBatchRoutes(deps))
      .use(dataRoutes(deps))
      .use(uiRoutes())
  );
}

/** The app's type, for tests and the server. */
export type App = ReturnType<typeof createApp>;
