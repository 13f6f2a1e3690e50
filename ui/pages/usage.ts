/** Usage per key, project or workload and day, with totals and a CSV download of the same rows. */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { useApi } from "../lib/hooks";
import { count } from "../lib/format";
import type { UsageExport } from "../lib/types";
import { ErrorNote, Loading, PageTitle } from "../components/ui";

const GROUPS = [
  { id: "workload", label: "Workload" },
  { id: "project", label: "Project" },
  { id: "key", label: "Key" },
] as const;

const dayOf = (t: number) => new Date(t).toISOString().slice(0, 10);

/** The usage page. */
export function UsagePage() {
  const [groupBy, setGroupBy] = useState<"workload" | "project" | "key">("workload");
  const [from, setFrom] = useState(() => dayOf(Date.now() - 6 * 86_400_000));
  const [to, setTo] = useState(() => dayOf(Date.now()));
  const query = `group_by=${groupBy}&from=${from}&to=${to}`;
  const usage = useApi<UsageExport>(`/admin/usage?${query}`, 10_000);
  const rows = usage.data?.rows ?? [];
  const total = rows.reduce(
    (t, r) => ({
      requests: t.requests + r.requests,
      errors: t.errors + r.errors,
      input: t.input + r.input_tokens,
      output: t.output + r.output_tokens,
    }),
    { requests: 0, errors: 0, input: 0, output: 0 },
  );
  const label = GROUPS.find((g) => g.id === groupBy)!.label;
  return html`<${PageTitle} sub="Requests, errors and tokens per UTC day, from the same counts as the metrics and the limits.">Usage<//>
    <form class="card form filters" aria-label="Choose the usage shown" onSubmit=${(e: Event) => e.preventDefault()}>
      <div class="limit-grid">
        <label>Group by<select name="group_by" value=${groupBy} onChange=${(e: Event) => setGroupBy((e.target as HTMLSelectElement).value as typeof groupBy)}>
          ${GROUPS.map((g) => html`<option value=${g.id}>${g.label}</option>`)}
        </select></label>
        <label>From<input type="date" name="from" value=${from} max=${to} onChange=${(e: Event) => setFrom((e.target as HTMLInputElement).value || from)} /></label>
        <label>To<input type="date" name="to" value=${to} min=${from} onChange=${(e: Event) => setTo((e.target as HTMLInputElement).value || to)} /></label>
      </div>
      <div class="actions"><a class="button" href=${`/admin/usage?${query}&format=csv`} download>Download CSV</a></div>
    </form>
    ${
      usage.error
        ? html`<${ErrorNote} error=${usage.error} />`
        : !usage.data
          ? html`<${Loading} />`
          : rows.length === 0
            ? html`<p class="muted">No traffic between ${from} and ${to}.</p>`
            : html`<div class="table-wrap" tabindex="0" aria-label="Usage rows (scrolls sideways on narrow screens)"><table class="usage">
          <thead><tr><th scope="col">Day</th><th scope="col">${label}</th><th scope="col" class="num">Requests</th><th scope="col" class="num">Errors</th><th scope="col" class="num">Input tokens</th><th scope="col" class="num">Output tokens</th></tr></thead>
          <tbody>${rows.map(
            (r) => html`<tr key=${`${r.day}/${r.id}`} data-testid="usage-row">
            <td>${r.day}</td><td>${r.label}</td><td class="num">${count(r.requests)}</td><td class="num">${count(r.errors)}</td><td class="num">${count(r.input_tokens)}</td><td class="num">${count(r.output_tokens)}</td>
          </tr>`,
          )}</tbody>
          <tfoot><tr data-testid="usage-total"><th scope="row" colspan="2">Total</th><td class="num">${count(total.requests)}</td><td class="num">${count(total.errors)}</td><td class="num">${count(total.input)}</td><td class="num">${count(total.output)}</td></tr></tfoot>
        </table></div>`
    }
    ${usage.data?.cloud?.length ? html`<${CloudTime} days=${usage.data.cloud} />` : null}`;
}

/** Cloud GPU workers' billed time and cost per pod and day. */
function CloudTime({ days }: { days: NonNullable<UsageExport["cloud"]> }) {
  const hours = (s: number) => (s / 3600).toFixed(2);
  const cost = days.reduce((t, d) => t + (d.billed_cost ?? 0), 0);
  return html`<h2>Cloud GPU time</h2>
    <div class="table-wrap" tabindex="0" aria-label="Cloud GPU time (scrolls sideways on narrow screens)"><table class="usage">
      <thead><tr><th scope="col">Day</th><th scope="col">Worker</th><th scope="col">Pod</th><th scope="col" class="num">GPUs</th><th scope="col" class="num">Hours billed</th><th scope="col" class="num">Cost</th></tr></thead>
      <tbody>${days.map(
        (d) => html`<tr key=${`${d.day}/${d.pod_id}`} data-testid="cloud-row">
        <td>${d.day}</td><td>${d.worker_name}</td><td>${d.provider} ${d.pod_id}</td><td class="num">${d.gpus}</td><td class="num">${hours(d.billed_seconds)}</td><td class="num">${d.billed_cost === null ? "–" : `$${d.billed_cost.toFixed(2)}`}</td>
      </tr>`,
      )}</tbody>
      <tfoot><tr><th scope="row" colspan="5">Total</th><td class="num">$${cost.toFixed(2)}</td></tr></tfoot>
    </table></div>`;
}
