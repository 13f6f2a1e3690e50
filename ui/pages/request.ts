/** One request of a workload: its figures, its timeline from the spans, and its captured bodies when there are any. */
import { html } from "htm/preact";
import { useApi } from "../lib/hooks";
import type { BodyView, RequestBodies, RequestDetail, Workload } from "../lib/types";
import { CopyButton, ErrorNote, Loading } from "../components/ui";
import { WorkloadHead } from "../components/workload-head";
import { msText, Timeline } from "../components/timeline";
import { can, whyNot } from "../lib/me";

/** A body as a person reads it: JSON indented, SSE and other text as sent, binary as its base64. */
function bodyText(b: BodyView): string {
  if (b.encoding === "base64") return b.data;
  if (b.type && /json/i.test(b.type) && !/ndjson/i.test(b.type)) {
    try {
      return JSON.stringify(JSON.parse(b.data), null, 2);
    } catch {
      return b.data;
    }
  }
  return b.data;
}

/** One captured body with its type and size. */
function Body({ title, b }: { title: string; b: BodyView | null }) {
  if (!b) return html`<h3>${title}</h3><p class="muted">Not captured.</p>`;
  const text = bodyText(b);
  return html`<h3>${title} <span class="muted small-text">${b.type ?? "no type"} · ${b.bytes.toLocaleString("en-US")} bytes${b.encoding === "base64" ? " · binary, shown as base64" : ""}</span></h3>
    <div class="body-box"><pre data-testid=${`body-${title.toLowerCase()}`}>${text}</pre></div>
    <div class="actions"><${CopyButton} text=${text} label=${`Copy ${title.toLowerCase()}`} /></div>`;
}

/** The captured bodies of a request (read only when it has some). */
function Bodies({ id }: { id: string }) {
  // Captured bodies are for operators and admins (a viewer is refused them): no read, a note instead.
  const bodies = useApi<RequestBodies>(
    can("workload.change") ? `/admin/requests/${encodeURIComponent(id)}/bodies` : null,
  );
  if (!can("workload.change")) return html`<p class="note role-note">${whyNot("workload.change")}</p>`;
  if (bodies.error) return html`<${ErrorNote} error=${bodies.error} />`;
  if (!bodies.data) return html`<${Loading} />`;
  return html`${bodies.data.truncated ? html`<p class="note warn" role="note">A body was longer than the capture limit: what is shown was cut.</p>` : null}
    <${Body} title="Request" b=${bodies.data.request} />
    <${Body} title="Response" b=${bodies.data.response} />`;
}

/** Label and value pairs of the request's figures. */
function Facts({ r }: { r: RequestDetail }) {
  const items: [string, unknown][] = [
    ["Time", new Date(r.at).toLocaleString()],
    ["Route", html`<code>${r.route}</code>`],
    ["Model", r.model ?? "–"],
    ["Status", html`${r.status}${r.error_code ? html` <code>${r.error_code}</code>` : null}`],
    ["Key", r.key ? html`${r.key.name ?? "(deleted key)"} <code>${r.key.prefix ?? r.key.id}</code>` : "–"],
    ["Tokens in / out", `${r.tokens_in ?? "–"} / ${r.tokens_out ?? "–"}`],
    ["Queue wait", msText(r.queue_ms)],
    ["Time to first token", msText(r.ttft_ms)],
    ["Total", msText(r.total_ms)],
    [
      "Replica",
      r.replica
        ? html`${r.replica.worker_name ?? r.replica.worker_id ?? ""} <code>${r.replica.assignment_id ?? ""}</code>`
        : "–",
    ],
    ["Request id", html`<code>${r.request_id ?? r.id}</code>`],
    ...(r.request_id && r.request_id !== r.id
      ? [
          [
            "Record id",
            html`<code>${r.id}</code> <span class="muted">(inferd's own; the request id above was the client's)</span>`,
          ] as [string, unknown],
        ]
      : []),
    ["Trace id", r.trace_id ? html`<code>${r.trace_id}</code>` : "–"],
  ];
  return html`<dl class="request-facts">${items.map(([k, v]) => html`<div><dt>${k}</dt><dd>${v}</dd></div>`)}</dl>`;
}

/** The page of one request. */
export function RequestPage({ id, requestId }: { id: string; requestId: string }) {
  const wl = useApi<Workload>(`/admin/workloads/${id}`);
  const req = useApi<RequestDetail>(`/admin/requests/${encodeURIComponent(requestId)}`);
  if (wl.error || req.error) return html`<${ErrorNote} error=${wl.error ?? req.error} />`;
  if (!wl.data || !req.data) return html`<${Loading} />`;
  const r = req.data;
  return html`<${WorkloadHead} w=${wl.data} current=${`/workloads/${id}/requests`} />
    <p><a href=${`/workloads/${id}/requests`}>← All requests</a></p>
    <section class="card"><h2>Request <code class="wrap">${r.request_id ?? r.id}</code></h2><${Facts} r=${r} /></section>
    <section class="card"><h2>Timeline</h2><${Timeline} spans=${r.spans} totalMs=${r.total_ms} /></section>
    <section class="card"><h2>Bodies</h2>
      ${r.captured ? html`<${Bodies} id=${r.id} />` : html`<p class="muted" data-testid="no-bodies">Not captured: bodies are kept only while capture is on for the workload (on the Requests tab).</p>`}
    </section>`;
}
