/** A workload: start/stop/restart, its replicas and their states, scaling, placement, endpoint toggles, LoRA adapters, usage, its aliases and fallbacks, and snippets. */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api } from "../lib/api";
import { useAction, useApi } from "../lib/hooks";
import { navigate } from "../lib/router";
import { count, noun } from "../lib/format";
import { TASK_TOGGLES, TASK_TYPES, TOGGLES } from "../lib/constants";
import type { Workload, Worker } from "../lib/types";
import { ConfirmButton, ErrorNote, Loading } from "../components/ui";
import { WorkloadHead } from "../components/workload-head";
import { Replicas } from "../components/replicas";
import { Controls, DeleteWarning, ScalingState } from "../components/workload-controls";
import { Snippets } from "../components/snippets";
import { CodingAgents } from "../components/coding-agents";
import { WorkloadActivity } from "../components/workload-charts";
import { Adapters } from "../components/adapters";
import { NotFound } from "../components/not-found";
import { Can, can, guard } from "../lib/me";

/** Run the workload on a chosen worker (replacing the automatic placement). */
function Place({ w, workers, onChange }: { w: Workload; workers: Worker[]; onChange(): unknown }) {
  const [worker, setWorker] = useState("");
  const [gpus, setGpus] = useState("1");
  const [concurrency, setConcurrency] = useState("20");
  const place = useAction((body: Record<string, unknown>) =>
    api(`/admin/workloads/${w.id}/assignments`, { body }).then(() => true),
  );
  const chosen = worker || workers[0]?.id || "";
  const hasGpus = (workers.find((x) => x.id === chosen)?.gpus.length ?? 0) > 0;
  const submit = async (e: Event) => {
    e.preventDefault();
    if (
      await place.run({
        worker_id: chosen,
        concurrency: Number(concurrency),
        ...(hasGpus ? { gpus: Number(gpus) } : {}),
      })
    )
      onChange();
  };
  return html`<details class="card"><summary>Run on a specific worker</summary>
    <form class="form" onSubmit=${submit} aria-label="Place the workload">
      <div class="grid3">
        <label>Worker<select value=${chosen} onChange=${(e: Event) => setWorker((e.target as HTMLSelectElement).value)}>${workers.map((x) => html`<option value=${x.id}>${x.name}</option>`)}</select></label>
        <label>GPUs<select value=${gpus} disabled=${!hasGpus} onChange=${(e: Event) => setGpus((e.target as HTMLSelectElement).value)}>${["1", "2", "4", "8"].map((n) => html`<option>${n}</option>`)}</select></label>
        <label>Concurrent requests<input type="number" min="1" max="1000" value=${concurrency} onInput=${(e: Event) => setConcurrency((e.target as HTMLInputElement).value)} /></label>
      </div>
      <${ErrorNote} error=${place.error} />
      <div class="actions"><button type="submit" disabled=${place.busy || !chosen}>Add replica</button></div>
    </form></details>`;
}

/** The endpoint switches; each change is saved at once (shown at once, undone if refused). Those the task type does not use are folded away. */
function Toggles({ w, onChange }: { w: Workload; onChange(): Promise<void> }) {
  const [pending, setPending] = useState<Record<string, boolean>>({});
  const save = useAction((patch: Record<string, boolean>) =>
    api(`/admin/workloads/${w.id}/endpoints`, { method: "PATCH", body: patch }).then(() => true),
  );
  const flip = async (id: string, on: boolean) => {
    setPending((p) => ({ ...p, [id]: on }));
    if (await save.run({ [id]: on })) await onChange();
    setPending(({ [id]: _, ...rest }) => rest);
  };
  const used = new Set([...(TASK_TOGGLES[w.task_type] ?? TOGGLES.map(([id]) => id)), "jobs"]);
  const task = TASK_TYPES.find(([id]) => id === w.task_type)?.[1] ?? w.task_type;
  const list = (items: [string, string][]) =>
    html`<ul class="toggles">${items.map(
      ([id, label]) => html`<li><label class="switch">
      <input type="checkbox" role="switch" name=${id} ...${guard("workload.change", w.project_slug)} checked=${id in pending ? pending[id] : (w.endpoints as Record<string, boolean>)[id]} onChange=${(e: Event) => flip(id, (e.target as HTMLInputElement).checked)} />
      <span>${label}</span></label></li>`,
    )}</ul>`;
  const others = TOGGLES.filter(([id]) => !used.has(id));
  return html`<section aria-labelledby="toggles"><h2 id="toggles">Endpoints</h2>
    <p class="muted">A switched-off endpoint answers 409 <code>endpoint_disabled</code>.</p>
    ${list(TOGGLES.filter(([id]) => used.has(id)))}
    ${
      others.length
        ? html`<details class="other-endpoints"><summary>Other endpoints</summary>
      <p class="muted">${task} workloads do not use these; the runtime may still answer them.</p>
      ${list(others)}</details>`
        : null
    }
    <${ErrorNote} error=${save.error} />
  </section>`;
}

