/**
 * The request inspector's lists: a workload's recent requests (with the capture switch), and a
 * project's across its workloads, refusals included (a key's limits, quotas, switched-off routes),
 * where any request can be found by its id.
 */
import { html } from "htm/preact";
import { useApi } from "../lib/hooks";
import type { Key, Workload } from "../lib/types";
import { ErrorNote, Loading } from "../components/ui";
import { WorkloadHead } from "../components/workload-head";
import { CaptureControl } from "../components/capture-control";
import { RequestList } from "../components/request-list";
import { Can } from "../lib/me";
import { ProjectHead } from "./project";

/** The requests tab of a workload. */
export function RequestsPage({ id }: { id: string }) {
  const wl = useApi<Workload>(`/admin/workloads/${id}`);
  const keys = useApi<Key[]>(wl.data ? `/admin/projects/${wl.data.project_slug}/keys` : null);
  if (wl.error) return html`<${ErrorNote} error=${wl.error} />`;
  if (!wl.data) return html`<${Loading} />`;
  const w = wl.data;
  return html`<${WorkloadHead} w=${w} current=${`/workloads/${w.id}/requests`} />
    <${Can} do="workload.change" project=${w.project_slug}><${CaptureControl} w=${w} onChange=${wl.reload} /><//>
    <p class="muted small-text">Requests refused before a workload was chosen (a key's limits or quotas) are in the <a href=${`/projects/${encodeURIComponent(w.project_slug)}/requests?status=error`}>project's requests</a>.</p>
    <${RequestList} workloadId=${w.id} keys=${keys.data ?? []} />`;
}

/** A project's requests, across its workloads: every request and refusal, searchable by id. */
export function ProjectRequestsPage({ project }: { project: string }) {
  const keys = useApi<Key[]>(`/admin/projects/${encodeURIComponent(project)}/keys`);
  const wls = useApi<Workload[]>(`/admin/projects/${encodeURIComponent(project)}/workloads`);
  return html`<${ProjectHead} project=${project} current=${`/projects/${project}/requests`} />
    <p class="muted">Every request the project's base URL and workloads answered or refused, newest first. Paste a request id (the <code>x-request-id</code> of an answer) to find it.</p>
    <${RequestList} project=${project} keys=${keys.data ?? []} workloads=${(wls.data ?? []).map((w) => ({ id: w.id, name: w.name }))} />`;
}
