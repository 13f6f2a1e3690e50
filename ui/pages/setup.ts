/**
 * The guided first run: a project, a first workload, a key, and snippets to call it. The step and
 * the choices live in the address (`/setup?project=…&source=…&model=…&name=…&workload=…&key=…`),
 * so a reload lands on the same step with the same choices, and Back returns to the step before.
 */
import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { api } from "../lib/api";
import { useAction, useApi, useNow } from "../lib/hooks";
import { navigate, replaceQuery, useLocation } from "../lib/router";
import type { Info, Key, Project, Workload } from "../lib/types";
import { bodyOf, edit, emptyDraft, type Draft } from "../lib/draft";
import { STARTER_MODEL } from "../lib/model-ref";
import { PreviewBox } from "../components/launch-preview";
import { ModelPicker, RefNote, useModelChoices, useRefNote } from "../components/model-picker";
import { ReplicaStatus } from "../components/replica-status";
import { Snippets } from "../components/snippets";
import { CopyButton, ErrorNote, Loading, PageTitle } from "../components/ui";
import { ConnectToolButton } from "../components/connect-tool";
import { can, useMe } from "../lib/me";

const val = (e: Event) => (e.target as HTMLInputElement).value;

/** The setup's state as its address keeps it. */
interface SetupQuery {
  project?: string;
  /** Where the first model comes from, and the model and workload name chosen (step 2). */
  source?: string;
  model?: string;
  name?: string;
  /** The workload made in step 2 (its id), and the key made in step 3 (its id). */
  workload?: string;
  key?: string;
}

const KEYS: (keyof SetupQuery)[] = ["project", "source", "model", "name", "workload", "key"];

/** The setup's state read from the page's query. */
const queryOf = (q: URLSearchParams): SetupQuery =>
  Object.fromEntries(KEYS.map((k) => [k, q.get(k) ?? undefined]).filter(([, v]) => v));

/**
 * Goes to another step with `patch` over the address's current choices (an undefined value drops
 * one): a new history entry, so Back returns to the step before.
 */
function goTo(patch: SetupQuery): void {
  const q: SetupQuery = { ...queryOf(new URLSearchParams(location.search)), ...patch };
  const query = new URLSearchParams(KEYS.flatMap((k) => (q[k] ? [[k, q[k]!]] : [])));
  navigate(`/setup?${query}`);
}

/**
 * Step 1 for a role that cannot create projects (only admins can): an operator continues with a
 * project of theirs; a viewer, who can add nothing, is told who can.
 */
function NoNewProject({ projects, onDone }: { projects: Project[] | undefined; onDone(p: Project): void }) {
  const role = useMe()?.role ?? "viewer";
  if (!can("workload.change"))
    return html`<p class="note role-note" data-testid="setup-role-note">Your role (${role}) can only look: an operator or admin of a project adds its workloads and keys. See <a href="/projects">your projects</a>.</p>`;
  if (!projects) return html`<${Loading} />`;
  return html`<div data-testid="setup-role-note">
    <p class="note role-note">Only an admin creates projects. ${projects.length ? "As an operator you set up a model in a project of yours:" : "You are not in a project yet: ask an admin to add you to one, then come back here."}</p>
    ${projects.length ? html`<ul class="setup-projects">${projects.map((p) => html`<li><button type="button" onClick=${() => onDone(p)}>Continue with ${p.name}</button></li>`)}</ul>` : null}
  </div>`;
}

/** Step 1: a new project (or one that exists). */
function ProjectStep({ onDone }: { onDone(p: Project): void }) {
  const existing = useApi<Project[]>("/admin/projects");
  if (!can("project.create")) return html`<${NoNewProject} projects=${existing.data} onDone=${onDone} />`;
  return html`<${NewProject} existing=${existing.data} onDone=${onDone} />`;
}

