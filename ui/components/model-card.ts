/**
 * One model of the store: its shape and memory estimate, a live download bar, who uses it, where it
 * fits, and its actions (Serve this model, cancel, retry, dismiss a failed pull, delete).
 */
import { html } from "htm/preact";
import { useEffect, useId, useRef, useState } from "preact/hooks";
import { api, failure, send } from "../lib/api";
import { useAction, useApi } from "../lib/hooks";
import { sseData } from "../lib/sse";
import { navigate } from "../lib/router";
import { bytes, mib, params } from "../lib/format";
import { refOfModel } from "../lib/model-ref";
import type { Model, ModelDetail, Progress, ProjectRow } from "../lib/types";
import { ConfirmButton, ErrorNote, StateBadge } from "./ui";
import { DownloadProgress } from "./progress";
import { can, useMe } from "../lib/me";

/** What the progress stream says of a pull. */
type Live = Pick<Model, "state" | "reason" | "size_bytes"> & { progress: Progress | null };

/**
 * The model as its pull's progress stream has it (while it downloads and `stream` is on); `onEnd`
 * runs when the stream ends, so the caller can read the finished model.
 */
function useLiveModel(m: Model, stream: boolean, onEnd: () => unknown): Model {
  const [live, setLive] = useState<Live>();
  useEffect(() => {
    setLive(undefined);
    if (m.state !== "downloading" || !stream) return;
    const ctl = new AbortController();
    void (async () => {
      try {
        const res = await send(`/admin/models/${m.id}/progress`, { signal: ctl.signal });
        if (!res.ok) throw await failure(res);
        for await (const data of sseData(res)) setLive(JSON.parse(data) as Live);
        await onEnd();
      } catch {}
    })();
    return () => ctl.abort();
  }, [m.id, m.state, stream]);
  return live ? { ...m, ...live } : m;
}

/** The model's shape in one line, e.g. "llama · 494M parameters · Q4_K_M · context 32768 · 469 MiB". */
function shape(m: Model): string {
  const i = m.info;
  const parts = [
    i?.architecture,
    i?.parameters ? `${params(i.parameters)} parameters` : null,
    i?.quantization,
    i?.context_length ? `context ${i.context_length}` : null,
    m.size_bytes ? bytes(m.size_bytes) : null,
  ];
  return parts.filter(Boolean).join(" · ");
}

/**
 * Whom a model was pulled for and, unused, when it is removed, e.g. "Pulled for acme · removed in
 * 23 h unless a workload uses it"; nothing for one the admin pulled by hand.
 */
function PulledFor({ m }: { m: Model }) {
  if (!m.pulled_for) return null;
  const slug = m.pulled_for.project_slug;
  const hours = m.removes_at ? Math.max(0, Math.ceil((Date.parse(m.removes_at) - Date.now()) / 3_600_000)) : null;
  return html`<p data-testid="pulled-for">Pulled for ${slug ? html`<a href=${`/projects/${slug}`}>${slug}</a>` : "a deleted project"}${
    hours === null
      ? null
      : html` · <span class="reason-quiet">removed ${hours ? `in ${hours} h` : "within the hour"} unless a workload uses it</span>`
  }</p>`;
}

/**
 * Whether the signed-in principal may cancel, retry, dismiss or delete a model: the admin any, an
 * operator only one pulled for a project of theirs (the server refuses the rest).
 */
function useMayChange(m: Model): boolean {
  const me = useMe();
  if (!me || !can("model.change")) return false;
  return me.projects === "all" || (!!m.pulled_for && can("model.change", m.pulled_for.project_id));
}

