/** The start page: what runs where, and the way in for a fresh server. */
import { html } from "htm/preact";
import { noun } from "../lib/format";
import { useApi, useNow } from "../lib/hooks";
import type { Info, Project, Worker } from "../lib/types";
import { ErrorNote, Loading, PageTitle } from "../components/ui";
import { replicaPlace, ReplicaStatus } from "../components/replica-status";
import { Attention } from "../components/attention";
import { TrafficSummary } from "../components/traffic";
import { clusterLine } from "../components/hosts";
import { can } from "../lib/me";

/** The overview (or the first-run invitation when there is no project yet). */
export function Overview() {
  const info = useApi<Info>("/admin/info");
  const projects = useApi<Project[]>("/admin/projects");
  const workers = useApi<Worker[]>("/admin/workers", 3000);
  const now = useNow();
  if (projects.error) return html`<${ErrorNote} error=${projects.error} />`;
  if (!projects.data || !workers.data) return html`<${Loading} />`;
  const replicas = workers.data.flatMap((w) => w.replicas.map((r) => ({ ...r, worker: w.name })));
  const gpus = workers.data.reduce((n, w) => n + w.gpus.length, 0);
  const online = workers.data.filter((w) => w.state === "online").length;
  // A worker added but never joined is not "offline": it is counted apart.
  const waiting = workers.data.filter((w) => !w.last_seen_at).length;
  const cluster = clusterLine(info.data?.cluster);
  return html`<${PageTitle} sub=${info.data ? `inferd ${info.data.version} on ${info.data.hostname}${cluster ? ` · ${cluster}` : ""}` : null}>Overview<//>
    ${
      projects.data.length === 0
        ? html`<section class="card welcome" aria-labelledby="welcome">
          <h2 id="welcome">Welcome to inferd</h2>
          ${
            can("project.create")
              ? html`<p>Serve a model on this machine and call it with the OpenAI SDK in four short steps.</p>
          <a class="button primary" href="/setup">Get started</a>`
              : html`<p data-testid="no-projects-note">You are not in a project yet: an admin adds you to one (Users), and its workloads, keys and usage show here.</p>`
          }
        </section>`
        : null
    }
    <${Attention} workers=${workers.data} />
    <div class="stats">
      <a class="stat" href="/projects"><strong>${projects.data.length}</strong> ${noun(projects.data.length, "project")}</a>
      <a class="stat" href="/workers"><strong>${online}/${workers.data.length - waiting}</strong> workers online${waiting ? html`<small class="muted"> · ${waiting} waiting to join</small>` : null}</a>
      <a class="stat" href="/workers"><strong>${gpus}</strong> ${noun(gpus, "GPU")}</a>
      <span class="stat"><strong>${replicas.filter((r) => r.state === "ready").length}/${replicas.length}</strong> replicas ready</span>
    </div>
    ${projects.data.length ? html`<${TrafficSummary} />` : null}
    <section aria-labelledby="running"><h2 id="running">Replicas</h2>
      ${
        replicas.length === 0
          ? html`<p class="muted">Nothing is running yet. ${projects.data.length ? html`Add a workload to a <a href="/projects">project</a>.` : null}</p>`
          : html`<div class="table-wrap"><table>
            <thead><tr><th scope="col">Workload</th><th scope="col">Where</th><th scope="col">State</th></tr></thead>
            <tbody>${replicas.map(
              (r) => html`<tr key=${r.assignment_id}>
              <td><a href=${`/workloads/${r.workload_id}`}>${r.workload}</a></td>
              <td>${r.worker}<div class="muted small-text" data-testid="replica-gpus">${replicaPlace(r, r.engine)}</div></td><td><${ReplicaStatus} now=${now} r=${{ workloadId: r.workload_id, assignmentId: r.assignment_id, state: r.state, reason: r.reason, progress: r.progress, updatedAt: r.updated_at }} /></td></tr>`,
            )}</tbody>
          </table></div>`
      }
    </section>`;
}
