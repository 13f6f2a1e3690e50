/**
 * The request inspector's store writer: the sink the data plane and the job runner hand finished
 * requests to. `add` only pushes to memory (the request path never waits on the store); the server
 * flushes what gathered, about once a second and at shutdown, into `request_log` and
 * `request_bodies` (on SQLite by a worker thread, ../db/writer.ts, in transactions of SLICE
 * records, one prepared insert run per row, about three
 * times cheaper than building multi-row inserts; on PostgreSQL with multi-row inserts, one round trip
 * per chunk). Memory is bounded: past `maxPending` unwritten records the
 * oldest are dropped and counted. Retention (`pruneRequests`) follows the jobs' (`--job-retention-hours`).
 */
import { and, count, desc, eq, getTableColumns, getTableName, gt, lte } from "drizzle-orm";
import type { SQLiteTable } from "drizzle-orm/sqlite-core";
import { sqliteOf, type Db } from "../db";
import { batch, type Statement } from "../db/raw";
import { requestBodies, requestLog } from "../db/schema";
import { log } from "../log";
import type { CapturedBodies, RequestRecord, RequestSink } from "./record";
import { plural } from "../words";
import { jsonSafe, SqliteWriter, type TableRows } from "../db/writer";

/** Unwritten records kept in memory at most; beyond, the oldest are dropped. */
export const MAX_PENDING = 5_000;

/**
 * Records written per SQLite transaction (by a worker thread: ../db/writer.ts): a busy second's
 * records go in slices, so the store's write lock is never held long by the inspector.
 */
const SLICE = 200;

/** Rows per insert statement (well under both dialects' bound-parameter limits). */
const CHUNK = 400;

/** Rows kept per workload at most (the oldest go first), besides the retention by age. */
export const MAX_ROWS_PER_WORKLOAD = 100_000;

/** A byte array as the store's blob columns take it. */
const blob = (b: Uint8Array | null): Buffer | null =>
  b === null ? null : Buffer.from(b.buffer, b.byteOffset, b.byteLength);

/** A duration for the store's whole-millisecond columns (rounded alike, so a part never exceeds its whole). */
const ms = (v: number | null): number | null => (v === null ? null : Math.round(v));

/**
 * The `request_log` row of a record, its JSON columns (`spans`, `fell_back_from`) as text; with
 * `structured`, as the values themselves, for the SQLite writer to print on its own thread.
 */
function logRow(r: RequestRecord, structured = false): typeof requestLog.$inferInsert {
  const json: (v: unknown) => string = structured ? (v) => v as string : JSON.stringify;
  return {
    id: r.id,
    requestId: r.requestId,
    at: new Date(r.at).toISOString(),
    workloadId: r.workloadId,
    projectId: r.projectId,
    keyId: r.keyId,
    kind: r.kind,
    route: r.route,
    model: r.model,
    status: r.status,
    errorCode: r.errorCode,
    errorMessage: r.errorMessage,
    source: r.source,
    fellBackFrom: r.fellBackFrom.length ? json(r.fellBackFrom) : null,
    tokensIn: r.tokensIn,
    tokensOut: r.tokensOut,
    queueMs: ms(r.queueMs),
    ttftMs: ms(r.ttftMs),
    totalMs: Math.round(r.totalMs),
    assignmentId: r.assignmentId,
    workerId: r.workerId,
    hostId: r.hostId,
    traceId: r.traceId,
    spans: json(r.spans),
    captured: !!r.bodies,
  };
}

/** The `request_bodies` row of a record that has bodies. */
function bodiesRow(r: RequestRecord & { bodies: CapturedBodies }): typeof requestBodies.$inferInsert {
  const b = r.bodies;
  return {
    requestId: r.id,
    workloadId: r.workloadId,
    at: new Date(r.at).toISOString(),
    requestType: b.requestType,
    request: blob(b.request),
    responseType: b.responseType,
    response: blob(b.response),
    truncated: b.truncated,
  };
}

const withBodies = (r: RequestRecord): r is RequestRecord & { bodies: CapturedBodies } => !!r.bodies;

