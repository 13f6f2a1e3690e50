/**
 * The charts' series kept across restarts: every completed 10 s bucket of the in-memory series
 * (per-workload request figures, per-worker GPU samples) is written to `series_buckets` in one
 * transaction per bucket round, off the request path, with a row marking this host up in that
 * bucket; rows past the hour the charts offer are deleted in the same transaction. Reads merge this
 * process's buckets (from memory) with the store's: earlier runs of this host and, in a cluster,
 * the other hosts. A bucket no host was up in reads as a gap, never as zeros.
 */
import { and, eq, gte, lt, ne, or, sql } from "drizzle-orm";
import type { Db } from "../db";
import { batch } from "../db/raw";
import { seriesBuckets } from "../db/schema";
import { BUCKET_MS, combine, completeUntil, KEEP, type BucketSummary, type StoredSeries } from "./series";

/** The series kinds the store holds. */
export type SeriesKind = "workload" | "gpu";

/** The subject of the rows marking a host up in a bucket (kind "workload"): zeros there, not gaps. */
const UP = "";

/** One bucket of one series, as a source hands it to the store and as the store gives it back. */
export interface BucketRow {
  subject: string;
  t: number;
  data: unknown;
}

/** A stored bucket with the host that recorded it. */
export type StoredRow = BucketRow & { hostId: string };

/** An in-memory series the store keeps: its buckets in [from, until) to write, and the take-back of a previous run's. */
export interface BucketSource {
  readonly kind: SeriesKind;
  completed(from: number, until: number): BucketRow[];
  carry(subject: string, t: number, data: unknown): void;
}

/**
 * Writes the sources' completed buckets and reads the stored ones back. `flush()` runs on a
 * 1 s timer (it writes only once a bucket has completed) and, with `final`, at shutdown, when the
 * bucket still filling is written too; `start()` takes back what a previous run of this host wrote
 * for the bucket this one starts in, so a restart within one bucket loses nothing.
 */
export class SeriesKeeper {
  /** The first bucket this process records: its own rows from there on are read from memory. */
  readonly firstBucket: number;
  private writtenUntil: number;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Db,
    readonly hostId: string,
    private readonly sources: BucketSource[],
    since = Date.now(),
  ) {
    this.firstBucket = completeUntil(since);
    this.writtenUntil = this.firstBucket;
  }

  /** Hands each source what a previous run of this host stored for the bucket this process started in. */
  async start(): Promise<void> {
    const rows = await this.db
      .select()
      .from(seriesBuckets)
      .where(
        and(
          eq(seriesBuckets.hostId, this.hostId),
          eq(seriesBuckets.t, this.firstBucket),
          ne(seriesBuckets.subject, UP),
        ),
      );
    for (const r of rows) this.sources.find((s) => s.kind === r.kind)?.carry(r.subject, r.t, JSON.parse(r.data));
  }

  /**
   * Writes the buckets completed since the last write (with `final`, the one filling too), marks
   * this host up in each, and deletes rows older than the window, in one transaction; flushes run
   * one after another.
   */
  flush(now = Date.now(), final = false): Promise<void> {
    this.flushing = this.flushing.then(
      () => this.write(now, final),
      () => this.write(now, final),
    );
    return this.flushing;
  }

  private async write(now: number, final: boolean): Promise<void> {
    const from = this.writtenUntil;
    const until = completeUntil(now) + (final ? BUCKET_MS : 0);
    if (until <= from) return;
    const rows = this.sources.flatMap((s) =>
      s
        .completed(from, until)
        .map((r) => ({ kind: s.kind, subject: r.subject, t: r.t, hostId: this.hostId, data: JSON.stringify(r.data) })),
    );
    for (let t = from; t < until; t += BUCKET_MS)
      rows.push({ kind: "workload", subject: UP, t, hostId: this.hostId, data: "{}" });
    const c = seriesBuckets;
    await batch(this.db, [
      this.db
        .insert(c)
        .values(rows)
        .onConflictDoUpdate({ target: [c.kind, c.subject, c.t, c.hostId], set: { data: sql`excluded.data` } }),
      this.db.delete(c).where(lt(c.t, completeUntil(now) - KEEP * BUCKET_MS)),
    ]);
    this.writtenUntil = until;
  }

  /**
   * The stored rows of `kind` (of one subject, or all) with a bucket in [from, until): every host's,
   * except this process's own buckets, which memory holds (fresher than the store).
   */
  async read(kind: SeriesKind, from: number, until: number, subject?: string): Promise<StoredRow[]> {
    const c = seriesBuckets;
    const rows = await this.db
      .select()
      .from(c)
      .where(
        and(
          eq(c.kind, kind),
          gte(c.t, from),
          lt(c.t, until),
          subject === undefined ? undefined : eq(c.subject, subject),
          or(ne(c.hostId, this.hostId), lt(c.t, this.firstBucket)),
        ),
      );
    return rows.map((r) => ({ subject: r.subject, t: r.t, hostId: r.hostId, data: JSON.parse(r.data) }));
  }

  /**
   * The workloads' stored buckets over [from, until), each bucket's hosts combined (counts add,
   * p50 request-weighted, p99 the largest: see `combine`), and the buckets some host was up in.
   * `of(id)` gives one workload's, for `MetricsStore.points`.
   */
  async workloads(from: number, until: number, workloadId?: string): Promise<{ of(id: string): StoredSeries }> {
    const [rows, marks] = await Promise.all([
      workloadId === undefined ? this.read("workload", from, until) : this.read("workload", from, until, workloadId),
      this.read("workload", from, until, UP),
    ]);
    const up = new Set(marks.map((m) => m.t));
    const parts = new Map<string, Map<number, BucketSummary[]>>();
    for (const r of rows) {
      if (r.subject === UP) continue;
      const byT = parts.get(r.subject) ?? new Map<number, BucketSummary[]>();
      byT.set(r.t, [...(byT.get(r.t) ?? []), r.data as BucketSummary]);
      parts.set(r.subject, byT);
    }
    return {
      of: (id) => ({
        up,
        buckets: new Map(
          [...(parts.get(id) ?? [])].map(([t, list]) => [t, list.length > 1 ? combine(list, "sum") : list[0]]),
        ),
      }),
    };
  }
}
