import type { Finished } from "./meter";

/** Width of one time bucket of the per-workload series. */
export const BUCKET_MS = 10_000;
/** Buckets kept (an hour): in memory, and in the store (src/usage/series-store.ts). */
export const KEEP = 360;
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
  /** Requests routed by prompt prefix, and those that went to the ring's replica (src/dispatch/prefix.ts). */
  prefixRouted: number;
  prefixHits: number;
  /** Requests for a LoRA adapter, and those that found it loaded on their replica (src/dispatch/lora.ts). */
  loraRequests: number;
  loraHits: number;
  /**
   * The bucket's requests per key ("" for none), synchronous and jobs apart, for the charts split by
   * key or priority: Maps keyed by the key id, so a request adds no string (`splitsOf` names them).
   */
  sync: Map<string, SplitCounts>;
  jobs: Map<string, SplitCounts>;
  /** What a previous process of this host counted in the same bucket before it stopped. */
  carried?: BucketSummary;
}

/** What a bucket counts of one key's requests of one kind: the figures a chart split by key or priority draws. */
export interface SplitCounts {
  requests: number;
  errors: number;
  /** Input and output tokens together. */
  tokens: number;
  /** The requests' durations added up (ms): their mean latency is `ms / requests`. */
  ms: number;
}

/**
 * The split a finished request is counted under: its kind (a job waits in the batch class whatever
 * its key) and its key ("" for none: the dashboard's playground).
 * @example splitKey("sync", "key_1") // → "sync:key_1"
 */
export const splitKey = (kind: "sync" | "job", keyId: string | null): string => `${kind}:${keyId ?? ""}`;

/** The kind and key a split key names. */
export const splitParts = (k: string): { kind: "sync" | "job"; keyId: string } => {
  const i = k.indexOf(":");
  return { kind: k.slice(0, i) === "job" ? "job" : "sync", keyId: k.slice(i + 1) };
};

/** Adds `b`'s split counts into `into` (a new record: neither is changed). */
export function addSplits(into: Record<string, SplitCounts>, b: Record<string, SplitCounts> | undefined) {
  const out = { ...into };
  for (const [k, c] of Object.entries(b ?? {})) {
    const a = out[k];
    out[k] = a
      ? { requests: a.requests + c.requests, errors: a.errors + c.errors, tokens: a.tokens + c.tokens, ms: a.ms + c.ms }
      : { ...c };
  }
  return out;
}

/**
 * What a complete bucket keeps in the store: its counts, and its quantiles computed when it
 * completed (the samples themselves stay in memory).
 */
export interface BucketSummary {
  requests: number;
  errors: number;
  input_tokens: number;
  output_tokens: number;
  p50_ms: number | null;
  p99_ms: number | null;
  /** Requests that had a first token: the weight of the two TTFT quantiles. */
  ttft_n: number;
  ttft_p50_ms: number | null;
  ttft_p99_ms: number | null;
  queue_depth: number;
  /** Requests routed by prompt prefix, and those that landed on the replica the ring named (absent in rows stored before routing by prefix). */
  prefix_routed?: number;
  prefix_hits?: number;
  /** Requests for a LoRA adapter, and those that found it loaded (absent in rows stored before adapters). */
  lora_requests?: number;
  lora_hits?: number;
  /** Per key and kind (`splitKey`; absent in rows stored before the split). */
  splits?: Record<string, SplitCounts>;
}

/**
 * A point of a workload's series, as the dashboard charts it. Every figure is null for a bucket
 * no host recorded (the server was down): the chart's line breaks there instead of dropping to 0.
 */
export interface SeriesPoint {
  t: string;
  rps: number | null;
  p50_ms: number | null;
  p99_ms: number | null;
  /** Time to first token (or to the response headers), p50 and p99. */
  ttft_p50_ms: number | null;
  ttft_p99_ms: number | null;
  tokens_per_s: number | null;
  errors_per_s: number | null;
  error_rate: number | null;
  queue_depth: number | null;
  /** Of the requests routed by prompt prefix, the share that went to the replica the ring named; null when none was. */
  prefix_hit_rate: number | null;
  /** Of the requests for a LoRA adapter, the share that found it loaded on their replica; null when none asked. */
  lora_hit_rate: number | null;
}

