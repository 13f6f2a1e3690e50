/** The audit log: who changed what and when, filtered by actor, target and action, older pages on demand. */
import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { api, ApiError } from "../lib/api";
import { ago } from "../lib/format";
import type { AuditEntry, AuditPage } from "../lib/types";
import { ErrorNote, Loading, PageTitle } from "../components/ui";

const PAGE = 50;

/** A value of a diff as a person reads it. */
const shown = (v: unknown) => (v === null || v === undefined ? "none" : typeof v === "string" ? v : JSON.stringify(v));

/** What changed: `field: from → to` for updates, `field: value` for what a creation set. */
function Changes({ diff }: { diff: Record<string, unknown> }) {
  const rows = Object.entries(diff);
  if (rows.length === 0) return html`<span class="muted">–</span>`;
  return html`<ul class="diff">${rows.map(([k, v]) => {
    const d = v as { from?: unknown; to?: unknown } | null;
    return d && typeof d === "object" && "from" in d && "to" in d
      ? html`<li><code>${k}</code>: <del>${shown(d.from)}</del> → <ins>${shown(d.to)}</ins></li>`
      : html`<li><code>${k}</code>: ${shown(v)}</li>`;
  })}</ul>`;
}

/** The audit log page. */
export function AuditPageView() {
  const [filters, setFilters] = useState({ actor: "", target: "", action: "" });
  const [draft, setDraft] = useState(filters);
  const [entries, setEntries] = useState<AuditEntry[]>();
  const [next, setNext] = useState<number | null>(null);
  const [error, setError] = useState<ApiError>();
  const [busy, setBusy] = useState(false);
  const load = async (before?: number) => {
    setBusy(true);
    const q = new URLSearchParams({ limit: String(PAGE) });
    for (const [k, v] of Object.entries(filters)) if (v.trim()) q.set(k, v.trim());
    if (before !== undefined) q.set("before", String(before));
    try {
      const page = await api<AuditPage>(`/admin/audit?${q}`);
      setEntries((old) => (before !== undefined ? [...(old ?? []), ...page.entries] : page.entries));
      setNext(page.next_before);
      setError(undefined);
    } catch (e) {
      setError(e instanceof ApiError ? e : new ApiError(0, "network", (e as Error).message));
    } finally {
      setBusy(false);
    }
  };
  useEffect(() => void load(), [filters]);
  const set = (k: keyof typeof draft) => (e: Event) =>
    setDraft({ ...draft, [k]: (e.target as HTMLInputElement).value });
  return html`<${PageTitle} sub="Every admin and control-plane change: who, what, when. Secrets are never written here.">Audit log<//>
    <form class="card form filters" aria-label="Filter the audit log" onSubmit=${(e: Event) => {
      e.preventDefault();
      setFilters(draft);
    }}>
      <div class="limit-grid">
        <label>Actor<input name="actor" value=${draft.actor} onInput=${set("actor")} placeholder="admin, session, a key id" /></label>
        <label>Target<input name="target" value=${draft.target} onInput=${set("target")} placeholder="an id or name, e.g. prod/chat" /></label>
        <label>Action<input name="action" value=${draft.action} onInput=${set("action")} placeholder="e.g. key or workload.update" /></label>
      </div>
      <div class="actions">
        <button type="button" onClick=${() => {
          const none = { actor: "", target: "", action: "" };
          setDraft(none);
          setFilters(none);
        }}>Clear</button>
        <button type="submit" class="primary">Filter</button>
      </div>
    </form>
    <${ErrorNote} error=${error} />
    ${
      !entries
        ? error
          ? null
          : html`<${Loading} />`
        : entries.length === 0
          ? html`<p class="muted">No entries${Object.values(filters).some((v) => v) ? " match these filters" : " yet"}.</p>`
          : html`<div class="table-wrap" tabindex="0" aria-label="Audit entries (scrolls sideways on narrow screens)"><table class="audit">
          <thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">Action</th><th scope="col">Target</th><th scope="col">Changes</th></tr></thead>
          <tbody>${entries.map(
            (e) => html`<tr key=${e.id} data-testid="audit-row">
            <td><span title=${new Date(e.at).toLocaleString()}>${ago(e.at)}</span></td>
            <td>${e.actor.label}${e.actor.id ? html`<div class="muted small-text"><code>${e.actor.id}</code></div>` : null}</td>
            <td><code>${e.action}</code>${e.request_id ? html`<div class="muted small-text" title="The request that made this change">request <code data-testid="audit-request-id">${e.request_id}</code></div>` : null}</td>
            <td>${e.target.label ?? e.target.id ?? e.target.type}<div class="muted small-text">${e.target.type}</div></td>
            <td><${Changes} diff=${e.diff} /></td>
          </tr>`,
          )}</tbody>
        </table></div>
        ${next !== null ? html`<div class="actions"><button type="button" disabled=${busy} onClick=${() => load(next)}>Older entries</button></div>` : html`<p class="muted">That is the oldest entry kept.</p>`}`
    }`;
}
