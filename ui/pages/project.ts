/** One project: its workloads with their replica states, and deleting it. */
import { html } from "htm/preact";
import { api } from "../lib/api";
import { useAction, useApi } from "../lib/hooks";
import { navigate } from "../lib/router";
import type { Project, Workload, Worker } from "../lib/types";
import { BACKENDS } from "../lib/constants";
import { ConfirmButton, ErrorNote, Loading, PageTitle, StateBadge, Tabs } from "../components/ui";

/** The project's name (from the list) and its section tabs. */
export function ProjectHead({ project, current }: { project: string; current: string }) {
  const list = useApi<Project[]>("/admin/projects");
  const p = list.data?.find((x) => x.slug === project || x.id === project);
  const base = `/projects/${project}`;
  return html`<${PageTitle} sub=${html`Project · <code>${project}</code>`}>${p?.name ?? project}<//>
    <${Tabs} current=${current} items=${[{ href: base, label: "Workloads" }, { href: `${base}/keys`, label: "Keys" }]} />`;
}

/** The states of a workload's replicas, from the workers' replica lists. */
function replicaStates(workers: Worker[] | undefined, workloadId: string): string[] {
  return (workers ?? []).flatMap((w) => w.replicas.filter((r) => r.workload_id === workloadId).map((r) => r.state));
}

/** The project page. */
export function ProjectPage({ project }: { project: string }) {
  const list = useApi<Workload[]>(`/admin/projects/${encodeURIComponent(project)}/workloads`);
  const workers = useApi<Worker[]>("/admin/workers", 3000);
  const del = useAction(() => api(`/admin/projects/${encodeURIComponent(project)}`, { method: "DELETE" }).then(() => true));
  const remove = async () => {
    if (await del.run()) navigate("/projects");
  };
  const label = (b: string) => BACKENDS.find((x) => x.id === b)?.label ?? b;
  return html`<${ProjectHead} project=${project} current=${`/projects/${project}`} />
    <div class="toolbar"><a class="button primary" href=${`/projects/${project}/workloads/new`}>New workload</a></div>
    ${list.error ? html`<${ErrorNote} error=${list.error} />` : !list.data ? html`<${Loading} />` : list.data.length === 0
      ? html`<p class="muted">No workloads yet. A workload is one model served by one backend.</p>`
      : html`<div class="table-wrap"><table>
          <thead><tr><th scope="col">Workload</th><th scope="col">Backend</th><th scope="col">Model</th><th scope="col">Replicas</th></tr></thead>
          <tbody>${list.data.map((w) => {
            const states = replicaStates(workers.data, w.id);
            return html`<tr><td><a href=${`/workloads/${w.id}`}>${w.name}</a><br /><code class="muted">${w.slug}</code></td><td>${label(w.backend)}</td>
              <td class="wrap">${w.model_name}</td><td>${states.length ? states.map((s) => html`<${StateBadge} state=${s} /> `) : html`<span class="muted">none</span>`}</td></tr>`;
          })}</tbody>
        </table></div>`}
    <section class="danger-zone" aria-labelledby="dz"><h2 id="dz">Delete project</h2>
      <p class="muted">Removes the project with all its workloads (their runtimes stop) and keys.</p>
      <${ErrorNote} error=${del.error} />
      <${ConfirmButton} label="Delete project" title=${`Delete project ${project}?`} confirm="Delete project" onConfirm=${remove}
        body=${html`<p>Its workloads stop and its keys stop working at once. This cannot be undone.</p>`} />
    </section>`;
}
