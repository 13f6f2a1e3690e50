/**
 * The request inspector's list, for a workload or a whole project: recent requests newest first
 * (refreshed while the page is open, older ones on demand), filtered by status, key, workload, source
 * and text. The filter lives in the page's address (a reload or a shared link keeps it); each row
 * leads with its request id (the link) and says why a request failed, or where it fell back from.
 */
import { html } from "htm/preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api, ApiError } from "../lib/api";
import { count } from "../lib/format";
import { navigate, replaceQuery } from "../lib/router";
import type { Key, RequestPage, RequestRow } from "../lib/types";
import { ErrorNote, Loading } from "./ui";
import { msText } from "./timeline";

const PAGE = 50;
/** How often the newest page is read again while the page is open and visible. */
const REFRESH_MS = 3000;

/** The filter the list is read with (each one a query parameter of the page and of the API). */
export interface RequestFilter {
  status: string;
  key: string;
  q: string;
  workload: string;
  source: string;
}

const FIELDS = ["status", "key", "q", "workload", "source"] as const;
const NONE: RequestFilter = { status: "", key: "", q: "", workload: "", source: "" };

/** The filter the page's address names. */
const filterOf = (query: URLSearchParams): RequestFilter =>
  Object.fromEntries(FIELDS.map((f) => [f, query.get(f) ?? ""])) as unknown as RequestFilter;

/** Where one request's page is (a workload's list keeps its workload in the address). */
export const requestHref = (r: { id: string }, workloadId?: string) =>
  workloadId
    ? `/workloads/${workloadId}/requests/${encodeURIComponent(r.id)}`
    : `/requests/${encodeURIComponent(r.id)}`;

/** The time of day of a row (the date in its title). */
const timeOf = (iso: string) =>
  html`<time datetime=${iso} title=${new Date(iso).toLocaleString()}>${new Date(iso).toLocaleTimeString()}</time>`;

/** A status as a badge (green below 400, red from 400), with the reason it failed under it. */
function StatusCell({ r }: { r: RequestRow }) {
  return html`<span class=${`badge ${r.status < 400 ? "state-ready" : "state-failed"}`}>${r.status}</span>${r.error_code ? html` <code class="small-text">${r.error_code}</code>` : null}
    ${r.error_message ? html`<div class="request-reason small-text" data-testid="request-reason" title=${r.error_message}>${r.error_message}</div>` : null}
    ${r.fell_back_from.length ? html`<div class="muted small-text" data-testid="fell-back">fell back from ${r.fell_back_from.length} workload${r.fell_back_from.length === 1 ? "" : "s"}</div>` : null}`;
}

/** The key of a row: its name and prefix, the playground, or none. */
const KeyCell = ({ r }: { r: RequestRow }) =>
  r.key
    ? html`${r.key.name ?? "(deleted key)"}<div class="muted small-text"><code>${r.key.prefix ?? r.key.id}</code></div>`
    : html`<span class="muted">${r.source === "playground" ? "playground" : r.kind === "job" ? "job" : "–"}</span>`;

/** Where it ran: the worker's name (the replica's id in the title), or why it ran nowhere. */
const ReplicaCell = ({ r }: { r: RequestRow }) =>
  r.replica
    ? html`<span title=${r.replica.assignment_id ? `replica ${r.replica.assignment_id}` : ""}>${r.replica.worker_name ?? "this machine"}</span>`
    : html`<span class="muted">${r.status >= 400 && !r.workload_id ? "refused" : "–"}</span>`;

/** One row; the request id (first) is its link, and a click anywhere on the row opens it. */
function Row({ r, workloadId, showWorkload }: { r: RequestRow; workloadId?: string; showWorkload: boolean }) {
  const href = requestHref(r, workloadId);
  const open = (e: MouseEvent) => {
    if ((e.target as Element).closest("a, button")) return;
    navigate(href);
  };
  return html`<tr data-testid="request-row" class="clickable-row" onClick=${open}>
    <td><a href=${href}><code>${r.request_id ?? r.id}</code></a>${r.captured ? html`<div class="muted small-text">bodies kept</div>` : null}</td>
    <td>${timeOf(r.at)}</td>
    <td><${StatusCell} r=${r} /></td>
    ${showWorkload ? html`<td class="wrap">${r.workload_name ?? html`<span class="muted">none chosen</span>`}</td>` : null}
    <td><${KeyCell} r=${r} /></td>
    <td class="wrap">${r.model ?? "–"}</td>
    <td class="num">${r.tokens_in ?? "–"} / ${r.tokens_out ?? "–"}</td>
    <td class="num">${msText(r.queue_ms)}</td>
    <td class="num" title=${r.ttft_ms === null ? "No first token: the answer was not streamed, or none came" : ""}>${msText(r.ttft_ms)}</td>
    <td class="num">${msText(r.total_ms)}</td>
    <td><${ReplicaCell} r=${r} /></td>
  </tr>`;
}

/** Newest rows from a fresh first page, then the older ones already loaded below them. */
function merged(fresh: RequestRow[], old: RequestRow[]): RequestRow[] {
  const last = fresh[fresh.length - 1];
  if (!last) return [];
  return [...fresh, ...old.filter((o) => o.at < last.at || (o.at === last.at && o.id < last.id))];
}