/** One complete bucket of some workloads together: its requests per split key, and whether some host was up in it. */
export interface SplitBucket {
  t: number;
  up: boolean;
  splits: Record<string, SplitCounts>;
}

/** A point of a chart split by key or priority: rates over the bucket, the mean latency; all null where no host was up. */
export interface SplitPoint {
  t: string;
  rps: number | null;
  errors_per_s: number | null;
  tokens_per_s: number | null;
  mean_ms: number | null;
}

/**
 * The buckets regrouped by `group` (a split key to the id of its line, e.g. the key, or the
 * priority class): one series of points per group that had requests in the window, in the order
 * first seen. A bucket no host was up in is a gap (nulls) in every series.
 * @example splitSeries([{ t: 0, up: true, splits: { "sync:k": { requests: 2, errors: 0, tokens: 20, ms: 100 } } }], (k) => k)
 *   // → Map { "sync:k" => [{ t: "1970-01-01T00:00:00.000Z", rps: 0.2, errors_per_s: 0, tokens_per_s: 2, mean_ms: 50 }] }
 */
export function splitSeries(buckets: SplitBucket[], group: (splitKey: string) => string): Map<string, SplitPoint[]> {
  const grouped = buckets.map((b) => {
    let g: Record<string, SplitCounts> = {};
    for (const [k, c] of Object.entries(b.splits)) g = addSplits(g, { [group(k)]: c });
    return g;
  });
  const ids = [...new Set(grouped.flatMap((g) => Object.keys(g)))];
  const secs = BUCKET_MS / 1000;
  return new Map(
    ids.map((id) => [
      id,
      buckets.map((b, i) => {
        const c = grouped[i][id];
        const t = new Date(b.t).toISOString();
        if (!b.up) return { t, rps: null, errors_per_s: null, tokens_per_s: null, mean_ms: null };
        return {
          t,
          rps: (c?.requests ?? 0) / secs,
          errors_per_s: (c?.errors ?? 0) / secs,
          tokens_per_s: (c?.tokens ?? 0) / secs,
          mean_ms: c?.requests ? c.ms / c.requests : null,
        };
      }),
    ]),
  );
}

