/**
 * A project's batches (the OpenAI Batch API's): each with its id, state, request counts, workloads
 * and its input, output and error files (downloaded as JSONL); one batch with each request's job,
 * its `custom_id`, workload, state and error. Read from `GET /admin/projects/:project/batches`.
 */
import { html } from "htm/preact";
import { useApi } from "../lib/hooks";
import { ago, bytes, count, plural, when } from "../lib/format";
import type { BatchDetail, BatchListed } from "../lib/types";
import { ErrorNote, Loading, PageTitle, StateBadge } from "../components/ui";
import { ProjectHead } from "./project";

/** How often an open list or batch is read again (a running batch's counts move). */
const REFRESH_MS = 3000;

/** The OpenAI batch states that are still moving. */
const MOVING = new Set(["validating", "in_progress", "finalizing", "cancelling"]);

/** A batch's state as a badge (running ones look like running jobs). */
const BatchState = ({ status }: { status: string }) =>
  html`<span class=${`badge state-${MOVING.has(status) ? "running" : status === "completed" ? "completed" : status === "failed" || status === "expired" ? "failed" : "idle"}`} data-testid="batch-status">${status}</span>`;

/** "2 of 3 done · 1 failed". */
function countsText(c: BatchListed["request_counts"]): string {
  const done = `${count(c.completed + c.failed)} of ${count(c.total)} done`;
  return c.failed ? `${done} · ${count(c.failed)} failed` : done;
}

/** One file of a batch: a download link with its name and size, or a dash. */
function FileLink({ project, file, what }: { project: string; file: BatchListed["files"]["input"]; what: string }) {
  if (!file) return html`<span class="muted">–</span>`;
  const href = `/admin/projects/${encodeURIComponent(project)}/files/${encodeURIComponent(file.id)}/content`;
  const size = file.bytes === null ? "" : ` (${bytes(file.bytes)})`;
  return html`<a href=${href} download=${file.filename ?? `${file.id}.jsonl`} aria-label=${`Download the ${what} file ${file.id}`} data-testid=${`file-${what}`}><code>${file.id}</code></a><span class="muted small-text">${size}</span>`;
}

/** The three files of a batch, one per line. */
const Files = ({ project, b }: { project: string; b: BatchListed }) =>
  html`<ul class="small-text batch-files">
    <li>Input: <${FileLink} project=${project} file=${b.files.input} what="input" /></li>
    <li>Output: <${FileLink} project=${project} file=${b.files.output} what="output" /></li>
    <li>Errors: <${FileLink} project=${project} file=${b.files.error} what="error" /></li>
  </ul>`;

/** The Unix seconds of a batch object as an ISO string. */
const iso = (s: number) => new Date(s * 1000).toISOString();

/** The project's batches, newest first. */
export function BatchesPage({ project }: { project: string }) {
  const list = useApi<BatchListed[]>(`/admin/projects/${encodeURIComponent(project)}/batches`, REFRESH_MS);
  const body = (() => {
    if (list.error) return html`<${ErrorNote} error=${list.error} />`;
    if (!list.data) return html`<${Loading} />`;
    if (!list.data.length)
      return html`<p class="muted" data-testid="no-batches">No batches yet. Clients make them with the OpenAI Batch API on the project's base URL: upload a JSONL file (<code>POST …/v1/files</code>, purpose <code>batch</code>), then <code>POST …/v1/batches</code>.</p>`;
    return html`<ul class="batch-list" aria-label="Batches">${list.data.map(
      (b) => html`<li class="batch-item" data-testid="batch-row" aria-label=${`Batch ${b.id}`}>
        <div class="batch-head"><a class="wrap" href=${`/projects/${project}/batches/${encodeURIComponent(b.id)}`}><code>${b.id}</code></a>
          <${BatchState} status=${b.status} />
          <span class="muted small-text"><time datetime=${iso(b.created_at)} title=${when(iso(b.created_at))}>${ago(iso(b.created_at))}</time></span></div>
        <dl class="facts">
          <div><dt>Requests</dt><dd data-testid="batch-counts">${countsText(b.request_counts)}</dd></div>
          <div><dt>Endpoint</dt><dd><code>${b.endpoint}</code></dd></div>
          <div><dt>Workloads</dt><dd class="wrap">${b.workloads.join(", ")}</dd></div>
        </dl>
        <${Files} project=${project} b=${b} />
      </li>`,
    )}</ul>`;
  })();
  return html`<${ProjectHead} project=${project} current=${`/projects/${project}/batches`} />
    <section class="card" aria-labelledby="batches-h"><h2 id="batches-h">Batches</h2>${body}</section>`;
}