/** Each worker's GPUs (or RAM, without GPUs) against the model's need, read when opened. */
function Fit({ id }: { id: string }) {
  const detail = useApi<ModelDetail>(`/admin/models/${id}`);
  if (detail.error) return html`<${ErrorNote} error=${detail.error} />`;
  if (!detail.data) return html`<p class="muted" aria-busy="true">Loading…</p>`;
  const fit = detail.data.fit;
  if (!fit.length) return html`<p class="muted">Its size is not known yet, so it cannot be compared.</p>`;
  const verdict = (ok: boolean) =>
    html`<span class=${`badge ${ok ? "state-ready" : "state-failed"}`}>${ok ? "fits" : "too small"}</span>`;
  return html`<div class="table-wrap"><table data-testid="fit">
    <thead><tr><th scope="col">Worker</th><th scope="col">Where</th><th scope="col">Free</th><th scope="col">Needs</th><th scope="col">Verdict</th></tr></thead>
    <tbody>${fit.flatMap((f) =>
      f.gpus.length
        ? f.gpus.map(
            (g) =>
              html`<tr><td>${f.worker}</td><td>GPU ${g.index} · ${g.name}</td><td>${mib(g.free_mib)} of ${mib(g.total_mib)}</td><td>${mib(f.needs_mib)}</td><td>${verdict(g.fits)}</td></tr>`,
          )
        : [
            html`<tr><td>${f.worker}</td><td>RAM (no GPU)</td><td>${mib(f.ram_free_mib)}</td><td>${mib(f.needs_mib)}</td><td>${verdict(f.fits_in_ram)}</td></tr>`,
          ],
    )}
    </tbody></table></div>`;
}

/**
 * The workload form of a project, filled with a model and backend.
 * @example serveHref("demo", "o/r:Q4_K_M", "llamacpp") // → "/projects/demo/workloads/new?model=o%2Fr%3AQ4_K_M&backend=llamacpp"
 */
export const serveHref = (project: string, model: string, backend: string) =>
  `/projects/${encodeURIComponent(project)}/workloads/new?${new URLSearchParams({ model, backend })}`;

/** With no project yet: one is made here (a name, one click) and the model is served in it. */
function FirstProject({ onMade }: { onMade(slug: string): void }) {
  const [name, setName] = useState("My app");
  const make = useAction(() => api<ProjectRow>("/admin/projects", { body: { name: name.trim() } }));
  const submit = async (e: Event) => {
    e.preventDefault();
    const p = await make.run();
    if (p) onMade(p.slug);
  };
  return html`<form onSubmit=${submit} noValidate>
    <p>A workload belongs to a project, and there is none yet: name one and the model is served in it.</p>
    <label>Project name<input name="project" value=${name} onInput=${(e: Event) => setName((e.target as HTMLInputElement).value)} /></label>
    <${ErrorNote} error=${make.error} />
    <div class="actions"><button type="submit" class="primary" disabled=${make.busy || !name.trim()}>Create project and continue</button></div>
  </form>`;
}

/**
 * "Serve this model": straight to the workload form when there is one project; otherwise a dialog
 * to pick the project (or, with none, a link to create one). `name` is the button's accessible name.
 */