/** What the store holds of one workload over a window: its buckets recorded elsewhere (other hosts, earlier runs), and the buckets some host was up in. */
export interface StoredSeries {
  buckets: Map<number, BucketSummary>;
  up: Set<number>;
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

/** The mean of some quantiles weighted by their bucket's count; null when none has a value. */
function weighted(parts: [number | null, number][]): number | null {
  const some = parts.filter((p): p is [number, number] => p[0] !== null && p[1] > 0);
  const n = some.reduce((a, [, w]) => a + w, 0);
  return n ? some.reduce((a, [v, w]) => a + v * w, 0) / n : null;
}

/** The largest of some quantiles; null when none has a value. */
function largest(values: (number | null)[]): number | null {
  const some = values.filter((v): v is number => v !== null);
  return some.length ? Math.max(...some) : null;
}

/**
 * One summary of the same bucket recorded in parts (by several hosts, or by two runs of one host):
 * counts add; the exact quantiles of the whole are gone with the samples, so p50 is the
 * request-weighted mean of the parts' p50 and p99 the largest part's p99 (never below the truth's
 * worst part: a slow host is not averaged away). Queue depths add across hosts (`queue: "sum"`,
 * each host queues its own requests) and take the deepest across runs of one host (`"max"`).
 * @example combine([{ requests: 1, p50_ms: 100, p99_ms: 100, … }, { requests: 3, p50_ms: 200, p99_ms: 900, … }], "sum") // → { requests: 4, p50_ms: 175, p99_ms: 900, … }
 */
export function combine(parts: BucketSummary[], queue: "sum" | "max"): BucketSummary {
  const sum = (f: (s: BucketSummary) => number) => parts.reduce((a, s) => a + f(s), 0);
  return {
    requests: sum((s) => s.requests),
    errors: sum((s) => s.errors),
    input_tokens: sum((s) => s.input_tokens),
    output_tokens: sum((s) => s.output_tokens),
    p50_ms: weighted(parts.map((s) => [s.p50_ms, s.requests])),
    p99_ms: largest(parts.map((s) => s.p99_ms)),
    ttft_n: sum((s) => s.ttft_n),
    ttft_p50_ms: weighted(parts.map((s) => [s.ttft_p50_ms, s.ttft_n])),
    ttft_p99_ms: largest(parts.map((s) => s.ttft_p99_ms)),
    queue_depth: queue === "sum" ? sum((s) => s.queue_depth) : Math.max(0, ...parts.map((s) => s.queue_depth)),
    prefix_routed: sum((s) => s.prefix_routed ?? 0),
    prefix_hits: sum((s) => s.prefix_hits ?? 0),
    lora_requests: sum((s) => s.lora_requests ?? 0),
    lora_hits: sum((s) => s.lora_hits ?? 0),
    splits: parts.reduce((a, s) => addSplits(a, s.splits), {} as Record<string, SplitCounts>),
  };
}

/** A bucket's summary: its quantiles computed now, merged with what an earlier run carried into it. */
function summarize(b: Bucket): BucketSummary {
  const own: BucketSummary = {
    requests: b.requests,
    errors: b.errors,
    input_tokens: b.inputTokens,
    output_tokens: b.outputTokens,
    p50_ms: quantile(b.latencies, 0.5),
    p99_ms: quantile(b.latencies, 0.99),
    ttft_n: b.firstTokens.length,
    ttft_p50_ms: quantile(b.firstTokens, 0.5),
    ttft_p99_ms: quantile(b.firstTokens, 0.99),
    queue_depth: b.queueDepth,
    prefix_routed: b.prefixRouted,
    prefix_hits: b.prefixHits,
    lora_requests: b.loraRequests,
    lora_hits: b.loraHits,
    splits: splitsOf(b),
  };
  return b.carried ? combine([b.carried, own], "max") : own;
}

/** A bucket's split counts by split key (`splitKey`: kind and key). */
function splitsOf(b: Bucket): Record<string, SplitCounts> {
  const out: Record<string, SplitCounts> = {};
  for (const [k, c] of b.sync) out[splitKey("sync", k || null)] = c;
  for (const [k, c] of b.jobs) out[splitKey("job", k || null)] = c;
  return out;
}

/**
 * The chart point of bucket `t`: its figures as rates, zeros for a bucket a host was up in with no
 * traffic, and nulls for one no host recorded.
 */
export function pointOf(t: number, s: BucketSummary | undefined, up: boolean): SeriesPoint {
  const secs = BUCKET_MS / 1000;
  if (!s && !up)
    return {
      t: new Date(t).toISOString(),
      rps: null,
      p50_ms: null,
      p99_ms: null,
      ttft_p50_ms: null,
      ttft_p99_ms: null,
      tokens_per_s: null,
      errors_per_s: null,
      error_rate: null,
      queue_depth: null,
      prefix_hit_rate: null,
      lora_hit_rate: null,
    };
  return {
    t: new Date(t).toISOString(),
    rps: (s?.requests ?? 0) / secs,
    p50_ms: s?.p50_ms ?? null,
    p99_ms: s?.p99_ms ?? null,
    ttft_p50_ms: s?.ttft_p50_ms ?? null,
    ttft_p99_ms: s?.ttft_p99_ms ?? null,
    tokens_per_s: ((s?.input_tokens ?? 0) + (s?.output_tokens ?? 0)) / secs,
    errors_per_s: (s?.errors ?? 0) / secs,
    error_rate: s && s.requests ? s.errors / s.requests : 0,
    queue_depth: s?.queue_depth ?? 0,
    prefix_hit_rate: s?.prefix_routed ? (s.prefix_hits ?? 0) / s.prefix_routed : null,
    lora_hit_rate: s?.lora_requests ? (s.lora_hits ?? 0) / s.lora_requests : null,
  };
}

/**
 * The window of `minutes` ending with the last complete bucket at `now`: the first bucket's start
 * and the end of the last one (`completeUntil(now)`).
 */
export function windowOf(minutes: number, now = Date.now()): { from: number; until: number } {
  const until = completeUntil(now);
  return { from: until - Math.ceil((minutes * 60_000) / BUCKET_MS) * BUCKET_MS, until };
}

/**
 * Request figures per workload in 10-second buckets for the last hour, in memory: requests,
 * errors, tokens, latency and time-to-first-token samples (from the request's arrival, as the
 * histograms measure) and the queue depth seen at each bucket's end. Counting never touches the
 * store: completed buckets are handed to the store in one batch per bucket round
 * (src/usage/series-store.ts). Totals since start feed the Prometheus counters.
 */
export class MetricsStore {
  private series = new Map<string, Bucket[]>();
  readonly totals = new Map<string, { requests: number; errors: number; inputTokens: number; outputTokens: number }>();
  /** The prefix counts of each workload at the last `samplePrefix`. */
  private prefixSeen = new Map<string, { routed: number; hits: number }>();
  /** The LoRA counts of each workload at the last `sampleLora`. */
  private loraSeen = new Map<string, { requests: number; hits: number }>();
  /** The first bucket this process records (it started in it): from there on, a bucket with no traffic is a zero. */
  readonly firstBucket: number;

