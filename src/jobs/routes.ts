import { Elysia } from "elysia";
import type { AppDeps } from "../app";
import { keyOf } from "../auth/service";
import { AppError, notFound } from "../errors";
import { readBodyLimited, utf8Text } from "../http";
import { resolveWorkload } from "../workloads/service";
import { workloadOf } from "../dataplane/service";
import { acceptEnvelope } from "./envelope";
import { KINDS } from "./kinds";
import { getJob, insertJob, listJobs } from "./service";

const disabled = (what: string) => new AppError(409, "endpoint_disabled", what);

/** The async surface of the data plane: submit a job (202 once it is on disk) and read it back. */
export const jobRoutes = (deps: AppDeps) =>
  new Elysia({ prefix: "/endpoint/:project/:workload", detail: { tags: ["async jobs"] } })
    .post("/jobs", async ({ request, params, set }) => {
      try {
        const w = workloadOf(deps, params.project, params.workload);
        const text = utf8Text(await readBodyLimited(request, deps.config.maxDataBodyBytes, deps.bodyBudget));
        const job = acceptEnvelope(text, w);
        if (!w.endpoints.jobs) throw disabled(`the jobs endpoint of ${w.project_slug}/${w.slug} is switched off`);
        const toggle = KINDS[job.kind].toggle;
        if (!w.endpoints[toggle]) throw disabled(`the ${toggle} endpoint of ${w.project_slug}/${w.slug} is switched off, so ${job.kind} jobs are refused`);
        deps.jobQuota.admit(w.project_id, job.body.byteLength);
        const id = insertJob(deps.db, w.id, keyOf(request).id, job);
        deps.jobs.wake(w.id);
        set.status = 202;
        return { job_id: id };
      } finally {
        deps.bodyBudget.release(request);
        deps.limiter.ticketOf(request)?.release(); // a submission holds no slot; its tokens count when it ends
      }
    }, { parse: "none", detail: { summary: "Submit an async job; answers 202 with its job_id once it is stored" } })
    .get("/jobs/:job_id", ({ params }) => {
      const w = workloadOf(deps, params.project, params.workload);
      const job = getJob(deps.db, w.id, params.job_id);
      if (!job) throw notFound(`job "${params.job_id}"`);
      return job;
    }, { detail: { summary: "A job: status, result data and each destination's delivery state" } });

/** Admin view of a workload's jobs, for the dashboard. */
export const adminJobRoutes = (deps: AppDeps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["admin"] } }).get("/workloads/:id/jobs", ({ params, query }) => {
    const w = resolveWorkload(deps.db, params.id);
    const limit = Math.min(Math.max(Number(query.limit ?? 50) || 50, 1), 500);
    const status = ["queued", "running", "completed", "failed"].includes(String(query.status)) ? (query.status as "queued") : undefined;
    return listJobs(deps.db, w.id, limit, status);
  }, { detail: { summary: "Recent jobs of a workload with their deliveries" } });
