import { and, asc, eq, gt, lte, sql } from "drizzle-orm";
import type { Db } from "../db";
import { batch, first } from "../db/raw";
import { deliveries, jobs, webhooks, workloads } from "../db/schema";
import { log } from "../log";
import type { AddressPolicy } from "./address";
import { postWebhook, type PostResult } from "./post";
import { deliveryHeaders } from "./sign";
import { realClock, SerialRunner, type Clock } from "../../agent/serial";

export { DEFAULT_SCHEDULE_MS, parseSchedule } from "./schedule";

/** Deliveries of a workload whose `jobs` toggle is off are held (the toggle map is JSON text). */
const jobsOn = (db: Db) =>
  db.engine === "postgres"
    ? sql`coalesce((${workloads.endpoints}::jsonb ->> 'jobs')::boolean, true)`
    : sql`coalesce(json_extract(${workloads.endpoints}, '$.jobs'), 1) != 0`;

/** How the delivery loop sends. */
export interface DeliveryOptions {
  /** The retry delays in force, read at each failure (`--webhook-retry-schedule` may change while serving). */
  schedule: () => number[];
  concurrency: number;
  policy: AddressPolicy;
  ca: string[] | undefined;
  /** How long after one look due deliveries are looked for again even when nothing woke the loop. */
  tickMs?: number;
  clock?: Clock;
  /** Sends one attempt (default: `postWebhook`, SSRF-checked HTTP; a fake receiver in unit tests). */
  post?: typeof postWebhook;
}

/** The exact body of a job delivery: `context` spliced in as the caller sent it. */
export function deliveryBody(event: string, jobId: string, context: string | null, data: string): string {
  return `{"event":${JSON.stringify(event)},"ts":${JSON.stringify(new Date().toISOString())},"job_id":${JSON.stringify(jobId)}${context !== null ? `,"context":${context}` : ""},"data":${data}}`;
}

/** The kind of the job row that carries an OpenAI batch's end event (`data` holds the batch object). */
export const BATCH_EVENT_KIND = "batch";

/** The exact body of a batch's end event (`batch.completed`, `batch.cancelled`…): the batch object as `data`. */
export function batchDeliveryBody(event: string, batchId: string, data: string): string {
  return `{"event":${JSON.stringify(event)},"ts":${JSON.stringify(new Date().toISOString())},"batch_id":${JSON.stringify(batchId)},"data":${data}}`;
}

/**
 * The durable delivery loop: takes due deliveries from SQLite (never those of a workload whose
 * `jobs` toggle is off), sends them concurrently up to a bound, records every attempt, and schedules
 * the next one per the retry schedule; after the last it is terminal. The schedule lives in SQLite,
 * so a restart resumes at the stored times.
 */
export class DeliveryLoop {
  private inflight = new Set<string>();
  private running = new Set<Promise<void>>();
  private stopped = false;
  /**
   * Looks for due deliveries one look at a time (wakes meanwhile coalesce), a tick after the last
   * and when the next one falls due; none before `start` (a host that does not lead never starts
   * it) and after `standBy`.
   */
  private readonly looks: SerialRunner;
  private readonly clock: Clock;
  private readonly post: typeof postWebhook;

  constructor(
    private db: Db,
    private opts: DeliveryOptions,
  ) {
    this.clock = opts.clock ?? realClock;
    this.post = opts.post ?? postWebhook;
    this.looks = new SerialRunner(() => this.look(), {
      every: opts.tickMs ?? 1000,
      clock: this.clock,
      onError: (e) => log.warn("could not look for due webhook deliveries", e),
    });
  }

  /** Starts looking for due deliveries (again, after `standBy`). */
  start(): void {
    if (this.stopped) return;
    this.looks.start();
    this.looks.wake();
  }

  /** Stops taking new deliveries (another host of the cluster leads now); attempts in flight finish. */
  standBy(): void {
    void this.looks.stop();
  }

  /** Wakes the loop when the next pending delivery falls due (retries of a short schedule). */
  private async scheduleNext(): Promise<void> {
    const next = (
      await first(
        this.db
          .select({
            at: sql<number | null>`min(${deliveries.nextAttemptAt})`.mapWith((v) => (v === null ? null : Number(v))),
          })
          .from(deliveries)
          .innerJoin(jobs, eq(jobs.id, deliveries.jobId))
          .innerJoin(workloads, eq(workloads.id, jobs.workloadId))
          .where(and(eq(deliveries.state, "pending"), gt(deliveries.nextAttemptAt, this.clock.now()), jobsOn(this.db))),
      )
    )?.at;
    if (next != null) this.looks.after(Math.max(20, next - this.clock.now() + 5));
  }

  /** Sends whatever is due now, up to the concurrency bound (soon: wakes of one turn make one look, never two at once). */
  wake(): void {
    this.looks.wake();
  }

