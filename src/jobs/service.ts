import { and, asc, desc, eq, getTableColumns, inArray, lt, sql } from "drizzle-orm";
import type { Db } from "../db";
import { deliveries, jobs, webhooks } from "../db/schema";
import { live } from "../webhooks/service";
import { newId, nowIso } from "../ids";

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
export function deliveryViews(db: Db, jobIds: string[]): Map<string, DeliveryView[]> {
  const out = new Map<string, DeliveryView[]>();
  if (jobIds.length === 0) return out;
  const rows = db
    .select({ d: deliveries, url: webhooks.url })
    .from(deliveries)
    .innerJoin(webhooks, eq(webhooks.id, deliveries.webhookId))
    .where(inArray(deliveries.jobId, jobIds))
    .orderBy(asc(deliveries.createdAt))
    .all();
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
  ...(j.data ? { data: JSON.parse(j.data) } : {}),
  deliveries: ds,
});

/** A job of a workload, or undefined. */
export function getJob(db: Db, workloadId: string, jobId: string): JobView | undefined {
  const j = db.select().from(jobs).where(and(eq(jobs.id, jobId), eq(jobs.workloadId, workloadId))).get();
  return j && view(j, deliveryViews(db, [j.id]).get(j.id) ?? []);
}

/** The newest jobs of a workload (for the dashboard), optionally of one status. */
export function listJobs(db: Db, workloadId: string, limit = 50, status?: JobRow["status"]): JobView[] {
  const rows = db
    .select()
    .from(jobs)
    .where(and(eq(jobs.workloadId, workloadId), status ? eq(jobs.status, status) : undefined))
    .orderBy(desc(jobs.createdAt))
    .limit(limit)
    .all();
  const ds = deliveryViews(db, rows.map((r) => r.id));
  return rows.map((r) => view(r, ds.get(r.id) ?? []));
}

/** Workloads that have queued jobs (read once at start; the runner keeps track after that). */
export function workloadsWithQueuedJobs(db: Db): string[] {
  return db.selectDistinct({ w: jobs.workloadId }).from(jobs).where(eq(jobs.status, "queued")).all().map((r) => r.w);
}

/**
 * Takes up to `count` of the oldest queued jobs of a workload and marks them running, in one
 * statement; returned in queue order (creation time, then insertion order).
 */
export function claimJobs(db: Db, workloadId: string, count: number): JobRow[] {
  if (count <= 0) return [];
  const oldest = db
    .select({ id: jobs.id })
    .from(jobs)
    .where(and(eq(jobs.workloadId, workloadId), eq(jobs.status, "queued")))
    .orderBy(asc(jobs.createdAt))
    .limit(count);
  const rows = db
    .update(jobs)
    .set({ status: "running", startedAt: nowIso(), runs: sql`${jobs.runs} + 1` })
    .where(inArray(jobs.id, oldest))
    .returning({ ...getTableColumns(jobs), seq: sql<number>`rowid` })
    .all();
  rows.sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.seq - b.seq));
  return rows.map(({ seq: _seq, ...job }) => job);
}

/** Puts a running job back in the queue (its worker died; it will run again). */
export function requeueJob(db: Db, jobId: string): void {
  db.update(jobs).set({ status: "queued" }).where(and(eq(jobs.id, jobId), eq(jobs.status, "running"))).run();
}

/**
 * Stores a job's result and, in the same transaction, one pending delivery per destination of its
 * workload, due now — so a result is never stored without its deliveries.
 */
export function finishJob(db: Db, job: JobRow, ok: boolean, data: unknown): void {
  const now = nowIso();
  db.transaction((tx) => {
    tx.update(jobs).set({ status: ok ? "completed" : "failed", data: JSON.stringify(data), finishedAt: now }).where(eq(jobs.id, job.id)).run();
    const dests = tx.select({ id: webhooks.id }).from(webhooks).where(live(eq(webhooks.workloadId, job.workloadId))).all();
    for (const d of dests) {
      tx.insert(deliveries)
        .values({ id: newId("dlv"), jobId: job.id, webhookId: d.id, event: ok ? "job.completed" : "job.failed", state: "pending", nextAttemptAt: Date.now(), createdAt: now })
        .run();
    }
  });
}

/** After a crash or restart: jobs left running run again (at least once). Returns how many. */
export function recoverRunningJobs(db: Db): number {
  return db.update(jobs).set({ status: "queued" }).where(eq(jobs.status, "running")).returning({ id: jobs.id }).all().length;
}

/** A stored job row by id. */
export function jobRow(db: Db, id: string): JobRow | undefined {
  return db.select().from(jobs).where(eq(jobs.id, id)).get();
}

/**
 * Deletes finished jobs older than the retention whose deliveries are all over (delivered or
 * terminal). Returns how many were deleted.
 */
export function pruneJobs(db: Db, retentionMs: number): number {
  const cutoff = new Date(Date.now() - retentionMs).toISOString();
  return db
    .delete(jobs)
    .where(
      and(
        inArray(jobs.status, ["completed", "failed"]),
        lt(jobs.finishedAt, cutoff),
        sql`NOT EXISTS (SELECT 1 FROM deliveries WHERE deliveries.job_id = ${jobs.id} AND deliveries.state = 'pending')`,
      ),
    )
    .returning({ id: jobs.id })
    .all().length;
}