/** The names the project's base URL routes to this workload by, and the workloads it falls back to, in order. */
function Routing({ w }: { w: Workload }) {
  const codes = (list: string[], sep: string) => list.map((x, i) => html`${i ? sep : ""}<code>${x}</code>`);
  return html`<dl class="facts routing" data-testid="routing">
    <div><dt>Aliases</dt><dd data-testid="aliases">${w.aliases.length ? codes(w.aliases, ", ") : html`<span class="muted">none</span>`}</dd></div>
    <div><dt>Falls back to</dt><dd data-testid="fallbacks">${w.fallbacks.length ? codes(w.fallbacks, " → ") : html`<span class="muted">none</span>`}</dd></div>
  </dl>`;
}

/** The workload overview page. */
export function WorkloadPage({ id }: { id: string }) {
  const wl = useApi<Workload>(`/admin/workloads/${id}`, 2000);
  const workers = useApi<Worker[]>("/admin/workers", 5000);
  const del = useAction(() => api(`/admin/workloads/${id}`, { method: "DELETE" }).then(() => true));
  // Deleted while open (by someone else, or the API): the same not-found page as a stale link. Never
  // seen (this answer came before the shell's own probe): the stale link's words.
  if (wl.error?.status === 404) {
    const what = wl.data
      ? html`There is no workload <code>${id}</code> any more (it was deleted).`
      : html`There is no workload <code>${id}</code> (it may have been deleted).`;
    return html`<${NotFound} what=${what} back=${{ href: "/projects", label: "All projects" }} />`;
  }
  if (wl.error) return html`<${ErrorNote} error=${wl.error} />`;
  const w = wl.data;
  if (!w) return html`<${Loading} />`;
  const reload = () => wl.reload();
  const u = w.usage;
  return html`<${WorkloadHead} w=${w} current=${`/workloads/${id}`} />
    <${Can} do="workload.change" project=${w.project_slug} note><${Controls} w=${w} onChange=${reload} /><//>
    <div class="stats">
      <span class="stat"><strong>${count(u?.requests)}</strong> ${noun(u?.requests, "request")}</span>
      <span class="stat"><strong>${count(u?.total_tokens)}</strong> ${noun(u?.total_tokens, "token")}</span>
      <span class="stat"><strong>${count(u?.errors)}</strong> ${noun(u?.errors, "error")}</span>
      <span class="stat"><strong>${w.queue_depth ?? 0}</strong> waiting</span>
    </div>
    <${Replicas} w=${w} workers=${workers.data ?? []} onChange=${reload} />
    <${ScalingState} w=${w} />
    <${WorkloadActivity} id=${w.id} />
    ${workers.data?.length && can("workload.change", w.project_slug) ? html`<${Place} w=${w} workers=${workers.data} onChange=${reload} />` : null}
    <${Toggles} w=${w} onChange=${reload} />
    <${Adapters} w=${w} />
    <section aria-labelledby="use"><h2 id="use">Use it</h2><${Routing} w=${w} /><${Snippets} workload=${w} /><${CodingAgents} w=${w} /></section>
    <${Can} do="workload.change" project=${w.project_slug}><section class="danger-zone" aria-labelledby="dz"><h2 id="dz">Delete workload</h2>
      <${ErrorNote} error=${del.error} />
      <${ConfirmButton} label="Delete workload" title=${`Delete ${w.name}?`} confirm="Delete workload" body=${html`<${DeleteWarning} w=${w} />`}
        onConfirm=${async () => (await del.run()) && navigate(`/projects/${w.project_slug}`)} />
    </section><//>`;
}
