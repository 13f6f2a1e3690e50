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

/** How a value is written on an axis tick, in the legend and for screen readers; `scale` is the largest value of the axis (the top of its range; the value itself elsewhere). */
export type Format = (v: number, scale: number) => string;

/**
 * Milliseconds as a latency is read: in ms below 10 s, in s from there (every tick of an axis in
 * the same unit, chosen by the top of its range).
 * @example duration(850, 2000) // → "850 ms"
 * @example duration(12500, 15000) // → "12.5 s"
 */
export const duration: Format = (v, scale) =>
  Math.abs(scale) >= 10_000 ? `${+(v / 1000).toFixed(1)} s` : `${+v.toFixed(Math.abs(v) < 10 ? 1 : 0)} ms`;

/** The default format: the value to two decimals and the unit. */
const plain =
  (unit: string): Format =>
  (v) =>
    `${+v.toFixed(2)}${unit}`;

/** uPlot's axis font (its default), to measure tick labels with. */
const AXIS_FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", sans-serif';

/** A label's width in px at the axis font (measured on a canvas; about 8 px a character where there is none). */
function textWidth(label: string): number {
  const ctx = typeof document === "undefined" ? null : document.createElement("canvas").getContext("2d");
  if (!ctx) return label.length * 8;
  ctx.font = AXIS_FONT;
  return ctx.measureText(label).width;
}

/**
 * Pixels a value axis needs for its longest tick label, plus the tick and its gap (15 px) and a
 * margin, so no label is clipped at the chart's left edge.
 */
export const axisWidth = (labels: string[], measure: (label: string) => number = textWidth): number =>
  Math.max(36, Math.ceil(Math.max(0, ...labels.map(measure))) + 20);

/** The line colours, in order; a workload keeps its colour across charts. */
export const COLORS = ["#3b82f6", "#f97316", "#10b981", "#e11d48", "#a855f7", "#eab308", "#06b6d4", "#64748b"];

/**
 * The top of an automatic value axis: a round number at least 8 % above the peak, so the highest
 * point is drawn whole below the top edge with a tick at or above it (1 for no traffic).
 * @example headroom(7.3) // → 8
 * @example headroom(100) // → 120
 */
export function headroom(peak: number): number {
  if (!(peak > 0)) return 1;
  const want = peak * 1.08;
  const step = 10 ** Math.floor(Math.log10(want));
  const nice = [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10].find((m) => m * step >= want) ?? 10;
  return +(nice * step).toPrecision(12);
}

/** The dash pattern of a p99 line (drawn in its p50's colour). */
export const DASHED = [6, 4];

type Ranges = { x?: Range; y?: Range; format: Format };

/** The points of a series with no value on either side, drawn as dots (no line reaches them); null draws none. */
function isolated(u: uPlot, i: number): number[] | null {
  const v = u.data[i] as (number | null | undefined)[];
  const out = v.flatMap((y, j) => (y != null && v[j - 1] == null && v[j + 1] == null ? [j] : []));
  return out.length ? out : null;
}

/** The uPlot options for `lines` at `width`; fixed ranges and the format are read from `live` on every redraw. */
function options(lines: Line[], width: number, live: { current: Ranges }): uPlot.Options {
  const axis = {
    stroke: "currentColor",
    grid: { stroke: "rgba(128,128,128,0.2)" },
    ticks: { stroke: "rgba(128,128,128,0.3)" },
  };
  // The value axis's labels as drawn, also kept on the figure (`data-y-ticks`): the canvas has no text to read.
  const ticks = (u: uPlot, values: number[]) => {
    const scale = Math.max(Math.abs(u.scales.y.max ?? 0), Math.abs(u.scales.y.min ?? 0), ...values.map(Math.abs));
    const labels = values.map((t) => live.current.format(t, scale));
    const figure = u.root.closest("figure");
    figure?.setAttribute("data-y-ticks", labels.join("|"));
    figure?.setAttribute("data-y-top", String(u.scales.y.max ?? ""));
    return labels;
  };
  return {
    width,
    height: 200,
    // A dashed line gets a dashed legend marker, so p99 reads as "the dashed one" in its p50's colour.
    legend: { show: true, markers: { dash: (u, i) => (u.series[i].dash ? "dashed" : "solid") } },
    cursor: { drag: { x: false, y: false } },
    scales: {
      x: { time: true, range: (_u, min, max) => live.current.x ?? [min, max] },
      // A fixed range stays unless a value passes its top; an automatic one leaves room above the peak.
      y: {
        range: (_u, min, max) => {
          const fixed = live.current.y;
          if (fixed) return [fixed[0], (max ?? 0) > fixed[1] ? headroom(max ?? 0) : fixed[1]];
          return [Math.min(0, min ?? 0), headroom(max ?? 0)];
        },
      },
    },
    // Time labels at least 60 px apart (they never touch at phone width); value labels sized to the longest.
    axes: [
      { ...axis, space: 60 },
      { ...axis, size: (_u, values) => axisWidth(values ?? []), values: (u, t) => ticks(u, t) },
    ],
    series: [
      {},
      ...lines.map((l, i) => ({
        label: l.label,
        stroke: l.color ?? COLORS[i % COLORS.length],
        dash: l.dash,
        width: 2,
        spanGaps: false,
        value: (_u: uPlot, v: number | null) => (v == null ? "–" : live.current.format(v, v)),
        points: { show: false, size: 5, filter: isolated },
      })),
    ],
  };
}

/**
 * A chart of `lines` over `x` (unix seconds) with a caption and the latest values for screen
 * readers. `xRange` pins the time axis (so charts side by side share one), `yRange` the value axis;
 * `format` writes the values (default: two decimals and `unit`). A null value breaks its line.
 */
export function Chart({
  title,
  x,
  lines,
  unit = "",
  format,
  xRange,
  yRange,
}: {
  title: string;
  x: number[];
  lines: Line[];
  unit?: string;
  format?: Format;
  xRange?: Range;
  yRange?: Range;
}) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot>();
  const live = useRef<Ranges>({ format: plain(unit) });
  live.current = { x: xRange, y: yRange, format: format ?? plain(unit) };
  const shape = lines.map((l) => `${l.label}\u0001${l.color}\u0001${l.dash}`).join("\u0000");
  const data = [x, ...lines.map((l) => l.values)] as uPlot.AlignedData;
  useEffect(() => {
    let gone = false;
    let observer: ResizeObserver | undefined;
    void import("uplot").then(({ default: UPlot }) => {
      if (gone || !box.current) return;
      const el = box.current;
      plot.current = new UPlot(options(lines, el.clientWidth || 300, live), data, el);
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
  const latest = lines
    .map((l) => {
      const v = l.values.filter((y) => y !== null).at(-1);
      return `${l.label}: ${v == null ? "no data" : live.current.format(v, v)}`;
    })
    .join(", ");
  const peak = Math.max(0, ...lines.flatMap((l) => l.values.filter((v): v is number => v != null)));
  return html`<figure class="chart card" aria-label=${`${title}. Latest: ${latest}`} data-y-peak=${peak} data-x-last=${x.at(-1) ?? ""} data-x-min=${xRange?.[0] ?? ""} data-x-max=${xRange?.[1] ?? ""} data-y-max=${yRange?.[1] ?? ""}>
    <figcaption>${title}</figcaption>
    <div ref=${box} class="chart-box" data-testid="chart"></div>
  </figure>`;
}
