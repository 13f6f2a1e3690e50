/**
 * A workload's request inspector: its recent requests (newest first, refreshed while the page is
 * open, older ones on demand) with a filter by status, key and text, and the capture switch.
 */
import { html } from "htm/preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError } from "../lib/api";
import { useApi } from "../lib/hooks";
import { count } from "../lib/format";
import type { Key, RequestPage, RequestRow, Workload } from "../lib/types";
import { ErrorNote, Loading } from "../components/ui";
import { WorkloadHead } from "../components/workload-head";
import { CaptureControl } from "../components/capture-control";
import { msText } from "../components/timeline";
import { Can } from "../lib/me";

const PAGE = 50;
/** How often the newest page is read again while the page is open and visible. */
const REFRESH_MS = 3000;

/** The filter the list is read with. */
interface Filter {
  status: string;
  key: string;
  q: string;
}

const NONE: Filter = { status: "", key: "", q: "" };

/** The time of day of a row (the date in its title). */
const timeOf = (iso: string) =>
  html`<time datetime=${iso} title=${new Date(iso).toLocaleString()}>${new Date(iso).toLocaleTimeString()}</time>`;

/** A status as a badge: green below 400, red from 400, with the error code. */
const StatusCell = ({ r }: { r: RequestRow }) =>
  html`<span class=${`badge ${r.status < 400 ? "state-ready" : "state-failed"}`}>${r.status}</span>${r.error_code ? html`<div class="muted small-text"><code>${r.error_code}</code></div>` : null}`;

/** One row; its request id opens the request's page. */
function Row({ r, workloadId }: { r: RequestRow; workloadId: string }) {
  const href = `/workloads/${workloadId}/requests/${encodeURIComponent(r.id)}`;
  return html`<tr data-testid="request-row">
    <td>${timeOf(r.at)}</td>
    <td>${r.key ? html`${r.key.name ?? "(deleted key)"}<div class="muted small-text"><code>${r.key.prefix ?? r.key.id}</code></div>` : html`<span class="muted">${r.kind === "job" ? "job" : "–"}</span>`}</td>
    <td class="wrap">${r.model ?? "–"}</td>
    <td><${StatusCell} r=${r} /></td>
    <td class="num">${r.tokens_in ?? "–"} / ${r.tokens_out ?? "–"}</td>
    <td class="num">${msText(r.queue_ms)}</td>
    <td class="num">${msText(r.ttft_ms)}</td>
    <td class="num">${msText(r.total_ms)}</td>
    <td>${r.replica ? html`${r.replica.worker_name ?? r.replica.worker_id ?? ""}<div class="muted small-text"><code>${r.replica.assignment_id ?? ""}</code></div>` : "–"}</td>
    <td><a href=${href}><code>${r.request_id ?? r.id}</code></a>${r.captured ? html`<div class="muted small-text">bodies kept</div>` : null}</td>
  </tr>`;
}

/** Newest rows from a fresh first page, then the older ones already loaded below them. */
function merged(fresh: RequestRow[], old: RequestRow[]): RequestRow[] {
  const last = fresh[fresh.length - 1];
  if (!last) return [];
  return [...fresh, ...old.filter((o) => o.at < last.at || (o.at === last.at && o.id < last.id))];
}

/** The filter form: status, key and text; applied on submit. */
function FilterForm({ keys, onApply }: { keys: Key[]; onApply(f: Filter): void }) {
  const [draft, setDraft] = useState<Filter>(NONE);
  const set = (k: keyof Filter) => (e: Event) => setDraft({ ...draft, [k]: (e.target as HTMLInputElement).value });
  return html`<form class="card form filters request-filters" aria-label="Filter the requests" onSubmit=${(e: Event) => (e.preventDefault(), onApply(draft))}>
    <div class="limit-grid">
      <label>Status<select name="status" value=${draft.status} onChange=${set("status")}>
        <option value="">Any</option><option value="ok">Succeeded</option><option value="error">Failed</option>
        <option value="429">429 (limited)</option><option value="502">502 (upstream)</option><option value="503">503 (unavailable)</option>
      </select></label>
      <label>Key<select name="key" value=${draft.key} onChange=${set("key")}>
        <option value="">Any key</option>${keys.map((k) => html`<option value=${k.id}>${k.name} (${k.prefix})</option>`)}
      </select></label>
      <label>Request id or model<input name="q" type="search" value=${draft.q} onInput=${set("q")} placeholder="req_… or a model" /></label>
    </div>
    <div class="actions">
      <button type="button" onClick=${() => (setDraft(NONE), onApply(NONE))}>Clear</button>
      <button type="submit" class="primary">Filter</button>
    </div>
  </form>`;
}

