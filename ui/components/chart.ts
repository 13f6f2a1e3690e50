/** A time-series line chart drawn with uPlot (loaded on first use), sized to its container. */
import { html } from "htm/preact";
import { useEffect, useRef } from "preact/hooks";
import type uPlot from "uplot";

/** One line: its name, a value per x (null for a gap), and optionally its colour and dash pattern. */
export interface Line {
  label: string;
  values: (number | null)[];
  color?: string;
  dash?: number[];
}

/** A fixed [min, max] of an axis. */
export type Range = [number, number];

/** The line colours, in order; a workload keeps its colour across charts. */
export const COLORS = ["#3b82f6", "#f97316", "#10b981", "#e11d48", "#a855f7", "#eab308", "#06b6d4", "#64748b"];

/** The dash pattern of a p99 line (drawn in its p50's colour). */
export const DASHED = [6, 4];

type Ranges = { x?: Range; y?: Range };

/** The points of a series with no value on either side, drawn as dots (no line reaches them); null draws none. */
function isolated(u: uPlot, i: number): number[] | null {
  const v = u.data[i] as (number | null | undefined)[];
  const out = v.flatMap((y, j) => (y != null && v[j - 1] == null && v[j + 1] == null ? [j] : []));
  return out.length ? out : null;
}

/** The uPlot options for `lines` at `width`; fixed ranges are read from `ranges` on every redraw. */
function options(lines: Line[], width: number, unit: string, ranges: { current: Ranges }): uPlot.Options {
  const axis = { stroke: "currentColor", grid: { stroke: "rgba(128,128,128,0.2)" }, ticks: { stroke: "rgba(128,128,128,0.3)" } };
  return {
    width,
    height: 200,
    // A dashed line gets a dashed legend marker, so p99 reads as "the dashed one" in its p50's colour.
    legend: { show: true, markers: { dash: (u, i) => (u.series[i].dash ? "dashed" : "solid") } },
    cursor: { drag: { x: false, y: false } },
    scales: {
      x: { time: true, range: (_u, min, max) => ranges.current.x ?? [min, max] },
      y: { range: (_u, min, max) => ranges.current.y ?? [Math.min(0, min ?? 0), Math.max(max ?? 1, 1)] },
    },
    axes: [axis, { ...axis, size: 56, values: (_u, ticks) => ticks.map((t) => `${+t.toFixed(2)}${unit}`) }],
    series: [{}, ...lines.map((l, i) => ({ label: l.label, stroke: l.color ?? COLORS[i % COLORS.length], dash: l.dash, width: 2, spanGaps: false, points: { show: false, size: 5, filter: isolated } }))],
  };
}

/**
 * A chart of `lines` over `x` (unix seconds) with a caption and the latest values for screen
 * readers. `xRange` pins the time axis (so charts side by side share one), `yRange` the value axis.
 */
export function Chart({ title, x, lines, unit = "", xRange, yRange }: { title: string; x: number[]; lines: Line[]; unit?: string; xRange?: Range; yRange?: Range }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot>();
  const ranges = useRef<Ranges>({});
  ranges.current = { x: xRange, y: yRange };
  const shape = lines.map((l) => `${l.label}\u0001${l.color}\u0001${l.dash}`).join("\u0000");
  const data = [x, ...lines.map((l) => l.values)] as uPlot.AlignedData;
  useEffect(() => {
    let gone = false;
    let observer: ResizeObserver | undefined;
    void import("uplot").then(({ default: UPlot }) => {
      if (gone || !box.current) return;
      const el = box.current;
      plot.current = new UPlot(options(lines, el.clientWidth || 300, unit, ranges), data, el);
      observer = new ResizeObserver(() => plot.current?.setSize({ width: el.clientWidth || 300, height: 200 }));
      observer.observe(el);
    });
    return () => {
      gone = true;
      observer?.disconnect();
      plot.current?.destroy();
      plot.current = undefined;
    };
  }, [shape, unit]);
  useEffect(() => plot.current?.setData(data), [data]);
  const latest = lines.map((l) => {
    const v = l.values.filter((y) => y !== null).at(-1);
    return `${l.label}: ${v === undefined ? "no data" : +v.toFixed(2)}${unit}`;
  }).join(", ");
  return html`<figure class="chart card" aria-label=${`${title}. Latest: ${latest}`} data-x-last=${x.at(-1) ?? ""} data-x-min=${xRange?.[0] ?? ""} data-x-max=${xRange?.[1] ?? ""} data-y-max=${yRange?.[1] ?? ""}>
    <figcaption>${title}</figcaption>
    <div ref=${box} class="chart-box" data-testid="chart"></div>
  </figure>`;
}
