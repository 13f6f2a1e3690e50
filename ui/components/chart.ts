/** A time-series line chart drawn with uPlot (loaded on first use), sized to its container. */
import { html } from "htm/preact";
import { useEffect, useRef } from "preact/hooks";
import type uPlot from "uplot";

/** One line: its name and a value per x (null for a gap). */
export interface Line {
  label: string;
  values: (number | null)[];
}

const COLORS = ["#3b82f6", "#f97316", "#10b981", "#e11d48", "#a855f7", "#eab308", "#06b6d4", "#64748b"];

/** The uPlot options for `lines` at `width`. */
function options(lines: Line[], width: number, unit: string): uPlot.Options {
  const axis = { stroke: "currentColor", grid: { stroke: "rgba(128,128,128,0.2)" }, ticks: { stroke: "rgba(128,128,128,0.3)" } };
  return {
    width,
    height: 200,
    legend: { show: true },
    cursor: { drag: { x: false, y: false } },
    scales: { x: { time: true }, y: { range: (_u, min, max) => [Math.min(0, min ?? 0), Math.max(max ?? 1, 1)] } },
    axes: [axis, { ...axis, size: 56, values: (_u, ticks) => ticks.map((t) => `${+t.toFixed(2)}${unit}`) }],
    series: [{}, ...lines.map((l, i) => ({ label: l.label, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: false, points: { show: false } }))],
  };
}

/** A chart of `lines` over `x` (unix seconds) with a caption and the latest values for screen readers. */
export function Chart({ title, x, lines, unit = "" }: { title: string; x: number[]; lines: Line[]; unit?: string }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot>();
  const shape = lines.map((l) => l.label).join("\u0000");
  const data = [x, ...lines.map((l) => l.values)] as uPlot.AlignedData;
  useEffect(() => {
    let gone = false;
    let observer: ResizeObserver | undefined;
    void import("uplot").then(({ default: UPlot }) => {
      if (gone || !box.current) return;
      const el = box.current;
      plot.current = new UPlot(options(lines, el.clientWidth || 300, unit), data, el);
      observer = new ResizeObserver(() => plot.current?.setSize({ width: el.clientWidth || 300, height: 200 }));
      observer.observe(el);
    });
    return () => {
      gone = true;
      observer?.disconnect();
      plot.current?.destroy();
      plot.current = undefined;
    };
  }, [shape]);
  useEffect(() => plot.current?.setData(data), [data]);
  const latest = lines.map((l) => `${l.label}: ${l.values.filter((v) => v !== null).at(-1) ?? "no data"}${unit}`).join(", ");
  return html`<figure class="chart card" aria-label=${`${title}. Latest: ${latest}`}>
    <figcaption>${title}</figcaption>
    <div ref=${box} class="chart-box" data-testid="chart"></div>
  </figure>`;
}