/** The requests tab of a workload. */
export function RequestsPage({ id }: { id: string }) {
  const wl = useApi<Workload>(`/admin/workloads/${id}`);
  const keys = useApi<Key[]>(wl.data ? `/admin/projects/${wl.data.project_slug}/keys` : null);
  const [filter, setFilter] = useState<Filter>(NONE);
  const [rows, setRows] = useState<RequestRow[]>();
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<ApiError>();
  const [busy, setBusy] = useState(false);
  const older = useRef(false);
  const query = (before?: string) => {
    const q = new URLSearchParams({ limit: String(PAGE) });
    for (const [k, v] of Object.entries(filter)) if (v.trim()) q.set(k, v.trim());
    if (before) q.set("before", before);
    return `/admin/workloads/${id}/requests?${q}`;
  };
  const read = async (before?: string) => {
    try {
      const page = await api<RequestPage>(query(before));
      setError(undefined);
      return page;
    } catch (e) {
      setError(e instanceof ApiError ? e : new ApiError(0, "network", (e as Error).message));
      return undefined;
    }
  };
  const refresh = async () => {
    const page = await read();
    if (!page) return;
    setRows((old) => (older.current ? merged(page.requests, old ?? []) : page.requests));
    if (!older.current) setNext(page.next_before);
  };
  const loadOlder = async () => {
    if (!next) return;
    setBusy(true);
    const page = await read(next);
    setBusy(false);
    if (!page) return;
    older.current = true;
    setRows((old) => [...(old ?? []), ...page.requests]);
    setNext(page.next_before);
  };
  useEffect(() => {
    older.current = false;
    setRows(undefined);
    void refresh();
    const timer = setInterval(() => !document.hidden && void refresh(), REFRESH_MS);
    return () => clearInterval(timer);
  }, [id, filter]);
  if (wl.error) return html`<${ErrorNote} error=${wl.error} />`;
  if (!wl.data) return html`<${Loading} />`;
  const w = wl.data;
  const filtered = Object.values(filter).some((v) => v);
  return html`<${WorkloadHead} w=${w} current=${`/workloads/${w.id}/requests`} />
    <${Can} do="workload.change" project=${w.project_slug}><${CaptureControl} w=${w} onChange=${wl.reload} /><//>
    <${FilterForm} keys=${keys.data ?? []} onApply=${setFilter} />
    <${ErrorNote} error=${error} />
    ${
      !rows
        ? error
          ? null
          : html`<${Loading} />`
        : rows.length === 0
          ? html`<p class="muted" data-testid="no-requests">No requests${filtered ? " match this filter" : " yet: the data plane records each finished request here"}.</p>`
          : html`<p class="muted small-text" aria-live="polite">${count(rows.length)} shown, newest first; the list refreshes every few seconds.</p>
        <div class="table-wrap requests-table" tabindex="0" aria-label="Requests (scrolls sideways on narrow screens)"><table>
          <thead><tr><th scope="col">Time</th><th scope="col">Key</th><th scope="col">Model</th><th scope="col">Status</th><th scope="col" class="num">Tokens in / out</th><th scope="col" class="num">Queue</th><th scope="col" class="num">TTFT</th><th scope="col" class="num">Total</th><th scope="col">Replica</th><th scope="col">Request id</th></tr></thead>
          <tbody>${rows.map((r) => html`<${Row} key=${r.id} r=${r} workloadId=${w.id} />`)}</tbody>
        </table></div>
        ${next !== null ? html`<div class="actions"><button type="button" disabled=${busy} onClick=${loadOlder}>Load older</button></div>` : html`<p class="muted small-text">That is the oldest request kept (requests follow the job retention).</p>`}`
    }`;
}
