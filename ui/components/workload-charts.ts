/**
 * Per-workload request charts over complete 10 s buckets, the same figures split by key or by
 * priority class (so each key's share can be seen), and the one time-range selector shared by
 * every chart of a page.
 */
import { html } from "htm/preact";
import { useRef, useState } from "preact/hooks";
import { useApi, type Loaded } from "../lib/hooks";
import type { SeriesAnswer, SeriesPoint, WorkloadSeries } from "../lib/types";
import type { SplitPoint } from "../../src/usage/series";
import { Chart, COLORS, DASHED, duration, type Format, type Line, type Range } from "./chart";
import { ErrorNote, Loading } from "./ui";

/** The windows the selector offers, in minutes. */
const WINDOWS: [number, string][] = [
  [5, "last 5 minutes"],
  [15, "last 15 minutes"],
  [60, "last hour"],
];

/** Unix seconds of an ISO time. */
export const secs = (iso: string) => Date.parse(iso) / 1000;

/**
 * The start of the first bucket some host was up in (the first point with a value, in any line),
 * or `from` when there is none: the buckets before the server first started are not drawn.
 */
export function firstUp(from: string, lines: { points: { t: string; rps: number | null }[] }[]): number {
  const starts = lines.map((l) => l.points.find((p) => p.rps !== null)).filter((p) => p !== undefined);
  return starts.length ? Math.min(...starts.map((p) => secs(p.t))) : secs(from);
}

/**
 * The time axis every chart of the page shares: from the first bucket some host was up in (never
 * an empty span before the server started) to the end of the last complete one.
 */
export const rangeOf = (s: SeriesAnswer): Range => [firstUp(s.from, s.workloads), secs(s.complete_until)];

/**
 * The series (complete buckets only) over the last `minutes`, of one workload or all, polled every
 * 5 s; while another range loads, the last answer stays (the charts do not blink out).
 */
export function useSeries(minutes: number, workloadId?: string): Loaded<SeriesAnswer> {
  const read = useApi<SeriesAnswer>(
    `/admin/metrics/series?minutes=${minutes}${workloadId ? `&workload=${encodeURIComponent(workloadId)}` : ""}`,
    5000,
  );
  const last = useRef<SeriesAnswer>();
  if (read.data) last.current = read.data;
  return { ...read, data: read.data ?? last.current };
}

/** What `GET /admin/metrics/split` answers: one line per key, or per priority class, named in words. */
export interface SplitAnswer {
  interval_s: number;
  from: string;
  complete_until: string;
  by: "key" | "priority";
  splits: { id: string; label: string; points: SplitPoint[] }[];
}

/** How a page's request charts are split: one line per workload, per key or per priority class. */
export type SplitBy = "workload" | "key" | "priority";

/** The choices of the split selector, in words. */
const SPLITS: [SplitBy, string][] = [
  ["workload", "workload"],
  ["key", "key"],
  ["priority", "priority (interactive / batch)"],
];

/** The split selector: per key or per priority shows how the capacity is shared. */
export function SplitSelect({
  by,
  onChange,
  workloads = true,
}: {
  by: SplitBy;
  onChange(b: SplitBy): void;
  workloads?: boolean;
}) {
  return html`<label>One line per <select name="split" value=${by} onChange=${(e: Event) => onChange((e.target as HTMLSelectElement).value as SplitBy)}>
    ${SPLITS.filter(([id]) => workloads || id !== "workload").map(([id, label]) => html`<option value=${id}>${label}</option>`)}</select></label>`;
}

/** The split series (key or priority) over the last `minutes`, of one workload or all, polled every 5 s; null `by` reads nothing. */
export function useSplit(minutes: number, by: "key" | "priority" | null, workloadId?: string): Loaded<SplitAnswer> {
  return useApi<SplitAnswer>(
    by
      ? `/admin/metrics/split?by=${by}&minutes=${minutes}${workloadId ? `&workload=${encodeURIComponent(workloadId)}` : ""}`
      : null,
    5000,
  );
}

/** The request charts split by key or priority: one colour per line, the same in every chart. */
export function SplitCharts({ answer }: { answer: SplitAnswer }) {
  if (answer.splits.length === 0)
    return html`<p class="muted" data-testid="no-traffic">No requests in this time range.</p>`;
  const x = answer.splits[0].points.map((p) => secs(p.t));
  const range: Range = [firstUp(answer.from, answer.splits), secs(answer.complete_until)];
  const lines = (f: (p: SplitPoint) => number | null): Line[] =>
    answer.splits.map((s, i) => ({ label: s.label, color: COLORS[i % COLORS.length], values: s.points.map(f) }));
  const per = answer.by === "key" ? "key" : "priority";
  return html`<div class="charts" data-testid=${`split-${answer.by}`}>
    <${Chart} title=${`Requests per second by ${per}`} x=${x} xRange=${range} lines=${lines((p) => p.rps)} />
    <${Chart} title=${`Tokens per second by ${per}`} x=${x} xRange=${range} lines=${lines((p) => p.tokens_per_s)} />
    <${Chart} title=${`Errors per second by ${per}`} x=${x} xRange=${range} lines=${lines((p) => p.errors_per_s)} />
    <${Chart} title=${`Mean latency by ${per}`} x=${x} xRange=${range} format=${duration} lines=${lines((p) => p.mean_ms)} />
  </div>`;
}

/** The split charts of a read, with its loading and error states. */
export function SplitRead({ read }: { read: Loaded<SplitAnswer> }) {
  if (read.error) return html`<${ErrorNote} error=${read.error} />`;
  if (!read.data) return html`<${Loading} />`;
  return html`<p class="muted chart-note">${
    read.data.by === "key"
      ? "Each key's share of the requests and tokens; under contention the queue shares slots between keys by their weight."
      : "Interactive requests are served first; batch (jobs and keys of batch priority) is never starved."
  }</p><${SplitCharts} answer=${read.data} />`;
}