/** Step 1 for an admin: a new project, or one that exists. */
function NewProject({ existing, onDone }: { existing: Project[] | undefined; onDone(p: Project): void }) {
  const [name, setName] = useState("");
  const create = useAction((n: string) => api<Project>("/admin/projects", { body: { name: n } }));
  const submit = async (e: Event) => {
    e.preventDefault();
    const p = await create.run(name.trim());
    if (p) onDone(p);
  };
  return html`<form onSubmit=${submit} aria-label="Create a project" noValidate>
    <p>A project groups workloads and the keys that may call them, e.g. one per app or team.</p>
    <label>Project name<input name="project" value=${name} onInput=${(e: Event) => setName(val(e))} placeholder="My app" /></label>
    <${ErrorNote} error=${create.error} />
    <div class="actions"><button type="submit" class="primary" disabled=${create.busy || !name.trim()}>Create project</button></div>
    ${existing?.length ? html`<p class="muted">Or continue with ${existing.map((p, i) => html`${i ? ", " : ""}<button type="button" class="link" onClick=${() => onDone(p)}>${p.name}</button>`)}.</p>` : null}
  </form>`;
}

/** Where the first model comes from. */
type Source = "starter" | "local" | "ollama";
const SOURCES: Source[] = ["starter", "local", "ollama"];

/** Step 2's draft from the address's choices (a starter model named "chat" when it has none). */
function draftOfQuery(source: Source, q: SetupQuery): Draft {
  const name = q.name ?? "chat";
  if (source === "ollama") return { ...emptyDraft("ollama"), name, model_name: q.model ?? "" };
  return edit({ ...emptyDraft("llamacpp"), name }, { gguf: q.model ?? (source === "starter" ? STARTER_MODEL : "") });
}

/**
 * Step 2: a first workload: a starter model downloaded from Hugging Face, a GGUF file here, or
 * Ollama. A workload of the project with the name given is the one made already (before a reload,
 * or before going Back): the button continues with it instead of making a second.
 */
function WorkloadStep({ project, q, onDone }: { project: Project; q: SetupQuery; onDone(w: Workload): void }) {
  const info = useApi<Info>("/admin/info");
  const ollama = info.data?.ollama;
  const existing = useApi<Workload[]>(`/admin/projects/${encodeURIComponent(project.slug)}/workloads`);
  const [source, setSource] = useState<Source>(SOURCES.find((s) => s === q.source) ?? "starter");
  const [refs, setRefs] = useState({
    starter: source === "starter" ? (q.model ?? STARTER_MODEL) : STARTER_MODEL,
    local: source === "local" ? (q.model ?? "") : "",
  });
  const [d, setD] = useState<Draft>(() => draftOfQuery(source, q));
  const choices = useModelChoices();
  const starterNote = useRefNote(refs.starter, choices);
  useEffect(
    () =>
      replaceQuery({
        project: project.slug,
        source,
        model: source === "ollama" ? d.model_name : refs[source],
        name: d.name,
      }),
    [source, refs, d.model_name, d.name],
  );
  const made = existing.data?.find((w) => w.name === d.name.trim());
  const setRef = (which: "starter" | "local", gguf: string) => {
    setRefs({ ...refs, [which]: gguf });
    setD(edit(d, { gguf }));
  };
  const choose = (s: Source) => {
    setSource(s);
    if (s === "ollama") setD(edit(d, { backend: "ollama", model_name: "" }));
    else setD(edit(d, { backend: "llamacpp", gguf: refs[s] }));
  };
  const create = useAction((body: Record<string, unknown>) =>
    api<Workload>(`/admin/projects/${project.slug}/workloads`, { body }),
  );
  const submit = async (e: Event) => {
    e.preventDefault();
    if (made) return onDone(made);
    const w = await create.run(bodyOf(d));
    if (w) onDone(w);
  };
  const runtime = `llama.cpp${info.data?.llama_server ? "" : " (inferd's built-in runtime: nothing else to install)"}`;
  return html`<form onSubmit=${submit} aria-label="Create a workload" noValidate>
    <fieldset class="backends"><legend>Where the model comes from</legend>
      <label class="choice"><input type="radio" name="kind" checked=${source === "starter"} onChange=${() => choose("starter")} />
        <span><strong>Download a starter model</strong><small>A small chat model from Hugging Face (about 400 MB), downloaded once into inferd's models and served by ${runtime}.</small></span></label>
      <label class="choice"><input type="radio" name="kind" checked=${source === "local"} onChange=${() => choose("local")} />
        <span><strong>A GGUF file on this machine</strong><small>One you already have; inferd lists those it finds from LM Studio, llama.cpp, Hugging Face and Ollama. Served by ${runtime}.</small></span></label>
      <label class="choice"><input type="radio" name="kind" checked=${source === "ollama"} disabled=${!ollama?.running} onChange=${() => choose("ollama")} />
        <span><strong>Ollama</strong><small>${ollama?.running ? `The daemon answers at ${ollama.url}; the model is pulled on first start.` : `No Ollama daemon answers at ${ollama?.url ?? "127.0.0.1:11434"}.`}</small></span></label>
    </fieldset>
    ${
      source === "starter"
        ? html`<label>Hugging Face model<input name="starter" value=${refs.starter} onInput=${(e: Event) => setRef("starter", val(e))} spellcheck=${false} aria-describedby="starter-note" />
        <small>A GGUF repo and quantisation as <code>owner/repo:QUANT</code>; change it to any other.</small></label>
        <${RefNote} note=${starterNote} id="starter-note" />`
        : null
    }
    ${source === "local" ? html`<${ModelPicker} value=${refs.local} onChange=${(g: string) => setRef("local", g)} />` : null}
    ${source === "ollama" ? html`<label>Ollama model<input name="model_name" value=${d.model_name} onInput=${(e: Event) => setD(edit(d, { model_name: val(e) }))} placeholder="llama3.2:1b" spellcheck=${false} /></label>` : null}
    <label>Workload name<input name="name" value=${d.name} onInput=${(e: Event) => setD(edit(d, { name: val(e) }))} /><small>Its URL uses a slug made from this.</small></label>
    ${
      made
        ? html`<p class="note" data-testid="made-note">This project has the workload <a href=${`/workloads/${made.id}`}>${made.name}</a> already (<code>${made.model_name}</code>): the button continues with it. Give another name to make a second one.</p>`
        : html`<${PreviewBox} d=${d} />`
    }
    <${ErrorNote} error=${create.error} />
    <div class="actions"><a class="button" href=${`/projects/${project.slug}/workloads/new`}>Other backends (vLLM, SGLang…)</a>
      <button type="submit" class="primary" disabled=${create.busy || !existing.data || (!made && (!d.model_name.trim() || !d.name.trim()))}>${made ? `Continue with ${made.name}` : "Create workload"}</button></div>
  </form>`;
}

