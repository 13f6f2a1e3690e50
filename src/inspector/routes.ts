/**
 * The request inspector's admin routes: a workload's recent requests (filtered, paged), one
 * request's record and timeline, and its captured bodies. Bodies have their own path so access by
 * role can allow the timeline (viewers) without the bodies (operators and admins only).
 */
import { Elysia } from "elysia";
import type { Db } from "../db";
import { resolveWorkload } from "../workloads/service";
import { requestQuery } from "./schema";
import type { RequestSink } from "./record";
import { getBodies, getRequest, listRequests } from "./service";

/** What this module uses of the app's dependencies. */
interface Deps {
  db: Db;
  /** Written before each read, so a request that just ended is listed (and a link to it works at once). */
  inspector: RequestSink;
}

/** `GET /admin/workloads/:id/requests`, `GET /admin/requests/:id`, `GET /admin/requests/:id/bodies` (a project's list is in src/projects/routes.ts). */
export const inspectorRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["admin"] } })
    .get(
      "/workloads/:id/requests",
      async ({ params, query }) => {
        const q = requestQuery(query);
        const w = await resolveWorkload(deps.db, params.id);
        await deps.inspector.flush?.();
        return listRequests(deps.db, { workloadId: w.id }, q);
      },
      {
        detail: {
          summary:
            "A workload's recent requests, newest first (?status=ok|error|<status>|<error code>, ?key=<key id>, ?q=<request id, trace id or model>, ?since, ?limit up to 200, ?before=<next_before> for older ones)",
        },
      },
    )
    .get("/requests/:id", async ({ params }) => (await deps.inspector.flush?.(), getRequest(deps.db, params.id)), {
      detail: {
        summary:
          "One request: its figures, key, replica and timeline (spans, ms from arrival); `captured` says whether bodies were kept",
      },
    })
    .get(
      "/requests/:id/bodies",
      async ({ params }) => {
        await getRequest(deps.db, params.id);
        return getBodies(deps.db, params.id);
      },
      {
        detail: {
          summary:
            "A request's captured bodies (while its workload's capture was on): text for UTF-8 JSON, SSE and text, else base64",
        },
      },
    );
