import {
  and,
  asc,
  desc,
  eq,
  getTableColumns,
  inArray,
  isNotNull,
  isNull,
  lt,
  notInArray,
  or,
  sql,
  type SQL,
} from "drizzle-orm";
import type { Db } from "../db";
import { batch, first, type Statement } from "../db/raw";
import { deliveries, jobs, webhooks } from "../db/schema";
import { deliveryStatements } from "../webhooks/service";
import { nowIso } from "../ids";

type JobRow = typeof jobs.$inferSelect;

/** A job as `GET …/jobs/<job_id>` returns it. */
export interface JobView {
  job_id: string;
  kind: string;
  status: JobRow["status"];
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
  runs: number;
  /** The `x-request-id` of the submission that made the job. */
  request_id: string | null;
  data?: unknown;
  deliveries: DeliveryView[];
}

/** One destination's delivery state of a job. */
export interface DeliveryView {
  id: string;
  webhook_id: string;
  url: string;
  event: string;
  state: (typeof deliveries.$inferSelect)["state"];
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  next_attempt_at: string | null;
  delivered_at: string | null;
}

/** Deliveries of some jobs with their destination URLs. */
export async function deliveryViews(db: Db, jobIds: string[]): Promise<Map<string, DeliveryView[]>> {
  const out = new Map<string, DeliveryView[]>();
  if (jobIds.length === 0) return out;
  const rows = await db
    .select({ d: deliveries, url: webhooks.url })
    .from(deliveries)
    .innerJoin(webhooks, eq(webhooks.id, deliveries.webhookId))
    .where(inArray(deliveries.jobId, jobIds))
    .orderBy(asc(deliveries.createdAt));
  for (const { d, url } of rows) {
    const list = out.get(d.jobId) ?? [];
    list.push({
      id: d.id,
      webhook_id: d.webhookId,
      url,
      event: d.event,
      state: d.state,
      attempts: d.attempts,
      last_status_code: d.lastStatusCode,
      last_error: d.lastError,
      next_attempt_at: d.state === "pending" && d.nextAttemptAt ? new Date(d.nextAttemptAt).toISOString() : null,
      delivered_at: d.deliveredAt,
    });
    out.set(d.jobId, list);
  }
  return out;
}

const view = (j: JobRow, ds: DeliveryView[]): JobView => ({
  job_id: j.id,
  kind: j.kind,
  status: j.status,
  created_at: j.createdAt,
  started_at: j.startedAt,
  finished_at: j.finishedAt,
  runs: j.runs,
  request_id: j.requestId,
  ...(j.data ? { data: JSON.parse(j.data) } : {}),
  deliveries: ds,
});

/** A job of a workload, or undefined. */
export async function getJob(db: Db, workloadId: string, jobId: string): Promise<JobView | undefined> {
  const j = await first(
    db
      .select()
      .from(jobs)
      .where(and(eq(jobs.id, jobId), eq(jobs.workloadId, workloadId))),
  );
  return j && view(j, (await deliveryViews(db, [j.id])).get(j.id) ?? []);
}

/** The newest jobs of a workload (for the dashboard), optionally of one status. */
export async function listJobs(
  db: Db,
  workloadId: string,
  limit = 50,
  status?: JobRow["status"],
): Promise<(JobView & { batch: { id: string; custom_id: string | null } | null })[]> {
  const rows = await db
    .select()
    .from(jobs)
    .where(and(eq(jobs.workloadId, workloadId), status ? eq(jobs.status, status) : undefined))
    .orderBy(desc(jobs.createdAt))
    .limit(limit);
  const ds = await deliveryViews(
    db,
    rows.map((r) => r.id),
  );
  // The dashboard's list names the OpenAI batch a job is a request of, and the request's custom_id.
  return rows.map((r) => ({
    ...view(r, ds.get(r.id) ?? []),
    batch: r.batchId ? { id: r.batchId, custom_id: r.customId } : null,
  }));
}

/** Workloads that have queued jobs (read once at start; the runner keeps track after that). */
export async function workloadsWithQueuedJobs(db: Db): Promise<string[]> {
  return (await db.selectDistinct({ w: jobs.workloadId }).from(jobs).where(eq(jobs.status, "queued"))).map((r) => r.w);
}

/**
 * Takes up to `count` of the oldest queued jobs of a workload and marks them running by `hostId`, in one
 * statement; returned in queue order (creation time, then insertion order). On PostgreSQL several
 * hosts claim side by side: `FOR UPDATE SKIP LOCKED` gives each different jobs without waiting.
 */
