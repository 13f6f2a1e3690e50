/**
 * Models: find one by name (Hugging Face or the Ollama library) or pull one by its exact name (with
 * live progress), see each one's shape, size, need and users, serve it, and use files found here.
 */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api } from "../lib/api";
import { useAction, useApi } from "../lib/hooks";
import { bytes } from "../lib/format";
import { STARTER_MODEL } from "../lib/model-ref";
import type { FoundModel, Model } from "../lib/types";
import { ErrorNote, FieldError, invalidAt, Loading, PageTitle } from "../components/ui";
import { ModelCard } from "../components/model-card";
import { HubSearch } from "../components/hub-search";
import { Can, can, useMe } from "../lib/me";

/** Source forms the pull field takes, with what each means. */
const EXAMPLES: [string, string][] = [
  ["owner/repo-GGUF:Q4_K_M", "the GGUF with that quantisation (llama.cpp); hf: in front is optional"],
  ["owner/repo-GGUF", "a GGUF repo with a single quantisation"],
  ["hf:owner/repo/file.gguf", "one file of a repo"],
  ["owner/repo", "a whole repo (safetensors, for vLLM and SGLang)"],
  ["https://host/model.gguf", "a file from a URL"],
  ["/path/on/this/machine.gguf", "a file already here (registered, not copied)"],
];

/**
 * For whom a non-admin pulls (their pulls always count against a project of theirs): a choice when
 * they belong to several, else a note naming their project. Nothing for the admin, whose pulls are theirs.
 */
function PullProject({ project, onPick }: { project: string; onPick(id: string): void }) {
  const me = useMe();
  if (!me || me.projects === "all") return null;
  const rules = "URLs must be public https addresses and files must lie in the model directories the admin allows.";
  if (me.projects.length === 1)
    return html`<p class="note" data-testid="pull-project">Models you pull count against project <strong>${me.projects[0].slug}</strong>. ${rules}</p>`;
  return html`<label class="card form" data-testid="pull-project">Pull for project
    <select name="project" value=${project} onChange=${(e: Event) => onPick((e.target as HTMLSelectElement).value)}>
      <option value="">Choose the project a pull counts against…</option>
      ${me.projects.map((p) => html`<option value=${p.id}>${p.name} (${p.slug})</option>`)}
    </select><small>${rules}</small></label>`;
}

/** The pull form, suggesting a small starter model; `project` is the one a tenant pulls for. */
function PullForm({ project, onPulled }: { project: string; onPulled(): unknown }) {
  const [source, setSource] = useState(`hf:${STARTER_MODEL}`);
  const pull = useAction((s: string) =>
    api<Model>("/admin/models", { body: { source: s, ...(project ? { project } : {}) } }),
  );
  const submit = async (e: Event) => {
    e.preventDefault();
    if (await pull.run(source.trim())) {
      setSource("");
      await onPulled();
    }
  };
  return html`<form class="card form" onSubmit=${submit} aria-label="Pull a model">
    <h2>Pull a model</h2>
    <label>Source
      <input name="source" required value=${source} spellcheck=${false} onInput=${(e: Event) => setSource((e.target as HTMLInputElement).value)}
        placeholder="owner/repo-GGUF:Q4_K_M" ...${invalidAt(pull.error, "source")} />
      <small>Suggested to start: <code>hf:${STARTER_MODEL}</code> (a small chat model, about 400 MB). Downloads resume where they stopped.</small>
      <${FieldError} error=${pull.error} field="source" alert=${true} /></label>
    <details><summary>What a source can be</summary>
      <ul class="examples">${EXAMPLES.map(([ex, what]) => html`<li><code>${ex}</code>: ${what}</li>`)}</ul></details>
    ${pull.error?.field === "source" ? null : html`<${ErrorNote} error=${pull.error} />`}
    <div class="actions"><button type="submit" class="primary" disabled=${pull.busy || !source.trim()}>Pull</button></div>
  </form>`;
}

/** GGUF files other tools left on this machine, each one registered with "Use". */
function Found({ models, onUsed }: { models: Model[]; onUsed(): unknown }) {
  const found = useApi<FoundModel[]>("/admin/models/discover");
  const use = useAction((path: string) => api<Model>("/admin/models", { body: { source: path } }));
  const known = (path: string) => models.some((m) => m.entry === path || m.source === path);
  return html`<section aria-labelledby="found"><h2 id="found">Found on this machine</h2>
    <p class="muted">GGUF files from LM Studio, llama.cpp's cache, the Hugging Face cache and Ollama. Using one registers it: nothing is copied.</p>
    <${ErrorNote} error=${found.error ?? use.error} />
    ${
      !found.data
        ? html`<${Loading} />`
        : found.data.length === 0
          ? html`<p class="muted">None found.</p>`
          : html`<ul class="found">
      ${found.data.map(
        (f) => html`<li key=${f.path} class="card found-item" aria-label=${`Found ${f.name}`}>
        <div class="found-text"><strong class="wrap">${f.name}</strong>
          <span class="muted small-text">${f.origin} · ${f.quant ?? "no quantisation in the name"} · ${bytes(f.size_bytes)}</span>
          <code class="muted small-text wrap">${f.path}</code></div>
        ${
          known(f.path)
            ? html`<span class="muted">In inferd's models</span>`
            : !can("model.change")
              ? null
              : html`<button type="button" class="small" aria-label=${`Use ${f.name}`} disabled=${use.busy}
          onClick=${async () => (await use.run(f.path)) && onUsed()}>Use</button>`
        }</li>`,
      )}</ul>`
    }
  </section>`;
}

/** Downloads followed live at once: each holds a connection, and a browser has six per server. */
const LIVE_STREAMS = 3;

/** The models page. */
export function ModelsPage() {
  const list = useApi<Model[]>("/admin/models", 3000);
  const [project, setProject] = useState("");
  const reload = () => list.reload();
  const live = new Set(
    (list.data ?? [])
      .filter((m) => m.state === "downloading")
      .slice(0, LIVE_STREAMS)
      .map((m) => m.id),
  );
  return html`<${PageTitle} sub="Model files on this machine: find them by name on Hugging Face (or the Ollama library), pull them, see what they need and who uses them, and serve them.">Models<//>
    <${Can} do="model.change" note><${PullProject} project=${project} onPick=${setProject} />
      <section class="card" aria-labelledby="find"><h2 id="find">Find a model</h2>
      <${HubSearch} action=${{ kind: "pull", onPulled: reload, project }} models=${list.data ?? []} /></section>
    <${PullForm} project=${project} onPulled=${reload} /><//>
    ${
      list.error
        ? html`<${ErrorNote} error=${list.error} />`
        : !list.data
          ? html`<${Loading} />`
          : list.data.length === 0
            ? html`<p class="muted">No models yet. Pull one above, use one found below, or name one in a workload's command (it is pulled before launch).</p>`
            : html`<ul class="models">${list.data.map((m) => html`<${ModelCard} key=${m.id} model=${m} stream=${live.has(m.id)} onChange=${reload} />`)}</ul>`
    }
    <${Can} do="model.discover"><${Found} models=${list.data ?? []} onUsed=${reload} /><//>`;
}
