import { pgOf, sqliteOf, type Db } from "../db";
import { AppError } from "../errors";
import { log } from "../log";
import { storeErrorCode, storeFailure } from "../db/errors";

/** Arms and disarms the timer that closes a batch (injected so tests drive time). */
export interface BatchTimer {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

/**
 * The real timer: `ms <= 0` closes the batch on the next turn of the event loop (after the
 * requests that arrived together have queued their rows), otherwise after `ms`.
 */
export const realTimer: BatchTimer = {
  set: (fn, ms) => (ms <= 0 ? { immediate: setImmediate(fn) } : { timeout: setTimeout(fn, ms) }),
  clear: (h) => {
    const handle = h as { immediate?: ReturnType<typeof setImmediate>; timeout?: ReturnType<typeof setTimeout> };
    if (handle.immediate) clearImmediate(handle.immediate);
    if (handle.timeout) clearTimeout(handle.timeout);
  },
};

/** How a group commit closes its batches and reports failures. */
export interface GroupCommitOptions {
  /** Close the batch as soon as it holds this many rows. */
  maxRows: number;
  /** Close it at the latest this long (ms) after its first row arrived; 0: on the next turn of the event loop. */
  maxWaitMs: number;
  timer?: BatchTimer;
  /**
   * When a batch of several callers fails with this error, each caller's rows are written again
   * alone, so one caller's bad row (a constraint) does not fail the others. Default: never.
   */
  retryAlone?: (error: unknown) => boolean;
  /** What a caller is rejected with when its rows were not written (default: the error itself). */
  callerError?: (error: unknown) => unknown;
}

interface Caller<T> {
  rows: T[];
  resolve(): void;
  reject(e: unknown): void;
}

/**
 * Group commit: rows submitted by concurrent callers are written together by `write` (one
 * transaction), and each caller's promise settles only once that write has returned — so a caller
 * that answers after `await submit(...)` answers only for committed rows. A caller's rows always
 * land in the same transaction (all or none of them). The batch closes on size or time. A
 * synchronous `write` (SQLite) settles its callers at once; an asynchronous one (PostgreSQL) keeps
 * at most `maxInFlight` batches under way, and rows arriving meanwhile gather into the next.
 * @example const g = new GroupCommit((rows) => insertAll(rows), { maxRows: 256, maxWaitMs: 2 }); await g.submit([row]);
 */
export class GroupCommit<T> {
  private callers: Caller<T>[] = [];
  private rows = 0;
  private handle: unknown;
  private inFlight = 0;
  private readonly timer: BatchTimer;
  /** Batches written so far and the rows in them (for tests and the benchmark). */
  readonly stats = { batches: 0, rows: 0, failed: 0 };

  constructor(
    private write: (rows: T[]) => void | Promise<void>,
    private opts: GroupCommitOptions & { maxInFlight?: number },
  ) {
    this.timer = opts.timer ?? realTimer;
  }

  /** Queues a caller's rows; resolves when they are committed, rejects when they were not. */
  submit(rows: T[]): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.callers.push({ rows, resolve, reject });
      this.rows += rows.length;
      if (this.rows >= this.opts.maxRows) this.flush();
      else if (this.handle === undefined) this.handle = this.timer.set(() => this.flush(), this.opts.maxWaitMs);
    });
  }

  /** Closes the open batch now: writes it and settles its callers (or, when enough batches are under way, after one ends). */
  flush(): void {
    if (this.handle !== undefined) this.timer.clear(this.handle);
    this.handle = undefined;
    if (this.callers.length === 0 || this.inFlight >= (this.opts.maxInFlight ?? 4)) return;
    const callers = this.callers;
    this.callers = [];
    this.rows = 0;
    const settle = (error: unknown) => this.settle(callers, error);
    const written = this.tryWrite(callers.length === 1 ? callers[0].rows : callers.flatMap((c) => c.rows));
    if (!(written instanceof Promise)) return void settle(written);
    this.inFlight++;
    void written.then(settle).finally(() => {
      this.inFlight--;
      if (this.callers.length) this.flush();
    });
  }

  /** Settles a batch's callers: resolved, or (a failed batch) each alone again when allowed, else rejected. */
  private async settle(callers: Caller<T>[], error: unknown): Promise<void> {
    if (error === undefined) return callers.forEach((c) => c.resolve());
    if (callers.length > 1 && this.opts.retryAlone?.(error)) {
      for (const c of callers) {
        const alone = await this.tryWrite(c.rows);
        if (alone === undefined) c.resolve();
        else c.reject(this.opts.callerError?.(alone) ?? alone);
      }
      return;
    }
    const shown = this.opts.callerError?.(error) ?? error;
    for (const c of callers) c.reject(shown);
  }

  /** Writes rows; undefined when they were written, else the error (a promise of that for an async write). */
  private tryWrite(rows: T[]): unknown {
    const done = () => {
      this.stats.batches++;
      this.stats.rows += rows.length;
      return undefined;
    };
    const failed = (e: unknown) => {
      this.stats.failed++;
      return e ?? new Error("the write failed");
    };
    try {
      const w = this.write(rows);
      return w instanceof Promise ? w.then(done, failed) : done();
    } catch (e) {
      return failed(e);
    }
  }
}

