/**
 * Prometheus histograms (cumulative `_bucket{le}`, `_sum`, `_count`) per label set, in memory.
 * Bucket bounds follow vLLM's for the same measures, with finer steps at the low end where a small
 * model on a workstation answers.
 */

/** Seconds, for whole-request durations and queue waits. */
export const LATENCY_BUCKETS = [
  0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960,
  1920, 7680,
];
/** Seconds, for the time to the first token (or to the response headers). */
export const TTFT_BUCKETS = [
  0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640, 2560,
];
/** Tokens per second of generation. */
export const RATE_BUCKETS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000];

/** The key of a label set among a family's series. */
export function labelKey(labels: Record<string, string>): string {
  let key = "";
  for (const k in labels) key += `${k}\u0000${labels[k]}\u0001`;
  return key;
}

/** One label set's counts. */
interface Series {
  labels: Record<string, string>;
  counts: number[];
  sum: number;
  count: number;
}

/** A histogram family: observations bucketed per label set. */
export class Histogram {
  private series = new Map<string, Series>();

  constructor(
    readonly name: string,
    readonly help: string,
    readonly bounds: number[],
  ) {}

  /**
   * Counts one observation (`value` in the family's unit) for a label set; `key`: the set's
   * `labelKey`, when the caller made it already (one request observes several families).
   */
  observe(labels: Record<string, string>, value: number, key = labelKey(labels)): void {
    if (!Number.isFinite(value) || value < 0) return;
    let s = this.series.get(key);
    if (!s) this.series.set(key, (s = { labels, counts: this.bounds.map(() => 0), sum: 0, count: 0 }));
    // Counts are per bucket here; the exposition makes them cumulative.
    const bounds = this.bounds;
    let i = 0;
    while (i < bounds.length && value > bounds[i]) i++;
    if (i < bounds.length) s.counts[i]++;
    s.sum += value;
    s.count++;
  }

  /** Drops every label set that `match` selects (a deleted workload). */
  drop(match: (labels: Record<string, string>) => boolean): void {
    for (const [k, s] of this.series) if (match(s.labels)) this.series.delete(k);
  }

  /**
   * The family in Prometheus text format: HELP, TYPE, then per label set the cumulative buckets
   * (with `+Inf`), `_sum` and `_count`.
   */
  exposition(relabel: (labels: Record<string, string>) => Record<string, string> | null = (l) => l): string[] {
    const lines = [`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`];
    for (const s of this.series.values()) {
      const labels = relabel(s.labels);
      if (!labels) continue;
      let cumulative = 0;
      this.bounds.forEach((b, i) => {
        cumulative += s.counts[i];
        lines.push(`${this.name}_bucket${fmt({ ...labels, le: String(b) })} ${cumulative}`);
      });
      lines.push(`${this.name}_bucket${fmt({ ...labels, le: "+Inf" })} ${s.count}`);
      lines.push(`${this.name}_sum${fmt(labels)} ${s.sum}`);
      lines.push(`${this.name}_count${fmt(labels)} ${s.count}`);
    }
    return lines;
  }
}

const esc = (v: string) => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");

/** `{a="1",b="2"}` for a label set. */
export const fmt = (l: Record<string, string>) =>
  `{${Object.entries(l)
    .map(([k, v]) => `${k}="${esc(v)}"`)
    .join(",")}}`;