/** PostgreSQL: the statements writing `records`, log rows then the bodies of those that have some; a repeated id is kept once. */
function writes(db: Db, records: RequestRecord[]): Statement[] {
  const out: Statement[] = [];
  for (let i = 0; i < records.length; i += CHUNK) {
    const part = records.slice(i, i + CHUNK);
    out.push(
      db
        .insert(requestLog)
        .values(part.map((r) => logRow(r)))
        .onConflictDoNothing(),
    );
    const bodies = part.filter(withBodies).map(bodiesRow);
    if (bodies.length) out.push(db.insert(requestBodies).values(bodies).onConflictDoNothing());
  }
  return out;
}

/**
 * SQLite: the insert of one row of `table` (every column, in the table's order; a repeated key is
 * kept once) and a function giving rows' values in that order, mapped as the columns map them, with
 * whether they are all plain (text, finite numbers, null: the writer then sends them as JSON text).
 * The `json` columns' values are arrays or objects the writer prints (../db/writer.ts `json`).
 */
function rowValues<T extends SQLiteTable>(
  table: T,
  json: (keyof T["$inferInsert"])[] = [],
): { sql: string; rows: (rows: T["$inferInsert"][]) => TableRows } {
  const cols = Object.entries(getTableColumns(table));
  const sql = `INSERT INTO "${getTableName(table)}" (${cols.map(([, c]) => `"${c.name}"`).join(", ")}) VALUES (${cols.map(() => "?").join(", ")}) ON CONFLICT DO NOTHING`;
  // Text and integer columns take their values as they are; only the others (booleans, blobs) are mapped.
  const keys = cols.map(([key]) => key);
  const mapped = cols.map(([, c]) => (PLAIN.has(c.columnType) ? undefined : (v: unknown) => c.mapToDriverValue(v)));
  const structured = keys.map((k) => json.includes(k as keyof T["$inferInsert"]));
  const jsonAt = keys.flatMap((_, i) => (structured[i] ? [i] : []));
  return {
    sql,
    rows: (rows) => {
      let plain = true;
      const out = rows.map((row) => {
        const r = row as Record<string, unknown>;
        const values: unknown[] = new Array(keys.length);
        for (let i = 0; i < keys.length; i++) {
          const v = r[keys[i]];
          const value = v === undefined || v === null ? null : mapped[i] ? mapped[i]!(v) : v;
          if (!structured[i] && !jsonSafe(value)) plain = false;
          values[i] = value;
        }
        return values;
      });
      return { sql, rows: out, plain, json: jsonAt.length ? jsonAt : undefined };
    },
  };
}

/** Column types whose values SQLite takes as they are. */
const PLAIN = new Set(["SQLiteText", "SQLiteInteger"]);

/** A sliced write that failed part way: the records from the failed slice on. */
class SliceFailed extends Error {
  constructor(
    readonly unwritten: RequestRecord[],
    readonly cause: unknown,
  ) {
    super("a slice of the inspector's records could not be written");
  }
}

/**
 * The inspector's sink over the store: records gather in memory and are written in batches.
 * The server flushes it every second (its chores) and once more at shutdown, after the listeners stop;
 * under load a batch goes as soon as SLICE records gathered, so records do not live long in memory
 * (each collection of young objects walks every record still held: held for a second, a busy
 * server's were thousands, and its event loop stalled for milliseconds at each collection).
 * @example const requests = new RequestLog(db); deps.inspector = requests; setInterval(() => void requests.flush(), 1000);
 */
export class RequestLog implements RequestSink {
  private pending: RequestRecord[] = [];
  private flushing: Promise<void> = Promise.resolve();
  /** A flush asked for by `add` (a full slice) and not started yet. */
  private flushAsked = false;
  /** The last write failed: `add` leaves retries to the timer's flush. */
  private failing = false;
  /** Records dropped unwritten because memory was full (the store could not keep up, or failed). */
  dropped = 0;

  constructor(
    private readonly db: Db,
    private readonly maxPending = MAX_PENDING,
  ) {}