/** The one time-range selector of a page; it drives the GPU and the workload charts alike. */
export function RangeSelect({ minutes, onChange }: { minutes: number; onChange(m: number): void }) {
  return html`<label>Time range <select value=${minutes} onChange=${(e: Event) => onChange(Number((e.target as HTMLSelectElement).value))}>
    ${WINDOWS.map(([m, label]) => html`<option value=${m}>${label}</option>`)}</select></label>`;
}

type Pick = (p: SeriesPoint) => number | null;

/** A share (0–1) as a whole percentage. */
const percent: Format = (v) => `${Math.round(v * 100)} %`;

/** Whether a workload had traffic (requests or a queue) in any bucket of its series. */
export const hadTraffic = (s: WorkloadSeries): boolean =>
  s.points.some((p) => (p.rps ?? 0) > 0 || (p.queue_depth ?? 0) > 0);

/**
 * The charts of some workloads: one colour per workload (kept whether or not the others had
 * traffic), p50 solid and p99 dashed in that colour; workloads without traffic in the range get no
 * line and no legend row. A bucket no host recorded (the server was down) breaks the lines.
 */
export function WorkloadCharts({ answer, label }: { answer: SeriesAnswer; label?: (s: WorkloadSeries) => string }) {
  if (answer.workloads.length === 0) return html`<p class="muted">No workloads yet.</p>`;
  const series = answer.workloads
    .map((s, i) => ({ s, color: COLORS[i % COLORS.length] }))
    .filter(({ s }) => hadTraffic(s));
  if (series.length === 0) return html`<p class="muted" data-testid="no-traffic">No requests in this time range.</p>`;
  const x = series[0].s.points.map((p) => secs(p.t));
  // Workloads by their names; the project too when the charts show more than one.
  const projects = new Set(answer.workloads.map((s) => s.project_slug)).size;
  const name = label ?? ((s: WorkloadSeries) => (projects > 1 ? `${s.name} (${s.project_slug})` : s.name));
  const one = (f: Pick, suffix = "", dash?: number[]): Line[] =>
    series.map(({ s, color }) => ({ label: `${name(s)}${suffix}`, color, dash, values: s.points.map(f) }));
  const pair = (p50: Pick, p99: Pick): Line[] => one(p50, " p50").flatMap((l, i) => [l, one(p99, " p99", DASHED)[i]]);
  const range = rangeOf(answer);
  // Only workloads routed by prompt prefix (with two replicas or more) have a hit rate.
  const prefixed = series.some(({ s }) => s.points.some((p) => p.prefix_hit_rate != null));
  const adapted = series.some(({ s }) => s.points.some((p) => p.lora_hit_rate != null));
  return html`<div class="charts">
    <${Chart} title="Requests per second" x=${x} xRange=${range} lines=${one((p) => p.rps)} />
    <${Chart} title="Errors per second" x=${x} xRange=${range} lines=${one((p) => p.errors_per_s)} />
    <${Chart} title="Latency p50 (solid) / p99 (dashed)" x=${x} xRange=${range} format=${duration} lines=${pair(
      (p) => p.p50_ms,
      (p) => p.p99_ms,
    )} />
    <${Chart} title="Time to first token p50 (solid) / p99 (dashed)" x=${x} xRange=${range} format=${duration} lines=${pair(
      (p) => p.ttft_p50_ms,
      (p) => p.ttft_p99_ms,
    )} />
    <${Chart} title="Tokens per second" x=${x} xRange=${range} lines=${one((p) => p.tokens_per_s)} />
    <${Chart} title="Queue depth" x=${x} xRange=${range} lines=${one((p) => p.queue_depth)} />
    ${prefixed ? html`<${Chart} title="Prefix hit rate (requests on the replica holding their conversation)" x=${x} xRange=${range} yRange=${[0, 1]} format=${percent} lines=${one((p) => p.prefix_hit_rate ?? null)} />` : null}
    ${adapted ? html`<${Chart} title="LoRA hit rate (requests whose adapter was loaded on their replica)" x=${x} xRange=${range} yRange=${[0, 1]} format=${percent} lines=${one((p) => p.lora_hit_rate ?? null)} />` : null}
  </div>`;
}

/** The workload charts of a series read, with its loading and error states. */
export function SeriesCharts({
  read,
  label,
}: {
  read: ReturnType<typeof useSeries>;
  label?: (s: WorkloadSeries) => string;
}) {
  if (read.error) return html`<${ErrorNote} error=${read.error} />`;
  if (!read.data) return html`<${Loading} />`;
  return html`<p class="muted chart-note">Points are complete 10 s buckets up to ${new Date(read.data.complete_until).toLocaleTimeString()}; the one still filling is not drawn, and a break in a line is time the server was down.</p>
    <${WorkloadCharts} answer=${read.data} label=${label} />`;
}

/** One workload's charts with their own time range, for the workload page. */
export function WorkloadActivity({ id }: { id: string }) {
  const [minutes, setMinutes] = useState(15);
  const [by, setBy] = useState<SplitBy>("workload");
  const read = useSeries(minutes, id);
  const split = useSplit(minutes, by === "workload" ? null : by, id);
  return html`<section aria-labelledby="activity"><h2 id="activity">Activity</h2>
    <div class="toolbar"><${RangeSelect} minutes=${minutes} onChange=${setMinutes} /><${SplitSelect} by=${by} onChange=${setBy} /></div>
    ${by === "workload" ? html`<${SeriesCharts} read=${read} label=${() => "this workload"} />` : html`<${SplitRead} read=${split} />`}
  </section>`;
}
