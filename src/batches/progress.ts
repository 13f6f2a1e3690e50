/**
 * Where a batch's requests stand, read from their job rows: live request counts, whether any is
 * still to run, and the write that ends the ones still queued (a cancel, an expiry).
 */
import { and, count, eq, inArray, ne } from "drizzle-orm";
import { failQueued } from "../jobs/service";
import type { Db } from "../db";
import { jobs } from "../db/schema";
import { nowIso } from "../ids";
import { BATCH_EVENT_KIND } from "../webhooks/deliver";
import type { BatchRow, RequestCounts } from "./schema";

/** The statuses of a batch whose requests may still run or whose files are not written yet. */
export const ACTIVE: BatchRow["status"][] = ["validating", "in_progress", "finalizing", "cancelling"];

/** A batch's request rows (not the row that carries its end event). */
export const requestsOf = (batchId: string) => and(eq(jobs.batchId, batchId), ne(jobs.kind, BATCH_EVENT_KIND));

/** Live counts of the active batches among `rows` (finished batches keep their stored counts). */
export async function liveCounts(db: Db, rows: BatchRow[]): Promise<Map<string, RequestCounts>> {
  const active = rows.filter((b) => ACTIVE.includes(b.status));
  const out = new Map<string, RequestCounts>(active.map((b) => [b.id, { total: b.total, completed: 0, failed: 0 }]));
  if (!active.length) return out;
  const got = await db
    .select({ batchId: jobs.batchId, status: jobs.status, n: count() })
    .from(jobs)
    .where(
      and(
        inArray(
          jobs.batchId,
          active.map((b) => b.id),
        ),
        ne(jobs.kind, BATCH_EVENT_KIND),
        inArray(jobs.status, ["completed", "failed"]),
      ),
    )
    .groupBy(jobs.batchId, jobs.status);
  for (const g of got) {
    const c = out.get(g.batchId!)!;
    if (g.status === "completed") c.completed = Number(g.n);
    else c.failed = Number(g.n);
  }
  return out;
}

/** How many of a batch's requests are queued or running. */
export async function unfinished(db: Db, batchId: string): Promise<number> {
  const [r] = await db
    .select({ n: count() })
    .from(jobs)
    .where(and(requestsOf(batchId), inArray(jobs.status, ["queued", "running"])));
  return Number(r?.n ?? 0);
}

/**
 * The write that ends a batch's still-queued requests as failed with `code` (a request already
 * running finishes; a request put back in the queue later is ended by the next such write).
 */
export const stopQueued = (db: Db, batchId: string, code: string, message: string) =>
  failQueued(db, requestsOf(batchId), { code, message });
