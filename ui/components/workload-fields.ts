/** The fields of a workload, per backend, with the final launch command previewed by the server. */
import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { api, ApiError } from "../lib/api";
import { BACKENDS, defaultCommand, ggufName, TASK_TYPES } from "../lib/constants";
import type { LaunchPreview, Worker } from "../lib/types";

/** What the form edits. */
export interface Draft {
  name: string;
  slug: string;
  description: string;
  task_type: string;
  backend: string;
  model_name: string;
  gguf: string;
  command: string;
  version: string;
  worker_id: string;
  /** Whether the user typed the command (else it follows the model). */
  commandTouched: boolean;
}

/** An empty draft for `backend`. */
export const emptyDraft = (backend = "llamacpp"): Draft => ({ name: "", slug: "", description: "", task_type: "text2text", backend, model_name: "", gguf: "", command: defaultCommand(backend, ""), version: "", worker_id: "", commandTouched: false });

/** The `config` object of a draft for its backend. */
export function configOf(d: Draft): Record<string, string> {
  if (d.backend === "ollama") return {};
  const config: Record<string, string> = { command: d.command.trim() };
  if (d.version.trim() && d.backend !== "llamacpp") config[d.backend === "sglang" ? "sglang_version" : "vllm_version"] = d.version.trim();
  return config;
}

/** The create/update body of a draft (slug and pins only when given). */
export function bodyOf(d: Draft): Record<string, unknown> {
  return {
    name: d.name.trim(),
    ...(d.slug.trim() ? { slug: d.slug.trim() } : {}),
    description: d.description,
    task_type: d.task_type,
    backend: d.backend,
    model_name: d.model_name.trim(),
    config: configOf(d),
    worker_id: d.worker_id || null,
  };
}

/** Applies one edit, keeping an untouched command in step with the model. */
export function edit(d: Draft, patch: Partial<Draft>): Draft {
  const next = { ...d, ...patch };
  if (patch.gguf !== undefined && (!d.model_name || d.model_name === ggufName(d.gguf))) next.model_name = ggufName(patch.gguf);
  if (!next.commandTouched || patch.backend !== undefined) {
    next.command = defaultCommand(next.backend, next.model_name, next.gguf);
    if (patch.backend !== undefined) next.commandTouched = false;
  }
  return next;
}

type Preview = LaunchPreview;

/** Asks the server for the command the agent would run, a moment after the user stops typing. */
function useLaunchPreview(d: Draft): { preview?: Preview; error?: ApiError } {
  const [state, setState] = useState<{ preview?: Preview; error?: ApiError }>({});
  const config = configOf(d);
  const key = JSON.stringify([d.backend, d.model_name.trim(), config]);
  useEffect(() => {
    if (!d.model_name.trim() || (d.backend !== "ollama" && !config.command)) return setState({});
    const ctl = new AbortController();
    const timer = setTimeout(() => {
      api<Preview>("/admin/launch-preview", { body: { backend: d.backend, model_name: d.model_name.trim(), config }, signal: ctl.signal })
        .then((preview) => setState({ preview }), (error) => ctl.signal.aborted || setState({ error }));
    }, 300);
    return () => {
      clearTimeout(timer);
      ctl.abort();
    };
  }, [key]);
  return state;
}

const val = (e: Event) => (e.target as HTMLInputElement).value;

/** The final launch command of a draft and what the agent adds to it, in words. */
export function PreviewBox({ d }: { d: Draft }) {
  const { preview, error } = useLaunchPreview(d);
  if (error) return html`<p class="note error" role="alert" data-testid="preview-error">${error.message}</p>`;
  if (!preview) return null;
  const notes = [
    preview.port_added && "--host 127.0.0.1 --port <free port> are added (inferd picks the port)",
    preview.tp_added && "--tensor-parallel-size is set to the replica's GPU count",
    preview.builtin && "llama-server is not installed here: inferd's built-in llama.cpp runtime serves these flags",
  ].filter(Boolean);
  return html`<div class="preview" aria-live="polite">
    <span class="label">The agent will run</span>
    <pre data-testid="launch-command"><code>${preview.command}</code></pre>
    ${notes.length ? html`<ul class="muted">${notes.map((n) => html`<li>${n}</li>`)}</ul>` : null}
    ${preview.tenant.applies
      ? html`<p class=${`note ${preview.tenant.allowed ? "ok" : "warn"}`} data-testid="launch-policy">${preview.tenant.allowed
          ? "Launch policy: a project's control-plane key could save this command too."
          : html`Launch policy: only you (the operator) can save this; a project's control-plane key would be refused — ${preview.tenant.violation?.message}`}</p>`
      : null}
  </div>`;
}

