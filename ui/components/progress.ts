/** A download's progress as a bar with bytes, percent, rate and time left. */
import { html } from "htm/preact";
import { bytes, duration, rate } from "../lib/format";
import type { Progress } from "../lib/types";

/** The progress in words, e.g. "120 MiB of 469 MiB · 25% · 5.1 MiB/s · 1 min 8 s left". */
export function progressText(p: Progress): string {
  const parts = [`${bytes(p.bytes_done)} of ${bytes(p.bytes_total)}`, `${Math.floor(p.percent)}%`];
  if (p.rate_bps > 0) parts.push(rate(p.rate_bps));
  if (p.eta_s !== null && p.eta_s !== undefined && p.percent < 100) parts.push(`${duration(p.eta_s)} left`);
  return parts.join(" · ");
}

/**
 * A progress bar for a download; screen readers hear it in steps of 10 % (not every redraw).
 * @example html`<${DownloadProgress} progress=${m.progress} label=${`Downloading ${m.source}`} />`
 */
export function DownloadProgress({ progress, label }: { progress: Progress | null | undefined; label: string }) {
  if (!progress)
    return html`<div class="download"><span class="muted" aria-live="polite">Starting the download…</span></div>`;
  const pct = Math.max(0, Math.min(100, Math.floor(progress.percent)));
  const text = progressText(progress);
  return html`<div class="download" data-testid="download">
    <div class="bar" role="progressbar" aria-label=${label} aria-valuemin="0" aria-valuemax="100" aria-valuenow=${pct} aria-valuetext=${text}>
      <div class="bar-fill" style=${{ width: `${pct}%` }}></div>
    </div>
    <div class="download-text">${text}${progress.file ? html` <span class="muted wrap">· ${progress.file}</span>` : null}</div>
    <span class="offscreen" aria-live="polite">${label}: ${Math.floor(pct / 10) * 10}%</span>
  </div>`;
}