  /** `since`: when this process started recording. */
  constructor(since = Date.now()) {
    this.firstBucket = completeUntil(since);
  }

  /** The kind of its rows in the store. */
  readonly kind = "workload";

  private bucket(workloadId: string, now = Date.now()): Bucket {
    const t = completeUntil(now);
    let list = this.series.get(workloadId);
    if (!list) this.series.set(workloadId, (list = []));
    // The bucket filling is the last one (a linear search only for a carried or injected time).
    let b = list.at(-1)?.t === t ? list.at(-1) : list.findLast((x) => x.t === t);
    if (!b) {
      b = {
        t,
        requests: 0,
        errors: 0,
        inputTokens: 0,
        outputTokens: 0,
        latencies: [],
        firstTokens: [],
        seen: 0,
        queueDepth: 0,
        prefixRouted: 0,
        prefixHits: 0,
        loraRequests: 0,
        loraHits: 0,
        sync: new Map(),
        jobs: new Map(),
      };
      list.push(b);
      list.sort((x, y) => x.t - y.t);
      if (list.length > KEEP) list.splice(0, list.length - KEEP);
    }
    return b;
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
    const split = f.kind === "job" ? b.jobs : b.sync;
    let c = split.get(f.keyId ?? "");
    if (!c) split.set(f.keyId ?? "", (c = { requests: 0, errors: 0, tokens: 0, ms: 0 }));
    c.requests++;
    if (!f.ok) c.errors++;
    c.tokens += f.usage.inputTokens + f.usage.outputTokens;
    c.ms += f.durationMs;
    if (f.firstByteMs !== null) sample(b.firstTokens, b.seen, f.firstByteMs);
    const tot = this.totals.get(f.workloadId) ?? { requests: 0, errors: 0, inputTokens: 0, outputTokens: 0 };
    tot.requests++;
    if (!f.ok) tot.errors++;
    tot.inputTokens += f.usage.inputTokens;
    tot.outputTokens += f.usage.outputTokens;
    this.totals.set(f.workloadId, tot);
  }

  /** Records a workload's queue depth now (called on a timer); a bucket keeps the deepest seen. */
  sampleQueue(workloadId: string, depth: number, now = Date.now()): void {
    if (depth === 0 && this.series.get(workloadId)?.at(-1)?.t !== completeUntil(now)) return;
    const b = this.bucket(workloadId, now);
    b.queueDepth = Math.max(b.queueDepth, depth);
  }

  /**
   * Counts in the bucket filling what a workload's prefix router counted since the last call
   * (`counts` are its totals since start; called on the queue-sampling timer, off the request path).
   */
  samplePrefix(workloadId: string, counts: { routed: number; hits: number }, now = Date.now()): void {
    const last = this.prefixSeen.get(workloadId) ?? { routed: 0, hits: 0 };
    if (counts.routed === last.routed) return;
    const b = this.bucket(workloadId, now);
    b.prefixRouted += counts.routed - last.routed;
    b.prefixHits += counts.hits - last.hits;
    this.prefixSeen.set(workloadId, { ...counts });
  }

