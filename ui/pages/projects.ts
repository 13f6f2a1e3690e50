/** Projects: the list, a new one, and deleting one. */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api } from "../lib/api";
import { useAction, useApi } from "../lib/hooks";
import { navigate } from "../lib/router";
import { noun, when } from "../lib/format";
import type { Project, ProjectRow } from "../lib/types";
import { ErrorNote, Loading, PageTitle } from "../components/ui";
import { Can, can } from "../lib/me";

const val = (e: Event) => (e.target as HTMLInputElement).value;

/** The projects page. */
export function Projects() {
  const list = useApi<ProjectRow[]>("/admin/projects");
  const [name, setName] = useState("");
  const [slug, setSlug] = useState("");
  const create = useAction((body: Record<string, string>) => api<Project>("/admin/projects", { body }));
  const submit = async (e: Event) => {
    e.preventDefault();
    const p = await create.run({ name: name.trim(), ...(slug.trim() ? { slug: slug.trim() } : {}) });
    if (p) navigate(`/projects/${p.slug}`);
  };
  return html`<${PageTitle} sub="A project groups workloads and the keys that may use them.">Projects<//>
    <${Can} do="project.create"><form class="card form inline" onSubmit=${submit} aria-label="New project">
      <h2>New project</h2>
      <div class="grid2">
        <label>Name<input name="name" required value=${name} onInput=${(e: Event) => setName(val(e))} placeholder="My app" aria-invalid=${create.error?.field === "name"} /></label>
        <label>Slug (optional)<input name="slug" value=${slug} onInput=${(e: Event) => setSlug(val(e))} placeholder="from the name" aria-invalid=${create.error?.field === "slug"} /></label>
      </div>
      <${ErrorNote} error=${create.error} />
      <div class="actions"><button type="submit" class="primary" disabled=${create.busy || !name.trim()}>Create project</button></div>
    </form><//>
    ${
      list.error
        ? html`<${ErrorNote} error=${list.error} />`
        : !list.data
          ? html`<${Loading} />`
          : list.data.length === 0
            ? can("project.create")
              ? html`<p class="muted">No projects yet. <a href="/setup">Get started</a> walks you through the first one.</p>`
              : html`<p class="muted" data-testid="no-projects">You belong to no project yet: an admin can add you to one.</p>`
            : html`<div class="table-wrap"><table>
          <thead><tr><th scope="col">Project</th><th scope="col">Slug</th><th scope="col">Workloads</th><th scope="col">Keys</th><th scope="col">Created</th></tr></thead>
          <tbody>${list.data.map(
            (
              p,
            ) => html`<tr data-testid="project-row"><td><a href=${`/projects/${p.slug}`}>${p.name}</a></td><td><code>${p.slug}</code></td>
            <td class="num">${p.workload_count}</td><td class="num"><a href=${`/projects/${p.slug}/keys`}>${p.key_count}<span class="offscreen"> live ${noun(p.key_count, "key")}</span></a></td><td>${when(p.created_at)}</td></tr>`,
          )}</tbody>
        </table></div>`
    }`;
}