/** Step 3: a live key for the data plane. */
function KeyStep({ project, onDone }: { project: Project; onDone(k: Key): void }) {
  const [name, setName] = useState("my-app");
  const create = useAction((n: string) =>
    api<Key>(`/admin/projects/${project.slug}/keys`, { body: { name: n, type: "live" } }),
  );
  const submit = async (e: Event) => {
    e.preventDefault();
    const k = await create.run(name.trim());
    if (k) onDone(k);
  };
  return html`<form onSubmit=${submit} aria-label="Create a key" noValidate>
    <p>Apps call the workload with a <strong>live key</strong> of the project.</p>
    <label>Key name<input name="key" value=${name} onInput=${(e: Event) => setName(val(e))} /></label>
    <${ErrorNote} error=${create.error} />
    <div class="actions"><button type="submit" class="primary" disabled=${create.busy || !name.trim()}>Create key</button></div>
  </form>`;
}

/**
 * What the first workload is doing, in words that follow its replicas' real states (never
 * "starting" beside a `ready` badge).
 */
function stateWords(w: Workload | undefined): string {
  const states = (w?.assignments ?? []).map((a) => a.state);
  if (states.includes("ready")) return "Your workload is ready: it answers now.";
  if (states.includes("failed"))
    return "Your workload's replica failed to start: the reason is below, and Retry tries again.";
  if (states.length && states.every((s) => s === "idle"))
    return "Your workload is scaled to zero: the first request starts it.";
  if (w?.paused) return "Your workload is stopped: start it from its page.";
  return "Your workload is starting; it answers once it shows ready:";
}