/** A job row as the intake writes it (queued, never run). */
export interface JobInsert {
  id: string;
  workloadId: string;
  keyId: string | null;
  kind: string;
  body: Uint8Array;
  contentType: string;
  context: string | null;
  /** The `x-request-id` of the submission that made it. */
  requestId: string | null;
  /** The submitter's `traceparent` (well-formed), or null. */
  traceparent: string | null;
  createdAt: string;
}

/** Rows per transaction at most before a batch is closed early. */
export const INTAKE_MAX_ROWS = 256;
/** How long a batch stays open at most (ms); 0 closes it on the next turn of the event loop. */
export const INTAKE_MAX_WAIT_MS = 0;

/** A constraint failure (a duplicate id, a missing workload): that caller's row is bad, the others are not. */
const isConstraint = (e: unknown) => {
  const failure = storeFailure(e);
  return failure !== undefined && failure !== "full";
};

/**
 * The error a caller of a failed job batch gets: constraint failures and a full disk keep their
 * store error (the error mapper answers 409 and 503 `storage_full` for those, as elsewhere);
 * anything else becomes 503 `job_not_stored`. The cause is logged once per batch, never sent.
 */
export function intakeError(e: unknown): unknown {
  if (storeFailure(e)) return e;
  log.error("a batch of jobs could not be committed", e);
  return new AppError(
    503,
    "job_not_stored",
    `the job was not stored: the store refused the write (${storeErrorCode(e) || "error"}); nothing of this request was accepted, so retry it`,
    { "retry-after": "1" },
  );
}

/**
 * The one writer of new jobs: inserts are grouped into one transaction per batch. On SQLite a
 * prepared statement (no query building per row) under WAL + synchronous=NORMAL, so a job is exactly
 * as durable as a single-row commit; on PostgreSQL one multi-row INSERT per batch, a few batches
 * under way at once over the pool. Everything else keeps writing through the store as before.
 */
export function jobIntake(db: Db, opts: Partial<GroupCommitOptions> = {}): GroupCommit<JobInsert> {
  const common = {
    maxRows: INTAKE_MAX_ROWS,
    maxWaitMs: INTAKE_MAX_WAIT_MS,
    retryAlone: isConstraint,
    callerError: intakeError,
    ...opts,
  };
  if (db.engine === "postgres") {
    const pg = pgOf(db);
    const write = async (rows: JobInsert[]) => {
      // Each body as a view of the bytes already held (Buffer.from(Uint8Array) would copy them all).
      const values = rows.map((r) => ({
        id: r.id,
        workload_id: r.workloadId,
        key_id: r.keyId,
        kind: r.kind,
        body: Buffer.from(r.body.buffer, r.body.byteOffset, r.body.byteLength),
        content_type: r.contentType,
        context: r.context,
        request_id: r.requestId,
        traceparent: r.traceparent,
        status: "queued",
        runs: 0,
        created_at: r.createdAt,
      }));
      await pg`INSERT INTO jobs ${pg(values)}`;
    };
    return new GroupCommit<JobInsert>(write, { ...common, maxInFlight: 4 });
  }
  const sqlite = sqliteOf(db);
  const insert = sqlite.prepare<
    unknown,
    [string, string, string | null, string, Uint8Array, string, string | null, string | null, string | null, string]
  >(
    "INSERT INTO jobs (id, workload_id, key_id, kind, body, content_type, context, request_id, traceparent, status, runs, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', 0, ?)",
  );
  const writeAll = sqlite.transaction((rows: JobInsert[]) => {
    for (const r of rows)
      insert.run(
        r.id,
        r.workloadId,
        r.keyId,
        r.kind,
        r.body,
        r.contentType,
        r.context,
        r.requestId,
        r.traceparent,
        r.createdAt,
      );
  });
  return new GroupCommit<JobInsert>((rows) => void writeAll(rows), common);
}
