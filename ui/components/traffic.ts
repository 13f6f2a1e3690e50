/** The overview's traffic summary: requests, errors and tokens over the last hour, from the metrics series. */
import { html } from "htm/preact";
import { useApi } from "../lib/hooks";
import { count, noun } from "../lib/format";

/** The parts of a series point the summary adds up (rates per second over `interval_s`; null while the server was down). */
type RatePoint = { rps: number | null; errors_per_s?: number | null; tokens_per_s: number | null };

/** What `GET /admin/metrics/series` answers, as far as the summary reads it. */
interface SeriesAnswer {
  interval_s: number;
  workloads: { points: RatePoint[] }[];
}

/**
 * Totals over every workload's points: each rate times the bucket width, rounded (a gap counts nothing).
 * @example trafficTotals({ interval_s: 10, workloads: [{ points: [{ rps: 0.3, errors_per_s: 0.1, tokens_per_s: 5 }] }] }) // → { requests: 3, errors: 1, tokens: 50 }
 */
export function trafficTotals(s: SeriesAnswer): { requests: number; errors: number; tokens: number } {
  let requests = 0;
  let errors = 0;
  let tokens = 0;
  for (const w of s.workloads)
    for (const p of w.points) {
      requests += (p.rps ?? 0) * s.interval_s;
      errors += (p.errors_per_s ?? 0) * s.interval_s;
      tokens += (p.tokens_per_s ?? 0) * s.interval_s;
    }
  return { requests: Math.round(requests), errors: Math.round(errors), tokens: Math.round(tokens) };
}

/** Requests, errors and tokens in the last hour, refreshed every 10 s, linking to the charts. */
export function TrafficSummary() {
  const series = useApi<SeriesAnswer>("/admin/metrics/series?minutes=60", 10_000);
  if (!series.data) return null;
  const t = trafficTotals(series.data);
  return html`<section aria-labelledby="traffic" data-testid="traffic">
    <h2 id="traffic">Last hour</h2>
    <div class="stats">
      <a class="stat" href="/telemetry"><strong>${count(t.requests)}</strong> ${noun(t.requests, "request")}</a>
      <a class=${`stat ${t.errors ? "stat-bad" : ""}`} href="/telemetry"><strong>${count(t.errors)}</strong> ${noun(t.errors, "error")}</a>
      <a class="stat" href="/telemetry"><strong>${count(t.tokens)}</strong> ${noun(t.tokens, "token")}</a>
    </div>
  </section>`;
}
