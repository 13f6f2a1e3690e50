import type { Metrics } from "./app";

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
  seen: number;
  queueDepth: number;
}

/** A point of a workload's series, as the dashboard charts it. */
export interface SeriesPoint {
  t: string;
  rps: number;
  p50_ms: number | null;
  p99_ms: number | null;
  tokens_per_s: number;
  error_rate: number;
  queue_depth: number;
}

/**
 * The q-quantile of some numbers (nearest rank).
 * @example quantile([5, 1, 3], 0.5) // → 3
 */
export function quantile(values: number[], q: number): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/**
 * Request figures per workload in 10-second buckets for the last hour, in memory: requests,
 * errors, tokens, latency samples and the queue depth seen at each bucket's end. Totals since start
 * feed the Prometheus counters.
 */
export class MetricsStore implements Metrics {
  private series = new Map<string, Bucket[]>();
  readonly totals = new Map<string, { requests: number; errors: number; inputTokens: number; outputTokens: number }>();

  private bucket(workloadId: string, now = Date.now()): Bucket {
    const t = Math.floor(now / BUCKET_MS) * BUCKET_MS;
    let list = this.series.get(workloadId);
    if (!list) this.series.set(workloadId, (list = []));
    let last = list[list.length - 1];
    if (!last || last.t !== t) {
      last = { t, requests: 0, errors: 0, inputTokens: 0, outputTokens: 0, latencies: [], seen: 0, queueDepth: 0 };
      list.push(last);
      if (list.length > KEEP) list.splice(0, list.length - KEEP);
    }
    return last;
  }

  /** Counts one finished request (sync or job). */
  observe(workloadId: string, ms: number, usage: { inputTokens: number; outputTokens: number }, ok: boolean): void {
    const b = this.bucket(workloadId);
    b.requests++;
    if (!ok) b.errors++;
    b.inputTokens += usage.inputTokens;
    b.outputTokens += usage.outputTokens;
    b.seen++;
    if (b.latencies.length < SAMPLES) b.latencies.push(ms);
    else {
      const i = Math.floor(Math.random() * b.seen);
      if (i < SAMPLES) b.latencies[i] = ms;
    }
    const tot = this.totals.get(workloadId) ?? { requests: 0, errors: 0, inputTokens: 0, outputTokens: 0 };
    tot.requests++;
    if (!ok) tot.errors++;
    tot.inputTokens += usage.inputTokens;
    tot.outputTokens += usage.outputTokens;
    this.totals.set(workloadId, tot);
  }

  /** Records a workload's queue depth now (called on a timer); a bucket keeps the deepest seen. */
  sampleQueue(workloadId: string, depth: number): void {
    const b = this.bucket(workloadId);
    b.queueDepth = Math.max(b.queueDepth, depth);
  }

  /** The workload's points over the last `minutes`, one per bucket, gaps filled with zeros. */
  points(workloadId: string, minutes: number, now = Date.now()): SeriesPoint[] {
    const list = this.series.get(workloadId) ?? [];
    const end = Math.floor(now / BUCKET_MS) * BUCKET_MS;
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
        tokens_per_s: ((b?.inputTokens ?? 0) + (b?.outputTokens ?? 0)) / secs,
        error_rate: b && b.requests ? b.errors / b.requests : 0,
        queue_depth: b?.queueDepth ?? 0,
      });
    }
    return out;
  }

  /** Latency samples of the last `minutes` (for summary quantiles). */
  recentLatencies(workloadId: string, minutes: number, now = Date.now()): number[] {
    const since = now - minutes * 60_000;
    return (this.series.get(workloadId) ?? []).filter((b) => b.t >= since - BUCKET_MS).flatMap((b) => b.latencies);
  }

  /** Forgets a deleted workload. */
  drop(workloadId: string): void {
    this.series.delete(workloadId);
    this.totals.delete(workloadId);
  }
}
