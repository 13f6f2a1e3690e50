/**
 * Charts over time, on one time range: GPU utilisation and memory per GPU, and per workload
 * requests, errors, latency, time to first token, tokens and queue depth; or requests, tokens,
 * errors and latency per key or per priority class (how the capacity is shared).
 */
import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { api } from "../lib/api";
import type { SeriesAnswer, Worker } from "../lib/types";
import { Chart, type Line, type Range } from "../components/chart";
import { Loading, PageTitle } from "../components/ui";
import {
  RangeSelect,
  rangeOf,
  secs,
  SeriesCharts,
  SplitRead,
  SplitSelect,
  useSeries,
  useSplit,
  type SplitBy,
} from "../components/workload-charts";

/** Each worker with its telemetry history, refreshed every `ms`. */
function useHistories(ms: number): Worker[] | undefined {
  const [list, setList] = useState<Worker[]>();
  useEffect(() => {
    let stop = false;
    const load = async () => {
      const workers = await api<Worker[]>("/admin/workers");
      const full = await Promise.all(workers.map((w) => api<Worker>(`/admin/workers/${w.id}`)));
      if (!stop) setList(full);
    };
    void load().catch(() => undefined);
    const timer = setInterval(() => !document.hidden && void load().catch(() => undefined), ms);
    return () => {
      stop = true;
      clearInterval(timer);
    };
  }, [ms]);
  return list;
}

const gib = (m: number) => +(m / 1024).toFixed(1);

/**
 * Sample times with a break (null) inserted where samples stop for longer than three usual
 * spacings (at least 2 s): the server or the agent was down, and the line must not bridge it.
 * @example withGaps([0, 5, 10, 60, 65]) // → { x: [0, 5, 10, 35, 60, 65], at: [0, 1, 2, null, 3, 4] }
 */
export function withGaps(times: number[]): { x: number[]; at: (number | null)[] } {
  const steps = times
    .slice(1)
    .map((t, i) => t - times[i])
    .sort((a, b) => a - b);
  const limit = Math.max(2, 3 * (steps[Math.floor(steps.length / 2)] ?? 0));
  const x: number[] = [];
  const at: (number | null)[] = [];
  times.forEach((t, i) => {
    if (i > 0 && t - times[i - 1] > limit) {
      x.push((t + times[i - 1]) / 2);
      at.push(null);
    }
    x.push(t);
    at.push(i);
  });
  return { x, at };
}

/** The GPU charts of one worker on the page's time range: utilisation on 0–100 %, memory on 0 to the GPUs' total. */
function GpuCharts({ w, range }: { w: Worker; range: Range }) {
  if (w.gpus.length === 0) return null;
  const samples = (w.history ?? []).filter((s) => secs(s.t) >= range[0] && secs(s.t) <= range[1]);
  const { x, at } = withGaps(samples.map((s) => secs(s.t)));
  const per = (f: (g: { utilization_percent: number; memory_used_mib: number }) => number): Line[] =>
    w.gpus.map((g) => ({
      label: `GPU ${g.index}`,
      values: at.map((i) => {
        const v = i === null ? undefined : samples[i].gpus.find((sg) => sg.index === g.index);
        return v ? f(v) : null;
      }),
    }));
  const totals = [...new Set(w.gpus.map((g) => gib(g.memory_total_mib)))];
  const top = Math.max(...totals);
  return html`<section aria-label=${`GPUs of ${w.name}`}><h3>${w.name}</h3><div class="charts">
    <${Chart} title=${`GPU utilisation · ${w.name}`} x=${x} xRange=${range} yRange=${[0, 100]} lines=${per((g) => g.utilization_percent)} unit="%" />
    <${Chart} title=${`GPU memory used · ${w.name} (GiB, of ${totals.join(" / ")} GiB per GPU)`} x=${x} xRange=${range} yRange=${[0, top]} lines=${per((g) => gib(g.memory_used_mib))} />
  </div></section>`;
}

/** The GPU section, once the range is known from the series answer. */
function Gpus({ workers, answer }: { workers?: Worker[]; answer?: SeriesAnswer }) {
  if (!workers || !answer) return html`<${Loading} />`;
  if (workers.every((w) => w.gpus.length === 0)) return html`<p class="muted">No worker has a GPU.</p>`;
  return workers.map((w) => html`<${GpuCharts} key=${w.id} w=${w} range=${rangeOf(answer)} />`);
}

/** The telemetry page. */
export function Telemetry() {
  const [minutes, setMinutes] = useState(15);
  const [by, setBy] = useState<SplitBy>("workload");
  const series = useSeries(minutes);
  const split = useSplit(minutes, by === "workload" ? null : by);
  const workers = useHistories(5000);
  return html`<${PageTitle} sub="Refreshed every 5 s.">Telemetry<//>
    <div class="toolbar"><${RangeSelect} minutes=${minutes} onChange=${setMinutes} /></div>
    <section aria-labelledby="gpu-h"><h2 id="gpu-h">GPUs</h2><${Gpus} workers=${workers} answer=${series.data} /></section>
    <section aria-labelledby="wl-h"><h2 id="wl-h">Requests</h2>
      <div class="toolbar"><${SplitSelect} by=${by} onChange=${setBy} /></div>
      ${by === "workload" ? html`<${SeriesCharts} read=${series} />` : html`<${SplitRead} read=${split} />`}
    </section>`;
}
