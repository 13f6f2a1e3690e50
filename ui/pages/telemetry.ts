/** Charts over time: GPU utilisation and memory per GPU, and per workload requests/s, latency, tokens/s, queue depth. */
import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { api } from "../lib/api";
import { useApi } from "../lib/hooks";
import type { Worker, WorkloadSeries } from "../lib/types";
import { Chart, type Line } from "../components/chart";
import { ErrorNote, Loading, PageTitle } from "../components/ui";

const secs = (iso: string) => Date.parse(iso) / 1000;

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

/** The GPU charts of one worker within the last `minutes`. */
function GpuCharts({ w, minutes }: { w: Worker; minutes: number }) {
  const since = Date.now() / 1000 - minutes * 60;
  const samples = (w.history ?? []).filter((s) => secs(s.t) >= since);
  if (w.gpus.length === 0) return null;
  const x = samples.map((s) => secs(s.t));
  const per = (f: (g: { utilization_percent: number; memory_used_mib: number }) => number): Line[] =>
    w.gpus.map((g) => ({ label: `GPU ${g.index}`, values: samples.map((s) => {
      const v = s.gpus.find((sg) => sg.index === g.index);
      return v ? f(v) : null;
    }) }));
  return html`<section aria-label=${`GPUs of ${w.name}`}><h3>${w.name}</h3><div class="charts">
    <${Chart} title=${`GPU utilisation · ${w.name}`} x=${x} lines=${per((g) => g.utilization_percent)} unit="%" />
    <${Chart} title=${`GPU memory used · ${w.name} (GiB)`} x=${x} lines=${per((g) => +(g.memory_used_mib / 1024).toFixed(2))} />
  </div></section>`;
}

/** The per-workload charts. */
function WorkloadCharts({ series }: { series: WorkloadSeries[] }) {
  if (series.length === 0) return html`<p class="muted">No workloads yet.</p>`;
  const x = series[0].points.map((p) => secs(p.t));
  const line = (label: (s: WorkloadSeries) => string, f: (p: WorkloadSeries["points"][number]) => number | null): Line[] =>
    series.map((s) => ({ label: label(s), values: x.map((t) => {
      const p = s.points.find((q) => secs(q.t) === t);
      return p ? f(p) : null;
    }) }));
  const name = (s: WorkloadSeries) => `${s.project_slug}/${s.slug}`;
  return html`<div class="charts">
    <${Chart} title="Requests per second" x=${x} lines=${line(name, (p) => p.rps)} />
    <${Chart} title="Latency p50 / p99 (ms)" x=${x} lines=${[...line((s) => `${name(s)} p50`, (p) => p.p50_ms), ...line((s) => `${name(s)} p99`, (p) => p.p99_ms)]} />
    <${Chart} title="Tokens per second" x=${x} lines=${line(name, (p) => p.tokens_per_s)} />
    <${Chart} title="Queue depth" x=${x} lines=${line(name, (p) => p.queue_depth)} />
  </div>`;
}

/** The telemetry page. */
export function Telemetry() {
  const [minutes, setMinutes] = useState(15);
  const series = useApi<{ interval_s: number; workloads: WorkloadSeries[] }>(`/admin/metrics/series?minutes=${minutes}`, 5000);
  const workers = useHistories(5000);
  return html`<${PageTitle} sub="Refreshed every 5 s.">Telemetry<//>
    <div class="toolbar"><label>Window <select value=${minutes} onChange=${(e: Event) => setMinutes(Number((e.target as HTMLSelectElement).value))}>
      <option value="15">last 15 minutes</option><option value="60">last hour</option></select></label></div>
    <section aria-labelledby="gpu-h"><h2 id="gpu-h">GPUs</h2>
      ${!workers ? html`<${Loading} />` : workers.every((w) => w.gpus.length === 0) ? html`<p class="muted">No worker has a GPU.</p>`
        : workers.map((w) => html`<${GpuCharts} key=${w.id} w=${w} minutes=${minutes} />`)}
    </section>
    <section aria-labelledby="wl-h"><h2 id="wl-h">Workloads</h2>
      ${series.error ? html`<${ErrorNote} error=${series.error} />` : !series.data ? html`<${Loading} />` : html`<${WorkloadCharts} series=${series.data.workloads} />`}
    </section>`;
}