export async function claimJobs(
  db: Db,
  workloadId: string,
  count: number,
  hostId: string | null = null,
): Promise<JobRow[]> {
  if (count <= 0) return [];
  const set = { status: "running" as const, startedAt: nowIso(), runs: sql`${jobs.runs} + 1`, claimedBy: hostId };
  if (db.engine === "postgres") {
    const oldest = sql`(SELECT id FROM jobs WHERE workload_id = ${workloadId} AND status = 'queued' ORDER BY created_at, id LIMIT ${count} FOR UPDATE SKIP LOCKED)`;
    const rows = await db.update(jobs).set(set).where(sql`${jobs.id} IN ${oldest}`).returning();
    return rows.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : 1));
  }
  const oldest = db
    .select({ id: jobs.id })
    .from(jobs)
    .where(and(eq(jobs.workloadId, workloadId), eq(jobs.status, "queued")))
    .orderBy(asc(jobs.createdAt))
    .limit(count);
  const rows = await db
    .update(jobs)
    .set(set)
    .where(inArray(jobs.id, oldest))
    .returning({ ...getTableColumns(jobs), seq: sql<number>`rowid` });
  rows.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.seq - b.seq));
  return rows.map(({ seq: _seq, ...job }) => job);
}

/** Puts a running job back in the queue (its worker died; it will run again). */
export async function requeueJob(db: Db, jobId: string): Promise<void> {
  await db
    .update(jobs)
    .set({ status: "queued", claimedBy: null })
    .where(and(eq(jobs.id, jobId), eq(jobs.status, "running")));
}

/**
 * Stores a job's result and, in the same transaction, one pending delivery per destination of its
 * workload, due now — so a result is never stored without its deliveries. A destination deleted
 * between reading them and the commit has its delivery cancelled in that same transaction.
 */
export async function finishJob(db: Db, job: JobRow, ok: boolean, data: unknown): Promise<void> {
  // A request of an OpenAI batch has no event of its own: the batch's goes out when it ends.
  const fanOut = job.batchId
    ? []
    : await deliveryStatements(db, job.workloadId, job.id, ok ? "job.completed" : "job.failed");
  await batch(db, [
    db
      .update(jobs)
      .set({ status: ok ? "completed" : "failed", data: JSON.stringify(data), finishedAt: nowIso() })
      .where(eq(jobs.id, job.id)),
    ...fanOut,
  ]);
}

/**
 * After a crash or restart (or at a clean stop): the jobs this host left running run again (at least
 * once), and any no host claimed (from before claims were recorded). Returns how many.
 */
export async function recoverRunningJobs(db: Db, hostId: string | null = null): Promise<number> {
  const mine = hostId ? or(eq(jobs.claimedBy, hostId), isNull(jobs.claimedBy)) : undefined;
  return (
    await db
      .update(jobs)
      .set({ status: "queued", claimedBy: null })
      .where(and(eq(jobs.status, "running"), mine))
      .returning({ id: jobs.id })
  ).length;
}

/** Job rows per insert statement (well under both dialects' bound-parameter limits). */
const ROWS_PER_INSERT = 500;

/** The inserts of new job rows (a batch's requests, its event carriers), to run in the caller's transaction (`batch`). */
export function jobInserts(db: Db, rows: (typeof jobs.$inferInsert)[]): Statement[] {
  const out: Statement[] = [];
  for (let i = 0; i < rows.length; i += ROWS_PER_INSERT)
    out.push(db.insert(jobs).values(rows.slice(i, i + ROWS_PER_INSERT)));
  return out;
}

/**
 * The write that ends as failed, with `error`, every job still queued that `where` selects (a job
 * already running finishes; one put back in the queue later is ended by the next such write).
 */
export function failQueued(db: Db, where: SQL | undefined, error: { code: string; message: string }): Statement {
  const now = nowIso();
  return db
    .update(jobs)
    .set({
      status: "failed",
      finishedAt: now,
      data: JSON.stringify({ status: "error", metrics: { queue_ms: 0, run_ms: 0, runs: 0 }, error }),
    })
    .where(and(where, eq(jobs.status, "queued")));
}

/**
 * The jobs a host no longer alive was running go back to the queue (at least once): every running
 * job claimed by a host not in `alive`. Returns how many, and the workloads they belong to (each once).
 */
export async function requeueJobsOfGoneHosts(db: Db, alive: string[]): Promise<{ jobs: number; workloads: string[] }> {
  const back = await db
    .update(jobs)
    .set({ status: "queued", claimedBy: null })
    .where(
      and(
        eq(jobs.status, "running"),
        isNotNull(jobs.claimedBy),
        alive.length ? notInArray(jobs.claimedBy, alive) : undefined,
      ),
    )
    .returning({ workloadId: jobs.workloadId });
  return { jobs: back.length, workloads: [...new Set(back.map((j) => j.workloadId))] };
}

/**
 * Deletes finished jobs older than the retention whose deliveries are all over (delivered or
 * terminal). Returns how many were deleted.
 */
export async function pruneJobs(db: Db, retentionMs: number): Promise<number> {
  const cutoff = new Date(Date.now() - retentionMs).toISOString();
  const gone = await db
    .delete(jobs)
    .where(
      and(
        inArray(jobs.status, ["completed", "failed"]),
        lt(jobs.finishedAt, cutoff),
        sql`NOT EXISTS (SELECT 1 FROM deliveries WHERE deliveries.job_id = ${jobs.id} AND deliveries.state = 'pending')`,
      ),
    )
    .returning({ id: jobs.id });
  return gone.length;
}