/** One request of a batch: its custom_id, state, workload, request id and error. */
function JobRow({ j, project }: { j: BatchDetail["jobs"][number]; project: string }) {
  return html`<tr data-testid="batch-job">
    <td class="wrap"><code data-testid="custom-id">${j.custom_id}</code><div class="muted small-text">job <code>${j.job_id}</code></div></td>
    <td><${StateBadge} state=${j.status} /></td>
    <td>${j.workload_slug ? html`<a href=${`/workloads/${j.workload_id}`}>${j.workload_slug}</a>` : html`<span class="muted">(deleted)</span>`}<div class="muted small-text">in ${project}</div></td>
    <td class="wrap">${j.request_id ? html`<code>${j.request_id}</code>` : "–"}</td>
    <td>${j.finished_at ? html`<time datetime=${j.finished_at} title=${when(j.finished_at)}>${ago(j.finished_at)}</time>` : "–"}</td>
    <td class="wrap">${j.error ?? ""}</td>
  </tr>`;
}

/** One batch: its facts and files, and each of its requests' jobs. */
export function BatchPage({ project, id }: { project: string; id: string }) {
  const b = useApi<BatchDetail>(
    `/admin/projects/${encodeURIComponent(project)}/batches/${encodeURIComponent(id)}`,
    REFRESH_MS,
  );
  const back = html`<a href=${`/projects/${project}/batches`}>All batches of ${project}</a>`;
  if (b.error) return html`<${PageTitle} sub=${back}>Batch <code>${id}</code><//><${ErrorNote} error=${b.error} />`;
  if (!b.data) return html`<${Loading} />`;
  const d = b.data;
  const cut = d.jobs_shown < d.request_counts.total;
  return html`<${PageTitle} sub=${back}>Batch <code class="wrap">${d.id}</code><//>
    <section class="card" aria-labelledby="batch-facts">
      <h2 id="batch-facts">Batch</h2>
      <dl class="facts">
        <div><dt>State</dt><dd><${BatchState} status=${d.status} /></dd></div>
        <div><dt>Requests</dt><dd data-testid="batch-counts">${countsText(d.request_counts)}</dd></div>
        <div><dt>Endpoint</dt><dd><code>${d.endpoint}</code></dd></div>
        <div><dt>Workloads</dt><dd>${d.workloads.join(", ")}</dd></div>
        <div><dt>Made</dt><dd>${when(iso(d.created_at))}</dd></div>
      </dl>
      <${Files} project=${project} b=${d} />
    </section>
    <section class="card" aria-labelledby="batch-jobs">
      <h2 id="batch-jobs">Requests</h2>
      <p class="muted">Each line of the input file runs as an async job of batch <code data-testid="jobs-batch-id">${d.id}</code>, named by its <code>custom_id</code>.${cut ? ` The first ${count(d.jobs_shown)} of ${plural(d.request_counts.total, "request")} are shown; the output file has them all.` : ""}</p>
      <div class="table-wrap"><table aria-label="Requests of the batch">
        <thead><tr><th scope="col">custom_id</th><th scope="col">State</th><th scope="col">Workload</th><th scope="col">Request id</th><th scope="col">Finished</th><th scope="col">Error</th></tr></thead>
        <tbody>${d.jobs.map((j) => html`<${JobRow} key=${j.job_id} j=${j} project=${project} />`)}</tbody>
      </table></div>
    </section>`;
}