  /** As `samplePrefix`, for a workload's LoRA counts (src/dispatch/lora.ts: requests for an adapter, those that found it loaded). */
  sampleLora(workloadId: string, counts: { requests: number; hits: number }, now = Date.now()): void {
    const last = this.loraSeen.get(workloadId) ?? { requests: 0, hits: 0 };
    if (counts.requests === last.requests) return;
    const b = this.bucket(workloadId, now);
    b.loraRequests += counts.requests - last.requests;
    b.loraHits += counts.hits - last.hits;
    this.loraSeen.set(workloadId, { requests: counts.requests, hits: counts.hits });
  }

  /** The summaries of the buckets in [from, until) that saw traffic, per workload, for the store. */
  completed(from: number, until: number): { subject: string; t: number; data: BucketSummary }[] {
    return [...this.series].flatMap(([subject, list]) =>
      list
        .filter(
          (b) =>
            b.t >= from && b.t < until && (b.requests || b.queueDepth || b.prefixRouted || b.loraRequests || b.carried),
        )
        .map((b) => ({ subject, t: b.t, data: summarize(b) })),
    );
  }

  /** Takes in what a previous run of this host stored for bucket `t` (the one this process started in). */
  carry(subject: string, t: number, data: unknown): void {
    this.bucket(subject, t).carried = data as BucketSummary;
  }

  /**
   * The workload's complete buckets over the last `minutes`, one point per bucket: this process's
   * own from memory, merged with `stored` (other hosts' and earlier runs'); a bucket with no
   * traffic is a zero while some host was up, and null (a gap) while none was. The bucket still
   * filling (the one `now` falls in) is left out: drawn, it would always dip. The last point ends
   * at `completeUntil(now)`.
   */
  points(
    workloadId: string,
    minutes: number,
    now = Date.now(),
    stored: StoredSeries = { buckets: new Map(), up: new Set() },
  ): SeriesPoint[] {
    const { from, until } = windowOf(minutes, now);
    const mine = new Map((this.series.get(workloadId) ?? []).map((b) => [b.t, summarize(b)]));
    const out: SeriesPoint[] = [];
    for (let t = from; t < until; t += BUCKET_MS) {
      const parts = [mine.get(t), stored.buckets.get(t)].filter((s): s is BucketSummary => !!s);
      const s = parts.length > 1 ? combine(parts, "sum") : parts[0];
      out.push(pointOf(t, s, t >= this.firstBucket || stored.up.has(t)));
    }
    return out;
  }

  /**
   * The complete buckets over the last `minutes` of some workloads together, each with its requests
   * per key and kind (this process's from memory merged with `stored`'s) and whether some host was up.
   */
  splitBuckets(
    workloadIds: string[],
    minutes: number,
    now = Date.now(),
    stored: { of(id: string): StoredSeries } = { of: () => ({ buckets: new Map(), up: new Set() }) },
  ): SplitBucket[] {
    const { from, until } = windowOf(minutes, now);
    const out: SplitBucket[] = [];
    const mine = workloadIds.map(
      (id) =>
        new Map(
          (this.series.get(id) ?? []).map((b) => [
            b.t,
            b.carried ? addSplits(splitsOf(b), b.carried.splits) : splitsOf(b),
          ]),
        ),
    );
    const theirs = workloadIds.map((id) => stored.of(id));
    for (let t = from; t < until; t += BUCKET_MS) {
      let splits: Record<string, SplitCounts> = {};
      for (const m of mine) splits = addSplits(splits, m.get(t));
      for (const s of theirs) splits = addSplits(splits, s.buckets.get(t)?.splits);
      const up = t >= this.firstBucket || theirs.some((s) => s.up.has(t)) || Object.keys(splits).length > 0;
      out.push({ t, up, splits });
    }
    return out;
  }

  /** Forgets a deleted workload. */
  drop(workloadId: string): void {
    this.series.delete(workloadId);
    this.totals.delete(workloadId);
    this.prefixSeen.delete(workloadId);
    this.loraSeen.delete(workloadId);
  }
}