/** The first workload's replicas as they come up (downloading, starting, ready), under what they mean. */
function FirstReplicas({ id }: { id: string }) {
  const wl = useApi<Workload>(`/admin/workloads/${id}`, 2000);
  const now = useNow();
  const list = wl.data?.assignments ?? [];
  return html`<p data-testid="first-state">${stateWords(wl.data)}</p>
    ${
      list.length
        ? html`<div class="first-replicas" aria-label="Your workload's state">
      ${list.map((a) => html`<${ReplicaStatus} key=${a.id} now=${now} r=${{ workloadId: id, assignmentId: a.id, state: a.state, reason: a.reason, progress: a.progress, updatedAt: a.updated_at }} />`)}
    </div>`
        : null
    }`;
}

/** Step 4: the secret, once (after a reload it is gone: another key can be made), and the snippets. */
function DoneStep({
  workload,
  secret,
  onNewKey,
  keyId,
}: {
  workload: Workload;
  secret?: string;
  onNewKey(): void;
  /** The key made in step 3: "Connect a tool" fills it in and watches its first request. */
  keyId?: string;
}) {
  return html`<div>
    ${
      secret
        ? html`<div class="secret">
          <p class="warn"><strong>This is your key. Copy it now: you will not see it again.</strong></p>
          <div class="secret-row"><code class="secret-value" data-testid="secret">${secret}</code><${CopyButton} text=${secret} label="Copy secret" /></div>
        </div>`
        : html`<p class="note" data-testid="secret-gone">Your key's secret was shown once, when it was made, and is not kept. If you did not copy it, <button type="button" class="link" onClick=${onNewKey}>make another key</button>; the snippets below read it from <code>INFERD_API_KEY</code>.</p>`
    }
    <${FirstReplicas} id=${workload.id} />
    <p>Call it with any OpenAI client:</p>
    <${Snippets} workload=${workload} secret=${secret} />
    <div class="actions"><a class="button" href=${`/workloads/${workload.id}/playground`}>Try it in the playground</a><a class="button primary" href=${`/workloads/${workload.id}`}>See the workload</a></div>
    <h3>Or connect a tool</h3>
    <p class="muted">Open WebUI, Continue, Claude Code, Codex, opencode, the SDKs or curl: its settings with your key filled in, and its first request as it arrives.</p>
    <${ConnectToolButton} project=${workload.project_slug} keyId=${keyId} secret=${secret && keyId ? { keyId, value: secret } : undefined} />
  </div>`;
}

/** The guided first run, at the step its address names. */
export function Setup() {
  const q = queryOf(useLocation().query);
  const project = useApi<Project>(q.project ? `/admin/projects/${encodeURIComponent(q.project)}` : null);
  const workload = useApi<Workload>(q.workload ? `/admin/workloads/${encodeURIComponent(q.workload)}` : null);
  const [made, setMade] = useState<Key>();
  const step = !q.project ? 1 : !q.workload ? 2 : !q.key ? 3 : 4;
  const titles = ["Create a project", "Add a model", "Create a key", "Call it"];
  const lost = project.error ?? workload.error;
  const loading = (q.project && !project.data) || (q.workload && !workload.data);
  return html`<${PageTitle} sub="Four short steps from nothing to a model you can call.">Get started<//>
    <ol class="steps">
      ${titles.map((t, i) => html`<li class=${i + 1 === step ? "current" : i + 1 < step ? "done" : ""} aria-current=${i + 1 === step ? "step" : undefined}>${t}</li>`)}
    </ol>
    <section class="card" aria-labelledby="step-title">
      <h2 id="step-title">${step}. ${titles[step - 1]}</h2>
      ${
        lost
          ? html`<${ErrorNote} error=${lost} /><p><a href="/setup">Start again</a></p>`
          : loading
            ? html`<${Loading} />`
            : step === 1
              ? html`<${ProjectStep} onDone=${(p: Project) => goTo({ project: p.slug, workload: undefined, key: undefined })} />`
              : step === 2
                ? html`<${WorkloadStep} key=${q.project} project=${project.data!} q=${q} onDone=${(w: Workload) => goTo({ workload: w.id })} />`
                : step === 3
                  ? html`<${KeyStep} project=${project.data!} onDone=${(k: Key) => (setMade(k), goTo({ key: k.id }))} />`
                  : html`<${DoneStep} workload=${workload.data!} secret=${made?.id === q.key ? made?.secret : undefined} keyId=${q.key} onNewKey=${() => goTo({ key: undefined })} />`
      }
    </section>`;
}
