/**
 * Ending batches. A batch ends once none of its requests is queued or running: its output and error
 * files are written, its counts and status stored, and its end event (`batch.completed`,
 * `batch.cancelled`, `batch.expired`, `batch.failed`) queued for every destination of the workloads
 * its requests ran on — all in one transaction, so a kill -9 at any moment leaves the batch either
 * running (and it is ended again after the restart) or ended with its files and events. The event
 * rides on a job row of kind `batch` and goes out through the webhook delivery loop like a job's
 * (same signing, retries, toggles). The leading host looks for batches to end a few times a second;
 * reading a batch ends it at once when it is due.
 */
import { and, asc, eq, inArray, isNull } from "drizzle-orm";
import { jobInserts } from "../jobs/service";
import type { Cluster } from "../cluster/cluster";
import type { Db } from "../db";
import { batch, first, type Statement } from "../db/raw";
import { batches, jobs } from "../db/schema";
import { nowIso } from "../ids";
import { log } from "../log";
import { deliveryStatements } from "../webhooks/service";
import { BATCH_EVENT_KIND } from "../webhooks/deliver";
import { fileWrites, sweepChunks } from "./content";
import { resultLine } from "./output";
import { ACTIVE, requestsOf, stopQueued, unfinished } from "./progress";
import { batchView, type BatchRow } from "./schema";

/** How often the leading host looks for batches to end. */
const TICK_MS = 500;
/** How often the leading host sweeps away file chunks no file owns (./content.ts). */
const SWEEP_MS = 60_000;

/** A batch's output or error file: its row and bytes (ids follow from the batch's, so ending it twice cannot write two). */
function resultFile(b: BatchRow, kind: "output" | "error", lines: string[], now: string) {
  if (!lines.length) return null;
  const content = Buffer.from(`${lines.join("\n")}\n`);
  const id = `file-${b.id.slice("batch_".length)}${kind === "output" ? "o" : "e"}`;
  return {
    row: {
      id,
      projectId: b.projectId,
      batchId: b.id,
      keyId: b.keyId,
      filename: `${b.id}_${kind}.jsonl`,
      purpose: "batch_output",
      bytes: content.byteLength,
      createdAt: now,
    },
    content,
  };
}

/** The stored batch as it ends: final status, counts, file ids and timestamps. */
function ended(
  b: BatchRow,
  ok: number,
  failed: number,
  lost: number,
  files: { output: string | null; error: string | null },
  now: string,
): BatchRow {
  const status: BatchRow["status"] =
    b.status === "cancelling"
      ? "cancelled"
      : b.expiredAt
        ? "expired"
        : lost > 0 && lost === b.total
          ? "failed"
          : "completed";
  const stamp = { cancelled: "cancelledAt", expired: "expiredAt", failed: "failedAt", completed: "completedAt" }[
    status as "completed"
  ] as "completedAt";
  const errors = lost
    ? JSON.stringify({
        object: "list",
        data: [
          {
            code: "requests_lost",
            message: `${lost === 1 ? "1 request was" : `${lost} requests were`} lost: the workload they were to run on was deleted`,
            param: null,
            line: null,
          },
        ],
      })
    : b.errors;
  return {
    ...b,
    status,
    errors,
    outputFileId: files.output,
    errorFileId: files.error,
    completed: ok,
    failed: failed + lost,
    finalizingAt: now,
    [stamp]: b[stamp] ?? now,
  };
}

/**
 * Ends a batch whose requests are all finished: writes its files, stores its end and queues its
 * events in one transaction. Does nothing while a request is still queued or running.
 */
