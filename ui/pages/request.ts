/** One request of a workload: its figures, its timeline from the spans, and its captured bodies when there are any. */
import { html } from "htm/preact";
import { useEffect, useRef } from "preact/hooks";
import { useApi } from "../lib/hooks";
import type { BodyView, RequestBodies, RequestDetail, Workload } from "../lib/types";
import { CopyButton, ErrorNote, Loading, PageTitle } from "../components/ui";
import { WorkloadHead } from "../components/workload-head";
import { msText, Timeline } from "../components/timeline";
import { BodiesNotForRole } from "../components/capture-control";
import { can } from "../lib/me";

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
  if (!can("workload.change")) return html`<${BodiesNotForRole} />`;
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
    ["Workload", r.workload_name ?? html`<span class="muted">none (refused before one was chosen)</span>`],
    ["Status", html`${r.status}${r.error_code ? html` <code>${r.error_code}</code>` : null}`],
    ["Key", r.key ? html`${r.key.name ?? "(deleted key)"} <code>${r.key.prefix ?? r.key.id}</code>` : "–"],
    ["Tokens in / out", `${r.tokens_in ?? "–"} / ${r.tokens_out ?? "–"}`],
    ["Queue wait", msText(r.queue_ms)],
    ["Time to first token", r.ttft_ms === null ? html`– <span class="muted">(not streamed)</span>` : msText(r.ttft_ms)],
    ["Total", msText(r.total_ms)],
    [
      "Replica",
      r.replica
        ? html`<span title=${r.replica.assignment_id ? `replica ${r.replica.assignment_id}` : ""}>${r.replica.worker_name ?? "this machine"}</span>`
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

/** The names of a project's workloads by id (to name the workloads a request fell back from). */
function useWorkloadNames(projectId: string | undefined): Map<string, string> {
  const list = useApi<Workload[]>(projectId ? `/admin/projects/${encodeURIComponent(projectId)}/workloads` : null);
  return new Map((list.data ?? []).map((w) => [w.id, w.name]));
}

/**
 * What happened, first: why it failed (inferd's reason or the runtime's own words), that it was
 * refused before any workload, and the route it took when it fell back.
 */
function Outcome({ r }: { r: RequestDetail }) {
  const names = useWorkloadNames(r.fell_back_from.length ? r.project_id : undefined);
  const nameOf = (id: string | null) => (id ? (names.get(id) ?? id) : "no workload");
  const failed = r.status >= 400;
  const refused = failed && !r.replica;
  return html`<section class=${`card outcome ${failed ? "outcome-failed" : "outcome-ok"}`} data-testid="request-outcome" aria-label="What happened">
    <h2>${failed ? (refused ? "Refused" : "Failed") : "Answered"} · ${r.status}${r.error_code ? html` <code>${r.error_code}</code>` : null}</h2>
    ${failed ? html`<p class="request-reason" data-testid="request-reason">${r.error_message ?? "No reason was recorded (the answer's status is all that is known)."}</p>` : null}
    ${refused ? html`<p class="muted">It never reached a model runtime${r.workload_id ? "" : ": it was refused before a workload was chosen"}.</p>` : null}
    ${
      r.fell_back_from.length
        ? html`<p data-testid="fell-back-route">Fell back: ${r.fell_back_from.map((t) => html`<a href=${`/workloads/${t.workload_id}`}>${nameOf(t.workload_id)}</a> (${t.status}${t.error_code ? ` ${t.error_code}` : ""}) → `)}<a href=${`/workloads/${r.workload_id}`}>${nameOf(r.workload_id)}</a>, which ${failed ? "failed too" : "answered"}.</p>`
        : null
    }
  </section>`;
}

/** "Open in playground": a captured chat request's messages, loaded into the workload's playground. */
function OpenInPlayground({ r }: { r: RequestDetail }) {
  if (!r.captured || !r.workload_id || !/chat\/completions$/.test(r.route) || !can("workload.change")) return null;
  return html`<a class="button" data-testid="open-in-playground" href=${`/workloads/${r.workload_id}/playground?from=${encodeURIComponent(r.id)}`}>Open in playground</a>`;
}

/**
 * The page of one request: of a workload (`id`), or found by its id alone (`/requests/:id`: a
 * refusal has no workload; the playground links here). A record is written a moment after its
 * request ends, so a missing one is asked for again a few times before "not found" stands.
 */
export function RequestPage({ id, requestId }: { id?: string; requestId: string }) {
  const req = useApi<RequestDetail>(`/admin/requests/${encodeURIComponent(requestId)}`);
  const tries = useRef(0);
  useEffect(() => {
    if (req.error?.status !== 404 || tries.current >= 5) return;
    const t = setTimeout(() => ((tries.current += 1), void req.reload()), 1000);
    return () => clearTimeout(t);
  }, [req.error]);
  const workloadId = id ?? req.data?.workload_id ?? undefined;
  const wl = useApi<Workload>(workloadId ? `/admin/workloads/${workloadId}` : null);
  if (req.error && (req.error.status !== 404 || tries.current >= 5)) return html`<${ErrorNote} error=${req.error} />`;
  if (!req.data) return html`<${Loading} />`;
  const r = req.data;
  const back = workloadId
    ? html`<p><a href=${`/workloads/${workloadId}/requests`}>← All requests of the workload</a></p>`
    : html`<p><a href=${`/projects/${encodeURIComponent(r.project_id)}/requests`}>← All requests of the project</a></p>`;
  return html`${wl.data ? html`<${WorkloadHead} w=${wl.data} current=${`/workloads/${wl.data.id}/requests`} />` : html`<${PageTitle} sub="Request">${r.request_id ?? r.id}<//>`}
    ${back}
    <${Outcome} r=${r} />
    <section class="card"><h2>Request <code class="wrap">${r.request_id ?? r.id}</code>${r.source === "playground" ? html` <span class="badge">playground</span>` : null}</h2><${Facts} r=${r} /><div class="actions"><${OpenInPlayground} r=${r} /></div></section>
    <section class="card"><h2>Timeline</h2><${Timeline} spans=${r.spans} totalMs=${r.total_ms} /></section>
    <section class="card"><h2>Bodies</h2>
      ${r.captured ? html`<${Bodies} id=${r.id} />` : html`<p class="muted" data-testid="no-bodies">Not captured: bodies are kept only while capture is on for the workload (on the Requests tab).</p>`}
    </section>`;
}
