import { Elysia } from "elysia";
import type { Cluster } from "../cluster/cluster";
import type { Limiter } from "../limits/limiter";
import { callOf } from "../call";
import { keyOf } from "../auth/service";
import { workloadOf, type RouteBase } from "../dataplane/target";
import type { Viewer } from "./access";
import { deleteFile, fileContent, uploadFile, visibleFile, visibleFiles } from "./files";
import { BatchFinisher } from "./finish";
import { fileView, page, pageQuery } from "./schema";
import { cancelBatch, createBatch, getBatch, listBatches, type BatchDeps } from "./service";

/** What this module uses of the app's dependencies. */
interface Deps extends BatchDeps {
  limiter: Limiter;
  cluster: Cluster;
}

/** The base of a path's params: a workload's when the path names one. */
const baseOf = (params: { project: string; workload?: string }): RouteBase => ({
  project: params.project,
  workload: params.workload,
});

/** Who asks, on which base (the gate has checked the key against the path). */
async function viewerOf(deps: Deps, request: Request, base: RouteBase): Promise<Viewer> {
  const key = keyOf(request);
  return {
    key,
    project: base.project,
    workloadId: base.workload === undefined ? undefined : (await workloadOf(deps, base.project, base.workload)).id,
  };
}

/**
 * Runs a POST of this API: the body it read is given back to the buffered-bytes budget, and the
 * key's concurrency slot at once (a submission holds none; its requests' tokens count as they run).
 */
async function submission<T>(deps: Deps, request: Request, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } finally {
    deps.bodyBudget.release(request);
    callOf(request).ticket?.release();
  }
}

/** The Files and Batch routes of one base (`prefix`). */
function baseRoutes(deps: Deps, finisher: BatchFinisher, prefix: string) {
  const at = (params: unknown, request: Request) => viewerOf(deps, request, baseOf(params as RouteBase));
  return new Elysia({ prefix, detail: { tags: ["batch"] } })
    .post(
      "/v1/files",
      ({ request, params }) =>
        submission(deps, request, async () => uploadFile(deps, request, await at(params, request))),
      {
        parse: "none",
        detail: { summary: 'Upload a JSONL file of batch requests (OpenAI files.create, purpose "batch")' },
      },
    )
    .get(
      "/v1/files",
      async ({ request, params, query }) => {
        const v = await at(params, request);
        const all = (await visibleFiles(deps.db, v, query.purpose || undefined)).map(fileView);
        return page(query.order === "asc" ? all.reverse() : all, pageQuery(query, 10_000, 10_000));
      },
      { detail: { summary: "The project's files (OpenAI files.list)" } },
    )
    .get(
      "/v1/files/:file_id",
      async ({ request, params }) => fileView(await visibleFile(deps.db, await at(params, request), params.file_id)),
      {
        detail: { summary: "A file (OpenAI files.retrieve)" },
      },
    )
    .get(
      "/v1/files/:file_id/content",
      async ({ request, params }) => fileContent(deps, request, await at(params, request), params.file_id),
      {
        detail: { summary: "A file's bytes: an input, output or error file (OpenAI files.content)" },
      },
    )
    .delete(
      "/v1/files/:file_id",
      async ({ request, params }) => deleteFile(deps.db, await at(params, request), params.file_id),
      {
        detail: { summary: "Delete a file (OpenAI files.delete)" },
      },
    )
    .post(
      "/v1/batches",
      ({ request, params }) =>
        submission(deps, request, async () => {
          const base = baseOf(params as RouteBase);
          return createBatch(deps, request, base, await viewerOf(deps, request, base), finisher);
        }),
      { parse: "none", detail: { summary: "Run a file of requests as a batch of async jobs (OpenAI batches.create)" } },
    )
    .get(
      "/v1/batches",
      async ({ request, params, query }) => listBatches(deps.db, await at(params, request), pageQuery(query, 20, 100)),
      {
        detail: { summary: "The key's batches, newest first (OpenAI batches.list)" },
      },
    )
    .get(
      "/v1/batches/:batch_id",
      async ({ request, params }) => getBatch(deps.db, await at(params, request), params.batch_id, finisher),
      {
        detail: { summary: "A batch with its request counts and files (OpenAI batches.retrieve)" },
      },
    )
    .post(
      "/v1/batches/:batch_id/cancel",
      ({ request, params }) =>
        submission(deps, request, async () =>
          cancelBatch(deps.db, await at(params, request), params.batch_id, finisher),
        ),
      {
        parse: "none",
        detail: { summary: "Cancel a batch: queued requests end, running ones finish (OpenAI batches.cancel)" },
      },
    );
}

/**
 * The OpenAI Files and Batch APIs on a project's base URL (`/endpoint/<project>/v1/files`,
 * `…/v1/batches`) and on each workload's (`/endpoint/<project>/<workload>/v1/…`). The loop that
 * ends batches runs while the server listens.
 */
export const batchRoutes = (deps: Deps) => {
  const finisher = new BatchFinisher(deps);
  return new Elysia()
    .onStart(() => finisher.start())
    .onStop(() => finisher.stop())
    .use(baseRoutes(deps, finisher, "/endpoint/:project"))
    .use(baseRoutes(deps, finisher, "/endpoint/:project/:workload"));
};
