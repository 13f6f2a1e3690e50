/** One project: its workloads with their replica states, its base URL and how to call it, its quotas and limits, and deleting it. */
import { html } from "htm/preact";
import { api } from "../lib/api";
import { useAction, useApi, type Loaded } from "../lib/hooks";
import { navigate } from "../lib/router";
import type { Project, ProjectDetail, Workload, Worker } from "../lib/types";
import { BACKENDS } from "../lib/constants";
import type { UsageExport } from "../lib/types";
import { bytes, count, noun } from "../lib/format";
import { ConfirmButton, ErrorNote, Loading, PageTitle, StateBadge, Tabs } from "../components/ui";
import { CAP_FIELDS, LimitsForm, QUOTA_FIELDS } from "../components/limits";
import { ProjectBase } from "../components/project-base";
import { ConnectToolButton } from "../components/connect-tool";
import { Can } from "../lib/me";

/** The project's name (from the list) and its section tabs. */
export function ProjectHead({ project, current }: { project: string; current: string }) {
  const list = useApi<Project[]>("/admin/projects");
  const p = list.data?.find((x) => x.slug === project || x.id === project);
  const base = `/projects/${project}`;
  return html`<${PageTitle} sub=${html`Project · <code>${project}</code>`}>${p?.name ?? project}<//>
    <${Tabs} current=${current} items=${[{ href: base, label: "Workloads" }, { href: `${base}/keys`, label: "Keys" }, { href: `${base}/batches`, label: "Batches" }, { href: `${base}/requests`, label: "Requests" }]} />`;
}

/** The states of a workload's replicas, from the workers' replica lists. */
function replicaStates(workers: Worker[] | undefined, workloadId: string): string[] {
  return (workers ?? []).flatMap((w) => w.replicas.filter((r) => r.workload_id === workloadId).map((r) => r.state));
}

/** Tokens (input + output) the project used today and this month (UTC), from one usage read. */
function useTokensUsed(projectId: string | undefined) {
  const today = new Date().toISOString().slice(0, 10);
  const u = useApi<UsageExport>(
    projectId ? `/admin/usage?group_by=project&from=${today.slice(0, 8)}01&to=${today}` : null,
    10_000,
  );
  const rows = u.data?.rows.filter((r) => r.id === projectId);
  const sum = (list: typeof rows) => list?.reduce((n, r) => n + r.input_tokens + r.output_tokens, 0);
  return { day: sum(rows?.filter((r) => r.day === today)), month: sum(rows) };
}