  /** One look: the due deliveries, up to the concurrency bound, each attempted beside the others. */
  private async look(): Promise<void> {
    const room = this.opts.concurrency - this.inflight.size;
    if (room <= 0) return;
    await this.scheduleNext();
    const rows = await this.db
      .select({ id: deliveries.id })
      .from(deliveries)
      .innerJoin(jobs, eq(jobs.id, deliveries.jobId))
      .innerJoin(workloads, eq(workloads.id, jobs.workloadId))
      .where(and(eq(deliveries.state, "pending"), lte(deliveries.nextAttemptAt, this.clock.now()), jobsOn(this.db)))
      .orderBy(asc(deliveries.nextAttemptAt))
      .limit(room + this.inflight.size);
    const due = rows.filter((d) => !this.inflight.has(d.id)).slice(0, room);
    for (const { id } of due) {
      this.inflight.add(id);
      const p = this.attempt(id)
        .catch((e) => log.error(`delivery ${id} failed unexpectedly`, e))
        .finally(() => {
          this.inflight.delete(id);
          this.running.delete(p);
          this.wake();
        });
      this.running.add(p);
    }
  }

  private async attempt(id: string): Promise<void> {
    const row = await first(
      this.db
        .select({
          d: deliveries,
          job: { id: jobs.id, kind: jobs.kind, batchId: jobs.batchId, context: jobs.context, data: jobs.data },
          hook: { url: webhooks.url, secret: webhooks.secret },
        })
        .from(deliveries)
        .innerJoin(jobs, eq(jobs.id, deliveries.jobId))
        .innerJoin(webhooks, eq(webhooks.id, deliveries.webhookId))
        .where(eq(deliveries.id, id)),
    );
    // Read again now: a look that queried while the last attempt was being recorded may have seen it
    // still due; its next attempt waits for the schedule.
    if (!row || row.d.state !== "pending" || (row.d.nextAttemptAt ?? 0) > this.clock.now() || !row.job.data) return;
    // A batch's end event rides on a job row of its own kind (src/batches/finish.ts).
    const batchId = row.job.kind === BATCH_EVENT_KIND ? row.job.batchId : null;
    const body = batchId
      ? batchDeliveryBody(row.d.event, batchId, row.job.data)
      : deliveryBody(row.d.event, row.job.id, row.job.context, row.job.data);
    const headers = deliveryHeaders({
      secret: row.hook.secret,
      event: batchId ? "batch" : "job",
      ...(batchId ? { batchId } : { jobId: row.job.id }),
      messageId: `msg_${row.d.id}`,
      body,
    });
    const result = await this.post(row.hook.url, body, headers, this.opts.policy, this.opts.ca);
    if (this.stopped && !result.ok) return; // shutting down: the attempt is repeated after restart
    await this.record(row.d, result);
  }

  /**
   * Stores an attempt's outcome. A delivery that ended meanwhile (its destination deleted, its job
   * or workload removed) is left as it is: nothing to record, nothing to log.
   */
  private async record(d: typeof deliveries.$inferSelect, r: PostResult): Promise<void> {
    const n = d.attempts + 1;
    const schedule = this.opts.schedule();
    const terminal = !r.ok && n > schedule.length;
    const still = and(eq(deliveries.id, d.id), eq(deliveries.state, "pending"));
    const recorded = await first(this.db.select({ id: deliveries.id }).from(deliveries).where(still));
    if (!recorded) return;
    // Both writes hold only while the delivery is still pending (the attempt is copied from its row).
    await batch(this.db, [
      sql`INSERT INTO delivery_attempts (delivery_id, n, at, status_code, error, duration_ms) SELECT id, ${n}, ${new Date(this.clock.now()).toISOString()}, ${r.status_code}, ${r.error}, ${r.duration_ms} FROM deliveries WHERE id = ${d.id} AND state = 'pending'`,
      this.db
        .update(deliveries)
        .set({
          attempts: n,
          lastStatusCode: r.status_code,
          lastError: r.ok ? null : (r.error ?? `HTTP ${r.status_code}`),
          state: r.ok ? "delivered" : terminal ? "terminal" : "pending",
          deliveredAt: r.ok ? new Date(this.clock.now()).toISOString() : null,
          nextAttemptAt: r.ok || terminal ? null : this.clock.now() + schedule[n - 1],
        })
        .where(still),
    ]);
    if (terminal)
      log.warn(
        `delivery ${d.id} of job ${d.jobId} is terminal after ${n} attempts: ${r.error ?? `HTTP ${r.status_code}`}`,
      );
  }

  /** Stops sending; attempts in flight finish (a failure is not recorded, so it is retried after restart). */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.looks.stop();
    await Promise.allSettled([...this.running]);
  }
}
