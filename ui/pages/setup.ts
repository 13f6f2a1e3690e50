/** The guided first run: a project, a first workload, a key, and snippets to call it. */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api } from "../lib/api";
import { useAction, useApi, useNow } from "../lib/hooks";
import type { Info, Key, Project, Workload } from "../lib/types";
import { bodyOf, edit, emptyDraft, type Draft } from "../lib/draft";
import { STARTER_MODEL } from "../lib/model-ref";
import { PreviewBox } from "../components/launch-preview";
import { ModelPicker, RefNote, useModelChoices, useRefNote } from "../components/model-picker";
import { ReplicaStatus } from "../components/replica-status";
import { Snippets } from "../components/snippets";
import { CopyButton, ErrorNote, PageTitle } from "../components/ui";

const val = (e: Event) => (e.target as HTMLInputElement).value;

/** Step 1: a new project (or one that exists). */
function ProjectStep({ onDone }: { onDone(p: Project): void }) {
  const existing = useApi<Project[]>("/admin/projects");
  const [name, setName] = useState("");
  const create = useAction((n: string) => api<Project>("/admin/projects", { body: { name: n } }));
  const submit = async (e: Event) => {
    e.preventDefault();
    const p = await create.run(name.trim());
    if (p) onDone(p);
  };
  return html`<form onSubmit=${submit} aria-label="Create a project">
    <p>A project groups workloads and the keys that may call them, e.g. one per app or team.</p>
    <label>Project name<input name="project" required value=${name} onInput=${(e: Event) => setName(val(e))} placeholder="My app" /></label>
    <${ErrorNote} error=${create.error} />
    <div class="actions"><button type="submit" class="primary" disabled=${create.busy || !name.trim()}>Create project</button></div>
    ${existing.data?.length ? html`<p class="muted">Or continue with ${existing.data.map((p, i) => html`${i ? ", " : ""}<button type="button" class="link" onClick=${() => onDone(p)}>${p.name}</button>`)}.</p>` : null}
  </form>`;
}

/** Where the first model comes from. */
type Source = "starter" | "local" | "ollama";

/** Step 2: a first workload: a starter model downloaded from Hugging Face, a GGUF file here, or Ollama. */
function WorkloadStep({ project, onDone }: { project: Project; onDone(w: Workload): void }) {
  const info = useApi<Info>("/admin/info");
  const ollama = info.data?.ollama;
  const [source, setSource] = useState<Source>("starter");
  const [refs, setRefs] = useState({ starter: STARTER_MODEL, local: "" });
  const [d, setD] = useState<Draft>(() => edit({ ...emptyDraft("llamacpp"), name: "chat" }, { gguf: STARTER_MODEL }));
  const choices = useModelChoices();
  const starterNote = useRefNote(refs.starter, choices);
  const setRef = (which: "starter" | "local", gguf: string) => {
    setRefs({ ...refs, [which]: gguf });
    setD(edit(d, { gguf }));
  };
  const choose = (s: Source) => {
    setSource(s);
    if (s === "ollama") setD(edit(d, { backend: "ollama", model_name: "" }));
    else setD(edit(d, { backend: "llamacpp", gguf: refs[s] }));
  };
  const create = useAction((body: Record<string, unknown>) => api<Workload>(`/admin/projects/${project.slug}/workloads`, { body }));
  const submit = async (e: Event) => {
    e.preventDefault();
    const w = await create.run(bodyOf(d));
    if (w) onDone(w);
  };
  const runtime = `llama.cpp${info.data?.llama_server ? "" : " (inferd's built-in runtime: nothing else to install)"}`;
  return html`<form onSubmit=${submit} aria-label="Create a workload">
    <fieldset class="backends"><legend>Where the model comes from</legend>
      <label class="choice"><input type="radio" name="kind" checked=${source === "starter"} onChange=${() => choose("starter")} />
        <span><strong>Download a starter model</strong><small>A small chat model from Hugging Face (about 400 MB), downloaded once into inferd's models and served by ${runtime}.</small></span></label>
      <label class="choice"><input type="radio" name="kind" checked=${source === "local"} onChange=${() => choose("local")} />
        <span><strong>A GGUF file on this machine</strong><small>One you already have; inferd lists those it finds from LM Studio, llama.cpp, Hugging Face and Ollama. Served by ${runtime}.</small></span></label>
      <label class="choice"><input type="radio" name="kind" checked=${source === "ollama"} disabled=${!ollama?.running} onChange=${() => choose("ollama")} />
        <span><strong>Ollama</strong><small>${ollama?.running ? `The daemon answers at ${ollama.url}; the model is pulled on first start.` : `No Ollama daemon answers at ${ollama?.url ?? "127.0.0.1:11434"}.`}</small></span></label>
    </fieldset>
    ${source === "starter" ? html`<label>Hugging Face model<input name="starter" required value=${refs.starter} onInput=${(e: Event) => setRef("starter", val(e))} spellcheck=${false} aria-describedby="starter-note" />
        <small>A GGUF repo and quantisation as <code>owner/repo:QUANT</code>; change it to any other.</small></label>
        <${RefNote} note=${starterNote} id="starter-note" />` : null}
    ${source === "local" ? html`<${ModelPicker} value=${refs.local} onChange=${(g: string) => setRef("local", g)} />` : null}
    ${source === "ollama" ? html`<label>Ollama model<input name="model_name" required value=${d.model_name} onInput=${(e: Event) => setD(edit(d, { model_name: val(e) }))} placeholder="llama3.2:1b" spellcheck=${false} /></label>` : null}
    <label>Workload name<input name="name" required value=${d.name} onInput=${(e: Event) => setD(edit(d, { name: val(e) }))} /><small>Its URL uses a slug made from this.</small></label>
    <${PreviewBox} d=${d} />
    <${ErrorNote} error=${create.error} />
    <div class="actions"><a class="button" href=${`/projects/${project.slug}/workloads/new`}>Other backends (vLLM, SGLang…)</a>
      <button type="submit" class="primary" disabled=${create.busy || !d.model_name.trim() || !d.name.trim()}>Create workload</button></div>
  </form>`;
}

