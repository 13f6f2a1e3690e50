import type { Finished } from "./meter";

/** Width of one time bucket of the per-workload series. */
export const BUCKET_MS = 10_000;
/** Buckets kept (an hour). */
const KEEP = 360;
/** Latency samples kept per bucket (a uniform reservoir beyond this). */
const SAMPLES = 512;

interface Bucket {
  t: number;
  requests: number;
  errors: number;
  inputTokens: number;
  outputTokens: number;
  latencies: number[];
  firstTokens: number[];
  seen: number;
  queueDepth: number;
}

/** A point of a workload's series, as the dashboard charts it. */
export interface SeriesPoint {
  t: string;
  rps: number;
  p50_ms: number | null;
  p99_ms: number | null;
  /** Time to first token (or to the response headers), p50 and p99. */
  ttft_p50_ms: number | null;
  ttft_p99_ms: number | null;
  tokens_per_s: number;
  errors_per_s: number;
  error_rate: number;
  queue_depth: number;
}

/**
 * Until when buckets are complete at `now`: the start of the bucket still filling.
 * @example completeUntil(Date.parse("2026-01-01T00:00:17Z")) // → Date.parse("2026-01-01T00:00:10Z")
 */
export const completeUntil = (now = Date.now()): number => Math.floor(now / BUCKET_MS) * BUCKET_MS;

/**
 * The q-quantile of some numbers (nearest rank).
 * @example quantile([5, 1, 3], 0.5) // → 3
 */
export function quantile(values: number[], q: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/** Keeps at most SAMPLES of a bucket's values (a uniform reservoir beyond). */
function sample(list: number[], seen: number, v: number): void {
  if (list.length < SAMPLES) list.push(v);
  else {
    const i = Math.floor(Math.random() * seen);
    if (i < SAMPLES) list[i] = v;
  }
}

/**
 * Request figures per workload in 10-second buckets for the last hour, in memory: requests,
 * errors, tokens, latency and time-to-first-token samples (from the request's arrival, as the
 * histograms measure) and the queue depth seen at each bucket's end. Totals since start feed the
 * Prometheus counters.
 */
export class MetricsStore {
  private series = new Map<string, Bucket[]>();
  readonly totals = new Map<string, { requests: number; errors: number; inputTokens: number; outputTokens: number }>();

  private bucket(workloadId: string, now = Date.now()): Bucket {
    const t = Math.floor(now / BUCKET_MS) * BUCKET_MS;
    let list = this.series.get(workloadId);
    if (!list) this.series.set(workloadId, (list = []));
    let last = list[list.length - 1];
    if (!last || last.t !== t) {
      last = { t, requests: 0, errors: 0, inputTokens: 0, outputTokens: 0, latencies: [], firstTokens: [], seen: 0, queueDepth: 0 };
      list.push(last);
      if (list.length > KEEP) list.splice(0, list.length - KEEP);
    }
    return last;
  }

  /** Counts one finished request (sync or job) in its bucket and the totals. */
  observe(f: Finished, now = Date.now()): void {
    const b = this.bucket(f.workloadId, now);
    b.requests++;
    if (!f.ok) b.errors++;
    b.inputTokens += f.usage.inputTokens;
    b.outputTokens += f.usage.outputTokens;
    b.seen++;
    sample(b.latencies, b.seen, f.durationMs);
    if (f.firstByteMs !== null) sample(b.firstTokens, b.seen, f.firstByteMs);
    const tot = this.totals.get(f.workloadId) ?? { requests: 0, errors: 0, inputTokens: 0, outputTokens: 0 };
    tot.requests++;
    if (!f.ok) tot.errors++;
    tot.inputTokens += f.usage.inputTokens;
    tot.outputTokens += f.usage.outputTokens;
    this.totals.set(f.workloadId, tot);
  }

  /** Records a workload's queue depth now (called on a timer); a bucket keeps the deepest seen. */
  sampleQueue(workloadId: string, depth: number): void {
    const b = this.bucket(workloadId);
    b.queueDepth = Math.max(b.queueDepth, depth);
  }

  /**
   * The workload's complete buckets over the last `minutes`, one point per bucket, gaps filled
   * with zeros. The bucket still filling (the one `now` falls in) is left out: drawn, it would
   * always dip. The last point ends at `completeUntil(now)`.
   */
  points(workloadId: string, minutes: number, now = Date.now()): SeriesPoint[] {
    const list = this.series.get(workloadId) ?? [];
    const end = completeUntil(now) - BUCKET_MS;
    const start = end - Math.ceil((minutes * 60_000) / BUCKET_MS) * BUCKET_MS + BUCKET_MS;
    const byT = new Map(list.map((b) => [b.t, b]));
    const out: SeriesPoint[] = [];
    for (let t = start; t <= end; t += BUCKET_MS) {
      const b = byT.get(t);
      const secs = BUCKET_MS / 1000;
      out.push({
        t: new Date(t).toISOString(),
        rps: (b?.requests ?? 0) / secs,
        p50_ms: b ? quantile(b.latencies, 0.5) : null,
        p99_ms: b ? quantile(b.latencies, 0.99) : null,
        ttft_p50_ms: b ? quantile(b.firstTokens, 0.5) : null,
        ttft_p99_ms: b ? quantile(b.firstTokens, 0.99) : null,
        tokens_per_s: ((b?.inputTokens ?? 0) + (b?.outputTokens ?? 0)) / secs,
        errors_per_s: (b?.errors ?? 0) / secs,
        error_rate: b && b.requests ? b.errors / b.requests : 0,
        queue_depth: b?.queueDepth ?? 0,
      });
    }
    return out;
  }

  /** Forgets a deleted workload. */
  drop(workloadId: string): void {
    this.series.delete(workloadId);
    this.totals.delete(workloadId);
  }
}
