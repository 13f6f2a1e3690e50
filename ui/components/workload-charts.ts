/** Per-workload request charts over complete 10 s buckets, and the one time-range selector shared by every chart of a page. */
import { html } from "htm/preact";
import { useRef, useState } from "preact/hooks";
import { useApi, type Loaded } from "../lib/hooks";
import type { SeriesAnswer, SeriesPoint, WorkloadSeries } from "../lib/types";
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

/** The time axis every chart of the page shares: from the first bucket's start to the end of the last complete one. */
export const rangeOf = (s: SeriesAnswer): Range => [secs(s.from), secs(s.complete_until)];

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
  const name = label ?? ((s: WorkloadSeries) => `${s.project_slug}/${s.slug}`);
  const one = (f: Pick, suffix = "", dash?: number[]): Line[] =>
    series.map(({ s, color }) => ({ label: `${name(s)}${suffix}`, color, dash, values: s.points.map(f) }));
  const pair = (p50: Pick, p99: Pick): Line[] => one(p50, " p50").flatMap((l, i) => [l, one(p99, " p99", DASHED)[i]]);
  const range = rangeOf(answer);
  // Only workloads routed by prompt prefix (with two replicas or more) have a hit rate.
  const prefixed = series.some(({ s }) => s.points.some((p) => p.prefix_hit_rate != null));
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
  const read = useSeries(minutes, id);
  return html`<section aria-labelledby="activity"><h2 id="activity">Activity</h2>
    <div class="toolbar"><${RangeSelect} minutes=${minutes} onChange=${setMinutes} /></div>
    <${SeriesCharts} read=${read} label=${() => "this workload"} />
  </section>`;
}
