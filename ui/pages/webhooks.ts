/** A workload's webhook destinations (add with the secret shown once, test ping, delete) and job deliveries. */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api } from "../lib/api";
import { useAction, useApi } from "../lib/hooks";
import { ago, when } from "../lib/format";
import type { Attempt, Job, PingResult, Webhook, Workload } from "../lib/types";
import type { deliveryPolicy } from "../../src/webhooks/routes";
import { ConfirmButton, ErrorNote, Loading, RequestId, SecretOnce, StateBadge } from "../components/ui";
import { WorkloadHead } from "../components/workload-head";
import { Can } from "../lib/me";

/** How deliveries go now (`GET /admin/webhooks/delivery`). */
type Delivery = ReturnType<typeof deliveryPolicy>;

/**
 * A delay as the page says it.
 * @example delayText(90_000) // → "1.5 min"
 */
function delayText(ms: number): string {
  const [n, unit] =
    ms >= 3_600_000
      ? [ms / 3_600_000, "h"]
      : ms >= 60_000
        ? [ms / 60_000, "min"]
        : ms >= 1000
          ? [ms / 1000, "s"]
          : [ms, "ms"];
  return `+${Number(n.toFixed(2))} ${unit}`;
}

/** What inferd keeps of a destination's signing secret, as the secret box says it. */
const SECRET_KEPT =
  "inferd keeps this secret in plain text in its store (it signs every delivery with it) and never shows it again, only its prefix; deleting the destination wipes it.";

/** The retry schedule in force and whether private receivers are allowed. */
function DeliveryNote({ d }: { d: Delivery | undefined }) {
  if (!d) return html`<p class="muted">Every finished job's result is POSTed, signed, to each destination.</p>`;
  const delays = d.retry_delays_ms.map(delayText);
  return html`<p class="muted" data-testid="retry-schedule">Every finished job's result is POSTed, signed, to each destination; a failed delivery is retried at ${delays.slice(0, -1).join(", ")}${delays.length > 1 ? " and " : ""}${delays.at(-1)} (${d.attempts} attempts in all, then it gives up). The schedule in force is <code>${d.retry_schedule}</code>: <a href="/settings">change it in Settings</a> or with <code>${d.flags.retry_schedule}</code>.</p>
    ${d.allow_private_webhooks ? html`<p class="note warn" role="note">Private and loopback receivers are allowed on this server (<code>${d.flags.allow_private_webhooks}</code>, or Private webhooks in <a href="/settings">Settings</a>).</p>` : null}`;
}

/** One destination with its test button and the receiver's last answer. */
function Destination({ hook, onDeleted }: { hook: Webhook; onDeleted(): void }) {
  const ping = useAction(() => api<PingResult>(`/admin/webhooks/${hook.id}/test`, { method: "POST" }));
  const [result, setResult] = useState<PingResult>();
  const del = useAction(() => api(`/admin/webhooks/${hook.id}`, { method: "DELETE" }).then(() => true));
  const test = async () => setResult(await ping.run());
  return html`<li class="card hook">
    <div class="hook-head"><code class="wrap">${hook.url}</code><span class="muted">secret <code>${hook.secret_prefix}…</code></span></div>
    <${Can} do="webhook.change"><div class="actions">
      <button type="button" onClick=${test} disabled=${ping.busy}>${ping.busy ? "Sending…" : "Send test ping"}</button>
      <${ConfirmButton} label="Delete" title="Delete this destination?" confirm="Delete destination" body=${html`<p>Results stop going to <code>${hook.url}</code>.</p>`}
        onConfirm=${async () => (await del.run()) && onDeleted()} />
    </div><//>
    <${ErrorNote} error=${ping.error ?? del.error} />
    ${
      result
        ? html`<div class=${`ping ${result.ok ? "ok" : "failed"}`} role="status" data-testid="ping-result">
        <strong>${result.ok ? "Delivered" : "Failed"}</strong>
        ${result.status_code !== null ? html` · HTTP ${result.status_code}` : null} · ${result.duration_ms} ms
        ${result.error ? html`<div>${result.error}</div>` : null}
        ${result.body ? html`<pre><code>${result.body}</code></pre>` : null}
      </div>`
        : null
    }
  </li>`;
}

/** The attempts of one delivery, loaded when opened. */
function Attempts({ id }: { id: string }) {
  const list = useApi<Attempt[]>(`/admin/deliveries/${id}/attempts`);
  if (!list.data) return html`<${Loading} />`;
  if (list.data.length === 0) return html`<p class="muted">No attempt yet.</p>`;
  return html`<ol class="attempts">${list.data.map((a) => html`<li>#${a.n} ${when(a.at)} · ${a.status_code !== null ? `HTTP ${a.status_code}` : (a.error ?? "no answer")}${a.duration_ms !== null ? ` · ${a.duration_ms} ms` : ""}</li>`)}</ol>`;
}