/** The backend-specific part of the form. */
function BackendFields({ d, set, fieldError }: { d: Draft; set(p: Partial<Draft>): void; fieldError(f: string): string | undefined }) {
  const llama = d.backend === "llamacpp";
  const ollama = d.backend === "ollama";
  return html`
    ${llama ? html`<label>GGUF file on the worker
        <input name="gguf" value=${d.gguf} onInput=${(e: Event) => set({ gguf: val(e) })} placeholder="/models/qwen2.5-0.5b-instruct-q4_k_m.gguf" spellcheck=${false} />
        <small>The path of the model file on the machine that runs it.</small></label>` : null}
    <label>${ollama ? "Ollama model" : "Model name"}
      <input name="model_name" required value=${d.model_name} onInput=${(e: Event) => set({ model_name: val(e) })} placeholder=${ollama ? "llama3.2:1b" : llama ? "qwen2.5-0.5b" : "Qwen/Qwen3-8B"} spellcheck=${false} aria-invalid=${!!fieldError("model_name")} />
      <small>${ollama ? "A name from the Ollama library; it is pulled on first start." : "Clients may send this name (or \"default\") as the model."}</small></label>
    ${ollama ? null : html`<label>Command
        <textarea name="command" rows="3" spellcheck=${false} value=${d.command} onInput=${(e: Event) => set({ command: val(e), commandTouched: true })} aria-invalid=${!!fieldError("config.command")}></textarea>
        <small>Run as written (split like a shell, never through one); the agent adds only what is shown below.</small></label>`}
    ${d.backend === "vllm" || d.backend === "vllm-omni" || d.backend === "sglang"
      ? html`<label>${d.backend === "sglang" ? "SGLang" : "vLLM"} version (optional)
          <input name="version" value=${d.version} onInput=${(e: Event) => set({ version: val(e) })} placeholder="0.11.0" />
          <small>Installed once into inferd's data folder; empty uses the one on PATH.</small></label>`
      : null}
    <${PreviewBox} d=${d} />`;
}

/** Every field of a workload; `error` marks the field the server named. */
export function WorkloadFields({ d, onChange, error, workers, editing }: { d: Draft; onChange(d: Draft): void; error?: ApiError; workers?: Worker[]; editing?: boolean }) {
  const set = (p: Partial<Draft>) => onChange(edit(d, p));
  const fieldError = (f: string) => (error?.field === f || error?.field?.startsWith(`${f}.`) ? error.message : undefined);
  return html`<fieldset class="backends">
      <legend>Backend</legend>
      ${BACKENDS.map((b) => html`<label class="choice">
        <input type="radio" name="backend" value=${b.id} checked=${d.backend === b.id} onChange=${() => set({ backend: b.id })} />
        <span><strong>${b.label}</strong><small>${b.hint}</small></span></label>`)}
    </fieldset>
    <div class="grid2">
      <label>Name<input name="name" required value=${d.name} onInput=${(e: Event) => set({ name: val(e) })} placeholder="chat" aria-invalid=${!!fieldError("name")} /></label>
      ${editing ? null : html`<label>Slug (optional)<input name="slug" value=${d.slug} onInput=${(e: Event) => set({ slug: val(e) })} placeholder="from the name" aria-invalid=${!!fieldError("slug")} /></label>`}
      <label>Task type
        <select name="task_type" value=${d.task_type} onChange=${(e: Event) => set({ task_type: val(e) })}>
          ${TASK_TYPES.map(([id, label]) => html`<option value=${id}>${label}</option>`)}
        </select></label>
      <label>Run on
        <select name="worker_id" value=${d.worker_id} onChange=${(e: Event) => set({ worker_id: val(e) })}>
          <option value="">Any suitable worker</option>
          ${(workers ?? []).map((w) => html`<option value=${w.id}>${w.name} (${w.gpus.length} GPU${w.gpus.length === 1 ? "" : "s"})</option>`)}
        </select></label>
    </div>
    <${BackendFields} d=${d} set=${set} fieldError=${fieldError} />`;
}