export function ServeButton({
  model,
  backend,
  label = "Serve this model",
  name,
  small,
}: {
  model: string;
  backend: string;
  label?: string;
  name?: string;
  small?: boolean;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  const id = useId();
  const [projects, setProjects] = useState<ProjectRow[]>([]);
  const load = useAction(() => api<ProjectRow[]>("/admin/projects"));
  const close = () => dialog.current?.close();
  const open = async () => {
    const list = await load.run();
    if (!list) return;
    if (list.length === 1) return navigate(serveHref(list[0].slug, model, backend));
    setProjects(list);
    dialog.current?.showModal();
  };
  return html`<button type="button" class=${small ? "small" : undefined} aria-label=${name ?? label} disabled=${load.busy} onClick=${open}>${label}</button>
    <dialog ref=${dialog} aria-labelledby=${id} class="serve-dialog">
      <h2 id=${id} class="wrap">Serve ${model}</h2>
      ${
        projects.length
          ? html`<p>A workload belongs to a project. In which one?</p>
          <ul class="serve-projects">${projects.map((p) => html`<li><a href=${serveHref(p.slug, model, backend)} onClick=${close}>${p.name}</a> <span class="muted small-text">${p.slug}</span></li>`)}</ul>`
          : html`<${FirstProject} onMade=${(slug: string) => (close(), navigate(serveHref(slug, model, backend)))} />`
      }
      <div class="actions"><button type="button" onClick=${close}>Cancel</button></div>
    </dialog>
    <${ErrorNote} error=${load.error} />`;
}

/** What serving a store model means: a GGUF through llama.cpp, a safetensors snapshot through vLLM. */
function serveTarget(m: Model): { model: string; backend: string } | null {
  const snapshot = m.info?.format === "safetensors" || (m.kind === "hf-repo" && !/\.gguf$/i.test(m.entry ?? ""));
  if (snapshot) return m.repo ? { model: m.repo, backend: "vllm" } : null;
  return { model: refOfModel(m), backend: "llamacpp" };
}

/**
 * A model's card with its actions: cancel a download, pull again, delete (refused while used).
 * `stream`: follow the download live (else it moves as the list is read again).
 */
export function ModelCard({ model, stream, onChange }: { model: Model; stream: boolean; onChange(): unknown }) {
  const m = useLiveModel(model, stream, onChange);
  const [fitOpen, setFitOpen] = useState(false);
  const cancel = useAction(() => api(`/admin/models/${m.id}/cancel`, { method: "POST" }).then(() => true));
  const mine = useMayChange(m);
  // A tenant pulls again for the project it was pulled for (the admin's pull makes it theirs).
  const project = useMe()?.projects === "all" ? undefined : m.pulled_for?.project_id;
  const again = useAction(() =>
    api(`/admin/models`, { body: { source: m.source, ...(project ? { project } : {}) } }).then(() => true),
  );
  const del = useAction(() => api(`/admin/models/${m.id}`, { method: "DELETE" }).then(() => true));
  const dismiss = useAction(() => api(`/admin/models/${m.id}/dismiss`, { method: "POST" }).then(() => true));
  const est = m.estimate;
  const serve = m.state === "ready" || m.state === "downloading" ? serveTarget(m) : null;
  const local = m.kind === "local";
  return html`<li class=${`card model${m.state === "failed" ? " model-failed" : ""}`} aria-label=${`Model ${m.source}`}>
    <div class="model-head"><h2 class="wrap">${m.source}</h2><span aria-live="polite"><${StateBadge} state=${m.state} /></span></div>
    ${shape(m) ? html`<p class="muted">${shape(m)}</p>` : null}
    ${est ? html`<p data-testid="estimate">Needs ~${(est.total_bytes / 1073741824).toFixed(1)} GiB <span class="muted">for ${est.context} tokens of context: weights ${bytes(est.weights_bytes)}, KV cache ${bytes(est.kv_bytes)}, overhead ${bytes(est.overhead_bytes)}</span></p>` : null}
    ${m.state === "downloading" ? html`<${DownloadProgress} progress=${m.progress} label=${`Downloading ${m.source}`} />` : null}
    ${m.reason && m.state !== "downloading" ? html`<p class=${m.state === "failed" ? "reason" : "reason reason-quiet"}>${m.reason}</p>` : null}
    <p>${
      m.used_by.length
        ? html`Used by ${m.used_by.map((u, i) => html`${i ? ", " : ""}<a href=${`/workloads/${u.id}`}>${u.project_slug}/${u.slug}</a>`)}`
        : html`<span class="muted">Not used by any workload.</span>`
    }</p>
    <${PulledFor} m=${m} />
    ${m.entry ? html`<p class="muted small-text wrap">${local ? "File" : "Stored at"} <code>${m.entry}</code></p>` : null}
    ${
      m.state === "ready"
        ? html`<details class="fit" onToggle=${(e: Event) => setFitOpen((e.target as HTMLDetailsElement).open)}>
        <summary>Where it fits</summary>${fitOpen ? html`<${Fit} id=${m.id} />` : null}</details>`
        : null
    }
    <${ErrorNote} error=${cancel.error ?? again.error ?? del.error ?? dismiss.error} />
    ${
      !can("model.change")
        ? null
        : html`<div class="actions">
      ${serve ? html`<${ServeButton} model=${serve.model} backend=${serve.backend} />` : null}
      ${
        !mine
          ? null
          : html`
      ${m.state === "downloading" ? html`<button type="button" disabled=${cancel.busy} onClick=${async () => (await cancel.run()) && onChange()}>Cancel download</button>` : null}
      ${m.state === "failed" || m.state === "cancelled" ? html`<button type="button" disabled=${again.busy} onClick=${async () => (await again.run()) && onChange()}>${m.state === "cancelled" ? "Resume download" : "Try again"}</button>` : null}
      ${
        m.state === "failed"
          ? html`<button type="button" disabled=${dismiss.busy} onClick=${async () => (await dismiss.run()) && onChange()}>Dismiss</button>`
          : html`<${ConfirmButton} label="Delete" title=${`Delete ${m.source}?`} confirm="Delete model" onConfirm=${async () => (await del.run()) && onChange()}
        body=${html`<p>${local ? "inferd forgets this file; the file itself stays where it is." : "Its downloaded files are removed from inferd's models."}</p>`} />`
      }`
      }
    </div>`
    }
  </li>`;
}