/** Recent jobs and where their results went. */
function Jobs({ id, project }: { id: string; project: string }) {
  const jobs = useApi<Job[]>(`/admin/workloads/${id}/jobs?limit=20`, 3000);
  if (jobs.error) return html`<${ErrorNote} error=${jobs.error} />`;
  if (!jobs.data) return html`<${Loading} />`;
  if (jobs.data.length === 0)
    return html`<p class="muted">No jobs yet. Apps submit them with <code>POST …/jobs</code>.</p>`;
  return html`<ul class="jobs">${jobs.data.map(
    (j) => html`<li class="card">
    <div class="job-head"><code>${j.job_id}</code> <span>${j.kind}</span> <${StateBadge} state=${j.status} /> <span class="muted">${ago(j.created_at)}</span></div>
    ${j.batch ? html`<p class="small-text" data-testid="job-batch">Request <code>${j.batch.custom_id ?? "?"}</code> of batch <a href=${`/projects/${encodeURIComponent(project)}/batches/${encodeURIComponent(j.batch.id)}`}><code>${j.batch.id}</code></a></p>` : null}
    ${j.request_id ? html`<${RequestId} id=${j.request_id} />` : null}
    ${
      j.deliveries.length === 0
        ? html`<p class="muted">No deliveries.</p>`
        : html`<div class="table-wrap"><table>
      <thead><tr><th scope="col">Destination</th><th scope="col">State</th><th scope="col">Attempts</th><th scope="col">Last status</th><th scope="col">Next attempt</th></tr></thead>
      <tbody>${j.deliveries.map(
        (d) => html`<tr>
        <td class="wrap"><code>${d.url}</code></td><td><${StateBadge} state=${d.state} /></td>
        <td><details><summary>${d.attempts}</summary><${Attempts} id=${d.id} /></details></td>
        <td>${d.last_status_code ?? d.last_error ?? "–"}</td>
        <td>${d.next_attempt_at ? html`<time datetime=${d.next_attempt_at} title=${when(d.next_attempt_at)}>${ago(d.next_attempt_at)}</time>` : "–"}</td></tr>`,
      )}
      </tbody></table></div>`
    }
  </li>`,
  )}</ul>`;
}

/** The webhooks page of a workload. */
export function WebhooksPage({ id }: { id: string }) {
  const wl = useApi<Workload>(`/admin/workloads/${id}`);
  const delivery = useApi<Delivery>("/admin/webhooks/delivery");
  const hooks = useApi<Webhook[]>(`/admin/workloads/${id}/webhooks`);
  const [url, setUrl] = useState("");
  const [fresh, setFresh] = useState<Webhook>();
  const add = useAction((u: string) => api<Webhook>(`/admin/workloads/${id}/webhooks`, { body: { url: u } }));
  if (wl.error) return html`<${ErrorNote} error=${wl.error} />`;
  if (!wl.data) return html`<${Loading} />`;
  const submit = async (e: Event) => {
    e.preventDefault();
    const h = await add.run(url.trim());
    if (h) {
      setFresh(h);
      setUrl("");
      void hooks.reload();
    }
  };
  return html`<${WorkloadHead} w=${wl.data} current=${`/workloads/${id}/webhooks`} />
    <${DeliveryNote} d=${delivery.data} />
    ${fresh?.secret ? html`<${SecretOnce} secret=${fresh.secret} what="signing secret" kept=${SECRET_KEPT} onDone=${() => setFresh(undefined)} />` : null}
    <${Can} do="webhook.change" project=${wl.data.project_slug} note><form class="card form" onSubmit=${submit} aria-label="Add a destination">
      <label>Destination URL<input name="url" type="url" required value=${url} onInput=${(e: Event) => setUrl((e.target as HTMLInputElement).value)} placeholder="https://example.com/hooks/inferd" /></label>
      <${ErrorNote} error=${add.error} />
      <div class="actions"><button type="submit" class="primary" disabled=${add.busy || !url.trim()}>Add destination</button></div>
    </form><//>
    <h2>Destinations</h2>
    ${
      !hooks.data
        ? html`<${Loading} />`
        : hooks.data.length === 0
          ? html`<p class="muted">None yet.</p>`
          : html`<ul class="hooks">${hooks.data.map((h) => html`<${Destination} key=${h.id} hook=${h} onDeleted=${() => hooks.reload()} />`)}</ul>`
    }
    <h2>Jobs and deliveries</h2>
    <${Can} do="logs.read" project=${wl.data.project_slug} note><${Jobs} id=${id} project=${wl.data.project_slug} /><//>`;
}
