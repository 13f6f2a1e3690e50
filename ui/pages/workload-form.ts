/** Create and edit a workload: the form per backend, saved through the admin API. */
import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { api, ApiError } from "../lib/api";
import { useAction, useApi } from "../lib/hooks";
import { cameBack, navigate, useLocation } from "../lib/router";
import type { Info, Workload, Worker } from "../lib/types";
import { bodyOf, draftFromQuery, draftOf, draftProblem, keepDraft, keptDraft, type Draft } from "../lib/draft";
import { WorkloadFields } from "../components/workload-fields";
import { hubRefProblem } from "../components/hub-search";
import { ErrorNote, FormError, Loading, PageTitle } from "../components/ui";

/**
 * Asks the hub about a llama.cpp draft's Hugging Face model before it is saved (../components/hub-search.ts):
 * an unknown repo or quantisation is shown at the command, which names it; true when there is one.
 */
export async function refuseHubRef(d: Draft, setError: (e: ApiError) => void): Promise<boolean> {
  if (d.backend !== "llamacpp") return false;
  const problem = await hubRefProblem(d.gguf);
  if (problem) setError(new ApiError(400, "validation_error", problem, "config.command"));
  return !!problem;
}

/** Shows the draft's first problem at its field instead of sending it (no browser bubble); true when there is one. */
export function refuseDraft(d: Draft, setError: (e: ApiError) => void): boolean {
  const problem = draftProblem(d);
  if (problem) setError(new ApiError(400, "validation_error", problem.message, problem.field));
  return !!problem;
}

/**
 * Keeps an edited draft in this form's history entry, unless the address has already moved on (an
 * edit the form made by itself after a link was followed belongs to no other page).
 */
function keepOn(path: string, d: Draft): void {
  if (location.pathname === path) keepDraft(d);
}

/** The form for a new workload in `project`, filled from the page's query when a link gave one. */
export function WorkloadNew({ project }: { project: string }) {
  const { query } = useLocation();
  const info = useApi<Info>("/admin/info");
  const workers = useApi<Worker[]>("/admin/workers");
  const others = useApi<Workload[]>(`/admin/projects/${encodeURIComponent(project)}/workloads`);
  // Back to this form brings its unsaved draft back (kept in the history entry, see keepDraft); a
  // reload or a link starts afresh.
  const [d, setD] = useState<Draft>(() => (cameBack() ? keptDraft() : undefined) ?? draftFromQuery(query));
  const save = useAction((body: Record<string, unknown>) =>
    api<Workload>(`/admin/projects/${encodeURIComponent(project)}/workloads`, { body }),
  );
  const submit = async (e: Event) => {
    e.preventDefault();
    if (refuseDraft(d, save.setError) || (await refuseHubRef(d, save.setError))) return;
    const w = await save.run(bodyOf(d));
    if (w) navigate(`/workloads/${w.id}`);
  };
  return html`<${PageTitle} sub=${html`in project <a href=${`/projects/${project}`}>${project}</a>`}>New workload<//>
    ${info.data?.ollama.running ? html`<p class="note">An Ollama daemon answers at <code>${info.data.ollama.url}</code>.</p>` : null}
    <form class="card form" onSubmit=${submit} aria-label="New workload" noValidate>
      <${FormError} error=${save.error} />
      <${WorkloadFields} d=${d} onChange=${(next: Draft) => (setD(next), keepOn(`/projects/${project}/workloads/new`, next), save.setError(undefined))} error=${save.error} workers=${workers.data} others=${others.data} />
      <div class="actions"><a class="button" href=${`/projects/${project}`}>Cancel</a><button type="submit" class="primary" disabled=${save.busy}>Create workload</button></div>
    </form>`;
}

/** The form for an existing workload. */
export function WorkloadEdit({ id }: { id: string }) {
  const wl = useApi<Workload>(`/admin/workloads/${id}`);
  const workers = useApi<Worker[]>("/admin/workers");
  const siblings = useApi<Workload[]>(
    wl.data ? `/admin/projects/${encodeURIComponent(wl.data.project_slug)}/workloads` : null,
  );
  const others = siblings.data?.filter((w) => w.id !== wl.data?.id);
  const [d, setD] = useState<Draft | undefined>(() => (cameBack() ? keptDraft() : undefined));
  useEffect(() => {
    if (wl.data && !d) setD(draftOf(wl.data));
  }, [wl.data]);
  const save = useAction((body: Record<string, unknown>) =>
    api<Workload>(`/admin/workloads/${id}`, { method: "PATCH", body }),
  );
  if (wl.error) return html`<${ErrorNote} error=${wl.error} />`;
  if (!d || !wl.data) return html`<${Loading} />`;
  const submit = async (e: Event) => {
    e.preventDefault();
    if (refuseDraft(d, save.setError) || (await refuseHubRef(d, save.setError))) return;
    const { slug: _slug, ...body } = bodyOf(d);
    if (await save.run(body)) navigate(`/workloads/${id}`);
  };
  return html`<${PageTitle} sub="Changing the command, model, backend or placement restarts its runtime.">Edit ${wl.data.name}<//>
    <form class="card form" onSubmit=${submit} aria-label="Edit workload" noValidate>
      <${FormError} error=${save.error} />
      <${WorkloadFields} d=${d} onChange=${(next: Draft) => (setD(next), keepOn(`/workloads/${id}/edit`, next), save.setError(undefined))} error=${save.error} workers=${workers.data} editing=${true} others=${others} />
      <div class="actions"><a class="button" href=${`/workloads/${id}`}>Cancel</a><button type="submit" class="primary" disabled=${save.busy}>Save</button></div>
    </form>`;
}