/** The project's token quotas (all its keys together) with what it used today and this month. */
function Quotas({ project, p }: { project: string; p: Loaded<ProjectDetail> }) {
  const { day, month } = useTokensUsed(p.data?.id);
  const used = (n: number | undefined, of: number | null) =>
    `${count(n)}${of == null ? "" : ` of ${count(of)}`} ${noun(of ?? n, "token")}`;
  return html`<section class="card quotas" aria-labelledby="quotas" data-testid="quotas">
    <h2 id="quotas">Token quotas</h2>
    <p class="muted">Every key of this project together. Past a quota its requests get 429 until the next UTC day or month.</p>
    ${
      p.error
        ? html`<${ErrorNote} error=${p.error} />`
        : !p.data
          ? html`<${Loading} />`
          : html`
      <dl class="facts">
        <div><dt>Used today</dt><dd data-testid="used-today">${used(day, p.data.limits.tokens_per_day)}</dd></div>
        <div><dt>Used this month</dt><dd data-testid="used-month">${used(month, p.data.limits.tokens_per_month)}</dd></div>
      </dl>
      <${Can} do="project.change"><${LimitsForm} key=${JSON.stringify(p.data.limits)} path=${`/admin/projects/${encodeURIComponent(project)}`} limits=${p.data.limits} fields=${QUOTA_FIELDS} onSaved=${p.reload} /><//>`
    }
  </section>`;
}

/** The project's limits on what its workloads take of this machine, with what it uses against them. */
function Caps({ project, p }: { project: string; p: Loaded<ProjectDetail> }) {
  const against = (used: string, cap: string | null) => (cap === null ? `${used} (no limit)` : `${used} of ${cap}`);
  // In the form's unit below 1 GiB, so a limit of 12.5 MiB reads as set.
  const storage = (n: number) => (n < 1073741824 ? `${Number((n / 1048576).toFixed(1))} MiB` : bytes(n));
  return html`<section class="card quotas" aria-labelledby="caps" data-testid="caps">
    <h2 id="caps">Project limits</h2>
    <p class="muted">Past a limit, saving a workload is refused (429). Replicas already running keep running when the limit is lowered; no more start. A model pull that would pass the storage limit fails, and its replica says why.</p>
    ${
      p.error
        ? html`<${ErrorNote} error=${p.error} />`
        : !p.data
          ? html`<${Loading} />`
          : html`
      <dl class="facts">
        <div><dt>Workloads</dt><dd data-testid="used-workloads">${against(count(p.data.usage.workloads), p.data.limits.max_workloads === null ? null : count(p.data.limits.max_workloads))}</dd></div>
        <div><dt>Replicas</dt><dd data-testid="used-replicas">${against(`${count(p.data.usage.running_replicas)} running, policies up to ${count(p.data.usage.replicas)}`, p.data.limits.max_replicas === null ? null : count(p.data.limits.max_replicas))}</dd></div>
        <div><dt>Model storage</dt><dd data-testid="used-model-bytes">${against(storage(p.data.usage.model_bytes), p.data.limits.model_bytes === null ? null : storage(p.data.limits.model_bytes))}</dd></div>
      </dl>
      <${Can} do="project.change"><${LimitsForm} key=${JSON.stringify(p.data.limits)} path=${`/admin/projects/${encodeURIComponent(project)}`} limits=${p.data.limits} fields=${CAP_FIELDS} label="Project limits" onSaved=${p.reload} /><//>`
    }
  </section>`;
}

/** The project page. */
export function ProjectPage({ project }: { project: string }) {
  const list = useApi<Workload[]>(`/admin/projects/${encodeURIComponent(project)}/workloads`);
  const workers = useApi<Worker[]>("/admin/workers", 3000);
  const detail = useApi<ProjectDetail>(`/admin/projects/${encodeURIComponent(project)}`, 10_000);
  const del = useAction(() =>
    api(`/admin/projects/${encodeURIComponent(project)}`, { method: "DELETE" }).then(() => true),
  );
  const remove = async () => {
    if (await del.run()) navigate("/projects");
  };
  const label = (b: string) => BACKENDS.find((x) => x.id === b)?.label ?? b;
  return html`<${ProjectHead} project=${project} current=${`/projects/${project}`} />
    <${Can} do="workload.change" project=${project}><div class="toolbar"><a class="button primary" href=${`/projects/${project}/workloads/new`}>New workload</a></div><//>
    ${
      list.error
        ? html`<${ErrorNote} error=${list.error} />`
        : !list.data
          ? html`<${Loading} />`
          : list.data.length === 0
            ? html`<p class="muted">No workloads yet. A workload is one model served by one backend.</p>`
            : html`<div class="table-wrap"><table>
          <thead><tr><th scope="col">Workload</th><th scope="col">Backend</th><th scope="col">Model</th><th scope="col">Replicas</th></tr></thead>
          <tbody>${list.data.map((w) => {
            const states = replicaStates(workers.data, w.id);
            return html`<tr><td><a href=${`/workloads/${w.id}`}>${w.name}</a><br /><code class="muted">${w.slug}</code></td><td>${label(w.backend)}</td>
              <td class="wrap">${w.model_name}</td><td>${states.length ? states.map((s) => html`<${StateBadge} state=${s} /> `) : html`<span class="muted">none</span>`}</td></tr>`;
          })}</tbody>
        </table></div>`
    }
    ${list.data ? html`<${ProjectBase} project=${detail.data?.slug ?? list.data[0]?.project_slug ?? project} workloads=${list.data} />` : null}
    ${detail.data ? html`<section class="connect-open" aria-label="Connect a tool" data-testid="project-connect"><${ConnectToolButton} project=${detail.data.slug} /></section>` : null}
    <${Quotas} project=${project} p=${detail} />
    <${Caps} project=${project} p=${detail} />
    <${Can} do="project.change"><section class="danger-zone" aria-labelledby="dz"><h2 id="dz">Delete project</h2>
      <p class="muted">Removes the project with all its workloads (their runtimes stop) and keys.</p>
      <${ErrorNote} error=${del.error} />
      <${ConfirmButton} label="Delete project" title=${`Delete project ${project}?`} confirm="Delete project" onConfirm=${remove}
        body=${html`<p>Its workloads stop and its keys stop working at once. This cannot be undone.</p>`} />
    </section><//>`;
}