/** The filter form: status, key, workload (a project's list), source and text; applied on submit. */
function FilterForm({
  keys,
  workloads,
  value,
  onApply,
}: {
  keys: Key[];
  workloads?: { id: string; name: string }[];
  value: RequestFilter;
  onApply(f: RequestFilter): void;
}) {
  const [draft, setDraft] = useState<RequestFilter>(value);
  useEffect(() => setDraft(value), [JSON.stringify(value)]);
  const set = (k: keyof RequestFilter) => (e: Event) =>
    setDraft({ ...draft, [k]: (e.target as HTMLInputElement).value });
  return html`<form class="card form filters request-filters" aria-label="Filter the requests" onSubmit=${(e: Event) => (e.preventDefault(), onApply(draft))}>
    <div class="limit-grid">
      <label>Request id, trace id or model<input name="q" type="search" value=${draft.q} onInput=${set("q")} placeholder="req_… or a model" /></label>
      <label>Status<select name="status" value=${draft.status} onChange=${set("status")}>
        <option value="">Any</option><option value="ok">Succeeded</option><option value="error">Failed or refused</option><option value="refused">Refused (never reached a runtime)</option>
        <option value="429">429 (limited)</option><option value="400">400 (bad request)</option><option value="502">502 (upstream)</option><option value="503">503 (unavailable)</option>
      </select></label>
      <label>Key<select name="key" value=${draft.key} onChange=${set("key")}>
        <option value="">Any key</option>${keys.map((k) => html`<option value=${k.id}>${k.name} (${k.prefix})</option>`)}
      </select></label>
      ${
        workloads
          ? html`<label>Workload<select name="workload" value=${draft.workload} onChange=${set("workload")}>
        <option value="">Any workload</option>${workloads.map((w) => html`<option value=${w.id}>${w.name}</option>`)}
      </select></label>`
          : null
      }
      <label>From<select name="source" value=${draft.source} onChange=${set("source")}>
        <option value="">API and playground</option><option value="api">API clients</option><option value="playground">The playground</option>
      </select></label>
    </div>
    <div class="actions">
      <button type="button" onClick=${() => (setDraft(NONE), onApply(NONE))}>Clear</button>
      <button type="submit" class="primary">Filter</button>
    </div>
  </form>`;
}

/**
 * A list of requests: a workload's (`workloadId`) or a project's (`project`, its slug: every
 * workload's, and requests refused before a workload was chosen). The filter starts from the page's
 * address and is written back to it.
 */
export function RequestList({
  workloadId,
  project,
  keys,
  workloads,
}: {
  workloadId?: string;
  project?: string;
  keys: Key[];
  workloads?: { id: string; name: string }[];
}) {
  const [filter, setFilterState] = useState<RequestFilter>(() => filterOf(new URLSearchParams(location.search)));
  const setFilter = (f: RequestFilter) => {
    replaceQuery({ ...f });
    setFilterState(f);
  };
  const [rows, setRows] = useState<RequestRow[]>();
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<ApiError>();
  const [busy, setBusy] = useState(false);
  const older = useRef(false);
  const path = workloadId
    ? `/admin/workloads/${workloadId}/requests`
    : `/admin/projects/${encodeURIComponent(project ?? "")}/requests`;
  const query = (before?: string) => {
    const q = new URLSearchParams({ limit: String(PAGE) });
    for (const f of FIELDS) if (filter[f].trim()) q.set(f, filter[f].trim());
    if (before) q.set("before", before);
    return `${path}?${q}`;
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
  }, [path, JSON.stringify(filter)]);
  const filtered = FIELDS.some((f) => filter[f]);
  const showWorkload = !workloadId;
  return html`<${FilterForm} keys=${keys} workloads=${workloads} value=${filter} onApply=${setFilter} />
    <${ErrorNote} error=${error} />
    ${
      !rows
        ? error
          ? null
          : html`<${Loading} />`
        : rows.length === 0
          ? html`<p class="muted" data-testid="no-requests">No requests${filtered ? " match this filter" : " yet: each finished or refused request is recorded here"}.</p>`
          : html`<p class="muted small-text" aria-live="polite">${count(rows.length)} shown, newest first; the list refreshes every few seconds. Click a row for its timeline.</p>
        <div class="table-wrap requests-table" tabindex="0" aria-label="Requests (scrolls sideways on narrow screens)"><table>
          <thead><tr><th scope="col">Request id</th><th scope="col">Time</th><th scope="col">Status and reason</th>${showWorkload ? html`<th scope="col">Workload</th>` : null}<th scope="col">Key</th><th scope="col">Model</th><th scope="col" class="num">Tokens in / out</th><th scope="col" class="num">Queue</th><th scope="col" class="num" title="Time to the first streamed token">TTFT</th><th scope="col" class="num">Total</th><th scope="col">Ran on</th></tr></thead>
          <tbody>${rows.map((r) => html`<${Row} key=${r.id} r=${r} workloadId=${workloadId} showWorkload=${showWorkload} />`)}</tbody>
        </table></div>
        ${next !== null ? html`<div class="actions"><button type="button" disabled=${busy} onClick=${loadOlder}>Load older</button></div>` : html`<p class="muted small-text">That is the oldest request kept (requests follow the job retention).</p>`}`
    }`;
}
