import { Elysia } from "elysia";
import type { Db } from "../db";
import type { Config } from "../config";
import type { ByteBudget } from "../http";
import type { Limiter } from "../limits/limiter";
import type { JobQuota } from "./quota";
import { keyOf } from "../auth/service";
import { AppError, notFound } from "../errors";
import { bodyChunks, readBodyLimited, utf8Text } from "../http";
import { nowIso } from "../ids";
import { resolveWorkload, type Workload } from "../workloads/service";
import { workloadOf } from "../dataplane/target";
import { callOf } from "../call";
import { parseTraceparent, traceparentOf } from "../tracing/context";
import { acceptBatch, acceptNdjson, batchFormat } from "./batch";
import { acceptEnvelope, checkJobsOn, checkKindOn, type AcceptedJob } from "./envelope";
import { jobIntake, type GroupCommit, type JobInsert } from "./intake";
import { getJob, listJobs } from "./service";

/** What this module uses of the app's dependencies. */
interface Deps {
  db: Db;
  config: Config;
  bodyBudget: ByteBudget;
  jobQuota: JobQuota;
  limiter: Limiter;
  /** Wakes the job runner (on this host, and through the store on the others). */
  jobs: { wake(workloadId?: string): void };
}

/**
 * Commits accepted jobs through the group-commit writer; resolves with their ids once they are on
 * disk. Ids are UUIDv7 (time-ordered, 62 random bits): new rows land at the end of the primary-key
 * index instead of dirtying a random page each, which about halves the pages a commit writes.
 */
async function store(
  deps: Deps,
  intake: GroupCommit<JobInsert>,
  w: Workload,
  request: Request,
  accepted: AcceptedJob[],
): Promise<string[]> {
  const keyId = keyOf(request).id;
  const createdAt = nowIso();
  const requestId = callOf(request).id;
  const traceparent = submittersTrace(request);
  const rows = accepted.map((job) => ({
    id: Bun.randomUUIDv7(),
    workloadId: w.id,
    keyId,
    kind: job.kind,
    body: job.body,
    contentType: job.contentType,
    context: job.context,
    requestId,
    traceparent,
    createdAt,
  }));
  await intake.submit(rows);
  deps.jobs.wake(w.id);
  return rows.map((r) => r.id);
}

/** The submitter's `traceparent`, kept with its jobs when well-formed (written back in canonical form), else null. */
function submittersTrace(request: Request): string | null {
  const trace = parseTraceparent(request.headers.get("traceparent"), null);
  return trace?.parentId ? traceparentOf(trace, trace.parentId) : null;
}

/** Reads a job request's body as text (data-plane limit and buffer budget; the caller releases it). */
async function bodyText(deps: Deps, request: Request): Promise<string> {
  return utf8Text(await readBodyLimited(request, deps.config.maxDataBodyBytes, deps.bodyBudget));
}

/**
 * The async surface of the data plane: submit a job or a batch of them (202 once they are on disk)
 * and read one back. All submissions go through one group-commit writer per app.
 */
export const jobRoutes = (deps: Deps) => {
  const intake = jobIntake(deps.db);
  return (
    new Elysia({ prefix: "/endpoint/:project/:workload", detail: { tags: ["async jobs"] } })
      .post(
        "/jobs",
        async ({ request, params, set }) => {
          try {
            const w = await workloadOf(deps, params.project, params.workload);
            const job = acceptEnvelope(await bodyText(deps, request), w);
            checkJobsOn(w);
            checkKindOn(w, job.kind);
            await deps.jobQuota.admit(w.project_id, job.body.byteLength);
            const [id] = await store(deps, intake, w, request, [job]);
            set.status = 202;
            return { job_id: id };
          } finally {
            deps.bodyBudget.release(request);
            callOf(request).ticket?.release(); // a submission holds no slot; its tokens count when it ends
          }
        },
        { parse: "none", detail: { summary: "Submit an async job; answers 202 with its job_id once it is stored" } },
      )
      // The router has no escape for ":" inside a segment: "/jobs:suffix" is "/jobs" then a parameter
      // that takes the rest of the segment, so only ":batch" is this route.
      .post(
        "/jobs:suffix",
        async ({ request, params, set }) => {
          if ((params as Record<string, string>).suffix !== ":batch")
            throw new AppError(404, "not_found", `no route for POST ${new URL(request.url).pathname}`);
          try {
            const w = await workloadOf(deps, params.project, params.workload);
            checkJobsOn(w);
            const format = batchFormat(request.headers.get("content-type"));
            const jobs =
              format === "ndjson"
                ? await acceptNdjson(bodyChunks(request, deps.config.maxDataBodyBytes), w, {
                    take: (n) => deps.bodyBudget.take(request, n),
                    give: (n) => deps.bodyBudget.give(request, n),
                  })
                : acceptBatch(await bodyText(deps, request), w);
            await deps.jobQuota.admit(
              w.project_id,
              jobs.reduce((n, j) => n + j.body.byteLength, 0),
              `the batch (${jobs.length} jobs)`,
            );
            const ids = await store(deps, intake, w, request, jobs);
            set.status = 202;
            if (format === "json") return { job_ids: ids };
            return new Response(ids.map((id) => `{"job_id":"${id}"}\n`).join(""), {
              status: 202,
              headers: { "content-type": "application/x-ndjson" },
            });
          } finally {
            deps.bodyBudget.release(request);
            callOf(request).ticket?.release();
          }
        },
        {
          parse: "none",
          detail: {
            summary:
              "Submit up to 1000 async jobs at once (JSON array or NDJSON); all or none are stored, ids in order",
          },
        },
      )
      .get(
        "/jobs/:job_id",
        async ({ params }) => {
          const w = await workloadOf(deps, params.project, params.workload);
          const job = await getJob(deps.db, w.id, params.job_id);
          if (!job) throw notFound(`job "${params.job_id}"`);
          return job;
        },
        { detail: { summary: "A job: status, result data and each destination's delivery state" } },
      )
  );
};

/** Admin view of a workload's jobs, for the dashboard. */
export const adminJobRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["admin"] } }).get(
    "/workloads/:id/jobs",
    async ({ params, query }) => {
      const w = await resolveWorkload(deps.db, params.id);
      const limit = Math.min(Math.max(Number(query.limit ?? 50) || 50, 1), 500);
      const status = ["queued", "running", "completed", "failed"].includes(String(query.status))
        ? (query.status as "queued")
        : undefined;
      return listJobs(deps.db, w.id, limit, status);
    },
    { detail: { summary: "Recent jobs of a workload with their deliveries" } },
  );
