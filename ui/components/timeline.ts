/**
 * One request's timeline: a bar per span on a shared time axis (ms from arrival), with each span's
 * attributes; the span where it failed (an `error` attribute) is drawn red.
 */
import { html } from "htm/preact";
import type { RequestDetail } from "../lib/types";

type Span = RequestDetail["spans"][number];

/** A duration in ms as the timeline writes it. */
export const msText = (ms: number | null | undefined) =>
  ms === null || ms === undefined
    ? "–"
    : ms >= 10_000
      ? `${(ms / 1000).toFixed(1)} s`
      : `${Math.round(ms * 10) / 10} ms`;

/** Tick marks of an axis of `total` ms: 0 and four more at round steps. */
function ticks(total: number): number[] {
  const raw = total / 4;
  const mag = 10 ** Math.floor(Math.log10(Math.max(raw, 1)));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= raw) ?? raw;
  const out: number[] = [];
  for (let t = 0; t <= total + 1e-9; t += step) out.push(t);
  return out;
}

/** Percent of the axis at `ms`. */
const pct = (ms: number, total: number) => `${Math.min(100, Math.max(0, (ms / total) * 100))}%`;

/** The span's attributes as a short list. */
function Attrs({ attrs }: { attrs?: Span["attrs"] }) {
  const list = Object.entries(attrs ?? {});
  if (!list.length) return null;
  return html`<dl class="span-attrs">${list.map(([k, v]) => html`<div><dt>${k}</dt><dd>${String(v)}</dd></div>`)}</dl>`;
}

/** The spans of a request over `totalMs`, in the order they started. */
export function Timeline({ spans, totalMs }: { spans: Span[]; totalMs: number }) {
  if (!spans.length) return html`<p class="muted">No spans were recorded for this request.</p>`;
  const total = Math.max(totalMs, ...spans.map((s) => s.end), 1);
  const ordered = [...spans].sort((a, b) => a.start - b.start);
  return html`<div class="timeline" role="list" aria-label=${`Timeline over ${msText(total)}`}>
    <div class="tl-row tl-axis" aria-hidden="true">
      <span class="tl-name"></span>
      <div class="tl-track">${ticks(total).map((t) => html`<span class="tl-tick" style=${{ left: pct(t, total) }}>${msText(t)}</span>`)}</div>
    </div>
    ${ordered.map(
      (s) => html`<div class="tl-row" role="listitem" data-testid="span">
      <span class="tl-name"><strong>${s.name}</strong> <span class="muted">${msText(s.end - s.start)} · at ${msText(s.start)}</span></span>
      <div class="tl-track">
        <div class=${s.attrs?.error !== undefined ? "tl-bar tl-failed" : "tl-bar"} data-testid="span-bar" data-failed=${s.attrs?.error !== undefined ? "true" : undefined} title=${`${s.name}: ${msText(s.start)} → ${msText(s.end)}${s.attrs?.error !== undefined ? ` (failed: ${s.attrs.error})` : ""}`}
          style=${{ left: pct(s.start, total), width: `max(2px, ${pct(s.end - s.start, total)})` }}></div>
      </div>
      <${Attrs} attrs=${s.attrs} />
    </div>`,
    )}
  </div>`;
}