export async function endBatch(db: Db, b: BatchRow): Promise<void> {
  if ((await unfinished(db, b.id)) > 0) return;
  const rows = await db
    .select({
      id: jobs.id,
      customId: jobs.customId,
      requestId: jobs.requestId,
      status: jobs.status,
      data: jobs.data,
      workloadId: jobs.workloadId,
    })
    .from(jobs)
    .where(requestsOf(b.id))
    .orderBy(asc(jobs.createdAt), asc(jobs.id));
  const out: string[] = [];
  const err: string[] = [];
  for (const r of rows) {
    const line = resultLine(r);
    (line.ok ? out : err).push(line.text);
  }
  const now = nowIso();
  const output = resultFile(b, "output", out, now);
  const error = resultFile(b, "error", err, now);
  const end = ended(
    b,
    out.length,
    err.length,
    Math.max(0, b.total - rows.length),
    { output: output?.row.id ?? null, error: error?.row.id ?? null },
    now,
  );
  const data = JSON.stringify(batchView(end));
  const events: Statement[] = [];
  for (const workloadId of new Set(rows.map((r) => r.workloadId))) {
    const carrier = `${b.id}.${workloadId}`;
    const fanOut = await deliveryStatements(db, workloadId, carrier, `batch.${end.status}`);
    if (!fanOut.length) continue;
    events.push(
      ...jobInserts(db, [
        {
          id: carrier,
          workloadId,
          keyId: b.keyId,
          kind: BATCH_EVENT_KIND,
          body: Buffer.alloc(0),
          contentType: "application/json",
          status: "completed",
          data,
          runs: 0,
          createdAt: now,
          finishedAt: now,
          batchId: b.id,
        },
      ]),
      ...fanOut,
    );
  }
  const { id: _id, ...fields } = end;
  await batch(db, [
    ...(output ? fileWrites(db, output.row, output.content) : []),
    ...(error ? fileWrites(db, error.row, error.content) : []),
    ...events,
    db
      .update(batches)
      .set(fields)
      .where(and(eq(batches.id, b.id), inArray(batches.status, ACTIVE))),
  ]);
}

/**
 * Moves active batches on: ends the queued requests of a cancelling batch and of one past its
 * completion window, and ends every batch whose requests are all finished. `settle` does it for
 * one batch now (a read of it); the loop does it for all on the leading host, and now and then
 * sweeps away file chunks no file owns.
 */
export class BatchFinisher {
  private timer?: ReturnType<typeof setInterval>;
  private stopped = false;
  private looking = false;
  private settling = new Map<string, Promise<void>>();
  private swept = 0;

  constructor(private deps: { db: Db; cluster: Cluster }) {}

  /** Starts looking for batches to end (also those a crash left running). */
  start(): void {
    this.stopped = false;
    clearInterval(this.timer);
    this.timer = setInterval(() => this.wake(), TICK_MS);
    this.wake();
  }

  /** Stops looking. */
  stop(): void {
    this.stopped = true;
    clearInterval(this.timer);
  }

  /** Looks at every active batch soon (on the leading host only; one look at a time). */
  wake(): void {
    if (this.stopped || this.looking || !this.deps.cluster.leading) return;
    this.looking = true;
    void this.look()
      .catch((e) => {
        if (!this.stopped) log.warn("could not look at running batches", e);
      })
      .finally(() => (this.looking = false));
  }

  private async look(): Promise<void> {
    if (Date.now() - this.swept >= SWEEP_MS) {
      this.swept = Date.now();
      await sweepChunks(this.deps.db);
    }
    const active = await this.deps.db.select().from(batches).where(inArray(batches.status, ACTIVE));
    for (const b of active) {
      if (this.stopped) return;
      await this.settle(b);
    }
  }

  /**
   * Moves one batch on now (once at a time per batch): see the class comment. Never fails: a
   * failure (another host ended it first, the store is busy) is logged and the next look retries.
   */
  settle(b: BatchRow): Promise<void> {
    let p = this.settling.get(b.id);
    if (!p) {
      p = this.settleNow(b)
        .catch((e) => {
          if (!this.stopped) log.warn(`could not move batch ${b.id} on`, e);
        })
        .finally(() => this.settling.delete(b.id));
      this.settling.set(b.id, p);
    }
    return p;
  }

  private async settleNow(seen: BatchRow): Promise<void> {
    const { db } = this.deps;
    // Read again: a cancel may have come in since `seen` was read.
    let b = await first(db.select().from(batches).where(eq(batches.id, seen.id)));
    if (!b || !ACTIVE.includes(b.status)) return;
    if (b.status === "cancelling") {
      await batch(db, [stopQueued(db, b.id, "batch_cancelled", "the batch was cancelled before this request ran")]);
    } else if (!b.expiredAt && Date.parse(b.expiresAt) <= Date.now()) {
      const now = nowIso();
      await batch(db, [
        db
          .update(batches)
          .set({ expiredAt: now })
          .where(and(eq(batches.id, b.id), isNull(batches.expiredAt))),
        stopQueued(db, b.id, "batch_expired", "this request could not run before the batch's completion window ended"),
      ]);
      b = { ...b, expiredAt: now };
    }
    await endBatch(db, b);
  }
}