  /** Takes a finished request; never waits or throws. */
  add(record: RequestRecord): void {
    if (this.pending.length >= this.maxPending) {
      this.pending.shift();
      this.dropped++;
    }
    this.pending.push(record);
    if (this.pending.length >= SLICE && !this.flushAsked && !this.failing) {
      this.flushAsked = true;
      void this.flush();
    }
  }

  /** Records waiting to be written. */
  get waiting(): number {
    return this.pending.length;
  }

  /** Writes what gathered in one transaction; flushes run one after another. A failed write puts its records back (bounded) and logs. */
  flush(): Promise<void> {
    this.flushing = this.flushing.then(() => this.write());
    return this.flushing;
  }

  /** SQLite: the worker thread that writes the rows (made at the first write). */
  private sqliteWriter?: SqliteWriter;

  private async write(): Promise<void> {
    this.flushAsked = false;
    if (!this.pending.length) return;
    let taken = this.pending;
    this.pending = [];
    try {
      if (this.db.engine === "sqlite") await this.writeSliced(taken);
      else await batch(this.db, writes(this.db, taken));
      this.failing = false;
    } catch (failure) {
      this.failing = true;
      const e = failure instanceof SliceFailed ? failure.cause : failure;
      if (failure instanceof SliceFailed) taken = failure.unwritten;
      log.warn(`could not write ${plural(taken.length, "request record")} of the inspector`, e);
      const room = Math.max(0, this.maxPending - this.pending.length);
      this.dropped += Math.max(0, taken.length - room);
      this.pending = [...taken.slice(Math.max(0, taken.length - room)), ...this.pending];
    }
  }

  /** Writes records to SQLite SLICE at a time, each slice in one transaction of the writer's thread; a failed slice throws with what was not written. */
  private async writeSliced(records: RequestRecord[]): Promise<void> {
    const writer = (this.sqliteWriter ??= new SqliteWriter(sqliteOf(this.db)));
    for (let i = 0; i < records.length; i += SLICE) {
      const slice = records.slice(i, i + SLICE);
      try {
        await writer.write([
          LOG_ROW.rows(slice.map((r) => logRow(r, true))),
          BODIES_ROW.rows(slice.filter(withBodies).map(bodiesRow)),
        ]);
      } catch (e) {
        throw new SliceFailed(records.slice(i), e);
      }
    }
  }

  /** Stops the SQLite writer's thread (after the last flush). */
  close(): void {
    this.sqliteWriter?.close();
    this.sqliteWriter = undefined;
  }
}

/** The SQLite inserts of the inspector's two tables. */
const LOG_ROW = rowValues(requestLog, ["spans", "fellBackFrom"]);
const BODIES_ROW = rowValues(requestBodies);

/**
 * Removes the inspector's rows and bodies older than `retentionMs` (the job retention), and beyond
 * `maxPerWorkload` rows of one workload its oldest ones. The leader's retention sweep calls it.
 */
export async function pruneRequests(
  db: Db,
  retentionMs: number,
  maxPerWorkload = MAX_ROWS_PER_WORKLOAD,
): Promise<void> {
  const cutoff = new Date(Date.now() - retentionMs).toISOString();
  await db.delete(requestLog).where(lte(requestLog.at, cutoff));
  await db.delete(requestBodies).where(lte(requestBodies.at, cutoff));
  const crowded = await db
    .select({ workloadId: requestLog.workloadId })
    .from(requestLog)
    .groupBy(requestLog.workloadId)
    .having(gt(count(), maxPerWorkload));
  for (const { workloadId } of crowded) {
    const [edge] = await db
      .select({ at: requestLog.at })
      .from(requestLog)
      .where(eq(requestLog.workloadId, workloadId))
      .orderBy(desc(requestLog.at))
      .limit(1)
      .offset(maxPerWorkload);
    if (!edge) continue;
    await db.delete(requestLog).where(and(eq(requestLog.workloadId, workloadId), lte(requestLog.at, edge.at)));
    await db.delete(requestBodies).where(and(eq(requestBodies.workloadId, workloadId), lte(requestBodies.at, edge.at)));
  }
}