/** Step 3: a live key for the data plane. */
function KeyStep({ project, onDone }: { project: Project; onDone(k: Key): void }) {
  const [name, setName] = useState("my-app");
  const create = useAction((n: string) => api<Key>(`/admin/projects/${project.slug}/keys`, { body: { name: n, type: "live" } }));
  const submit = async (e: Event) => {
    e.preventDefault();
    const k = await create.run(name.trim());
    if (k) onDone(k);
  };
  return html`<form onSubmit=${submit} aria-label="Create a key">
    <p>Apps call the workload with a <strong>live key</strong> of the project.</p>
    <label>Key name<input name="key" required value=${name} onInput=${(e: Event) => setName(val(e))} /></label>
    <${ErrorNote} error=${create.error} />
    <div class="actions"><button type="submit" class="primary" disabled=${create.busy || !name.trim()}>Create key</button></div>
  </form>`;
}

/** The first workload's replicas as they come up (downloading, starting, ready). */
function FirstReplicas({ id }: { id: string }) {
  const wl = useApi<Workload>(`/admin/workloads/${id}`, 2000);
  const now = useNow();
  const list = wl.data?.assignments ?? [];
  if (!list.length) return null;
  return html`<div class="first-replicas" aria-label="Your workload's state">
    ${list.map((a) => html`<${ReplicaStatus} key=${a.id} now=${now} r=${{ workloadId: id, assignmentId: a.id, state: a.state, reason: a.reason, progress: a.progress, updatedAt: a.updated_at }} />`)}
  </div>`;
}

/** Step 4: the secret, once, and the snippets that use it. */
function DoneStep({ workload, secret }: { workload: Workload; secret: string }) {
  return html`<div>
    <div class="secret">
      <p class="warn"><strong>This is your key. Copy it now: you will not see it again.</strong></p>
      <div class="secret-row"><code class="secret-value" data-testid="secret">${secret}</code><${CopyButton} text=${secret} label="Copy secret" /></div>
    </div>
    <p>Your workload is starting; it answers once it shows <strong>ready</strong>:</p>
    <${FirstReplicas} id=${workload.id} />
    <p>Call it with any OpenAI client:</p>
    <${Snippets} workload=${workload} secret=${secret} />
    <div class="actions"><a class="button" href=${`/workloads/${workload.id}/playground`}>Try it in the playground</a><a class="button primary" href=${`/workloads/${workload.id}`}>See the workload</a></div>
  </div>`;
}

/** The guided first run. */
export function Setup() {
  const [project, setProject] = useState<Project>();
  const [workload, setWorkload] = useState<Workload>();
  const [key, setKey] = useState<Key>();
  const step = !project ? 1 : !workload ? 2 : !key ? 3 : 4;
  const titles = ["Create a project", "Add a model", "Create a key", "Call it"];
  return html`<${PageTitle} sub="Four short steps from nothing to a model you can call.">Get started<//>
    <ol class="steps">
      ${titles.map((t, i) => html`<li class=${i + 1 === step ? "current" : i + 1 < step ? "done" : ""} aria-current=${i + 1 === step ? "step" : undefined}>${t}</li>`)}
    </ol>
    <section class="card" aria-labelledby="step-title">
      <h2 id="step-title">${step}. ${titles[step - 1]}</h2>
      ${step === 1 ? html`<${ProjectStep} onDone=${setProject} />` : null}
      ${step === 2 && project ? html`<${WorkloadStep} project=${project} onDone=${setWorkload} />` : null}
      ${step === 3 && project ? html`<${KeyStep} project=${project} onDone=${setKey} />` : null}
      ${step === 4 && workload && key?.secret ? html`<${DoneStep} workload=${workload} secret=${key.secret} />` : null}
    </section>`;
}
