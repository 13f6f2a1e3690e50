/** The fields of a workload, per backend, with its model, its names and fallbacks on the project's base URL, its execution policy and the launch preview. */
import { html } from "htm/preact";
import type { ApiError } from "../lib/api";
import { BACKENDS, TASK_TYPES } from "../lib/constants";
import { useEffect } from "preact/hooks";
import { useApi } from "../lib/hooks";
import { edit, modelInCommand, PROJECTOR_PLACEHOLDER, servedNameOf, type Draft } from "../lib/draft";
import type { PolicyDraft } from "../lib/policy";
import type { Worker } from "../lib/types";
import { PreviewView, useLaunchPreview } from "./launch-preview";
import { ModelPicker } from "./model-picker";
import { PolicyFields } from "./policy-fields";
import { ReplicaRouting, RoutingFields, type FallbackChoice } from "./routing-fields";
import { FieldError, invalidAt } from "./ui";

const val = (e: Event) => (e.target as HTMLInputElement).value;

/** The saved error when it names `field`, else the launch preview's refusal when that names it (one note, not two). */
const errorAt = (field: string, saved?: ApiError, previewed?: ApiError) =>
  saved?.field === field ? saved : previewed?.field === field ? previewed : undefined;

/** Looks up the projector of a vision model on llama.cpp and puts it in the draft (its `--mmproj`). */
function useProjector(d: Draft, set: (p: Partial<Draft>) => void) {
  const wanted = d.backend === "llamacpp" && d.task_type === "image2text" && d.gguf.trim() ? d.gguf.trim() : null;
  const { data } = useApi<{ model: string; projector: string | null }>(
    wanted && `/admin/projector?model=${encodeURIComponent(wanted)}`,
  );
  useEffect(() => {
    if (data && data.model === wanted && (data.projector ?? "") !== d.projector)
      set({ projector: data.projector ?? "" });
  }, [data, wanted]);
}

/** What the command field says under it: how the model is named (vLLM, SGLang) and what the task type added. */
function CommandNotes({ d }: { d: Draft }) {
  const served = modelInCommand(d.backend) ? servedNameOf(d.backend, d.command) : "";
  return html`${
    modelInCommand(d.backend)
      ? html`<small data-testid="served-name">${
          served
            ? html`Clients send <code>${d.model_name || served}</code> as the model (or "default"); <code>--served-model-name</code> changes it.`
            : html`Name the model here: <code>${d.backend === "sglang" ? "--model-path owner/model" : "vllm serve owner/model"}</code>; clients send that name as the model.`
        }</small>`
      : null
  }
    ${d.taskAdded ? html`<small data-testid="task-flag">Added for this task type: <code>${d.taskAdded}</code>${d.taskAdded.endsWith(PROJECTOR_PLACEHOLDER) ? " — no projector (mmproj-….gguf) is known beside this model: put its path in place of this one." : ""}</small>` : null}`;
}

/** The backend-specific part of the form; the launch preview's refusals are shown at the field they name. */
function BackendFields({ d, set, error: saved }: { d: Draft; set(p: Partial<Draft>): void; error?: ApiError }) {
  const llama = d.backend === "llamacpp";
  const ollama = d.backend === "ollama";
  const inCommand = modelInCommand(d.backend);
  const { preview, error: previewed } = useLaunchPreview(d);
  useProjector(d, set);
  const versioned = d.backend === "vllm" || d.backend === "vllm-omni" || d.backend === "sglang";
  const versionField = d.backend === "sglang" ? "config.sglang_version" : "config.vllm_version";
  const shown = ollama
    ? ["model_name"]
    : [...(inCommand ? [] : ["model_name"]), "config.command", ...(versioned ? [versionField] : [])];
  const versionError = errorAt(versionField, saved, previewed);
  const modelError = errorAt("model_name", saved, previewed);
  const commandError = errorAt("config.command", saved, previewed);
  return html`
    ${llama ? html`<${ModelPicker} value=${d.gguf} onChange=${(gguf: string) => set({ gguf })} />` : null}
    ${
      inCommand
        ? null
        : html`<label>${ollama ? "Ollama model" : "Model name"}
      <input name="model_name" value=${d.model_name} onInput=${(e: Event) => set({ model_name: val(e) })} placeholder=${ollama ? "llama3.2:1b" : "qwen2.5-0.5b"} spellcheck=${false} ...${invalidAt(modelError, "model_name")} />
      <small>${ollama ? "A name from the Ollama library; it is pulled on first start." : 'Clients may send this name (or "default") as the model.'}</small>
      <${FieldError} error=${modelError} field="model_name" alert=${modelError === previewed} /></label>`
    }
    ${
      ollama
        ? null
        : html`<label>Command
        <textarea name="command" rows="3" spellcheck=${false} value=${d.command} onInput=${(e: Event) => set({ command: val(e), commandTouched: true })} ...${invalidAt(commandError, "config.command")}></textarea>
        <small>Run as written (split like a shell, never through one); the agent adds only what is shown below.</small>
        <${CommandNotes} d=${d} />
        <${FieldError} error=${commandError} field="config.command" alert=${commandError === previewed} /></label>`
    }
    ${
      versioned
        ? html`<label>${d.backend === "sglang" ? "SGLang" : "vLLM"} version (optional)
          <input name="version" value=${d.version} onInput=${(e: Event) => set({ version: val(e) })} placeholder="0.11.0" ...${invalidAt(versionError, versionField)} />
          <small>Installed once into inferd's data folder; empty uses the one on PATH.</small>
          <${FieldError} error=${versionError} field=${versionField} alert=${versionError === previewed} /></label>`
        : null
    }
    <${PreviewView} preview=${preview} error=${previewed} shownFields=${shown} />`;
}

/** Every field of a workload; `error` is shown at the field the server named; `others`: the project's other workloads (fallback choices). */
export function WorkloadFields({
  d,
  onChange,
  error,
  workers,
  editing,
  others,
}: {
  d: Draft;
  onChange(d: Draft): void;
  error?: ApiError;
  workers?: Worker[];
  editing?: boolean;
  others?: FallbackChoice[];
}) {
  const set = (p: Partial<Draft>) => onChange(edit(d, p));
  return html`<fieldset class="backends">
      <legend>Backend</legend>
      ${BACKENDS.filter((b) => b.offered || b.id === d.backend).map(
        (b) => html`<label class="choice">
        <input type="radio" name="backend" value=${b.id} checked=${d.backend === b.id} onChange=${() => set({ backend: b.id })} />
        <span><strong>${b.label}</strong><small>${b.hint}</small></span></label>`,
      )}
    </fieldset>
    <div class="grid2">
      <label>Name<input name="name" value=${d.name} onInput=${(e: Event) => set({ name: val(e) })} placeholder="chat" ...${invalidAt(error, "name")} /><${FieldError} error=${error} field="name" /></label>
      ${editing ? null : html`<label>Slug (optional)<input name="slug" value=${d.slug} onInput=${(e: Event) => set({ slug: val(e) })} placeholder="from the name" ...${invalidAt(error, "slug")} /><${FieldError} error=${error} field="slug" /></label>`}
      <label>Task type
        <select name="task_type" value=${d.task_type} onChange=${(e: Event) => set({ task_type: val(e) })}>
          ${TASK_TYPES.map(([id, label]) => html`<option value=${id}>${label}</option>`)}
        </select></label>
      <label>Run on
        <select name="worker_id" value=${d.worker_id} onChange=${(e: Event) => set({ worker_id: val(e) })} ...${invalidAt(error, "worker_id")}>
          <option value="">Any suitable worker</option>
          ${(workers ?? []).map((w) => html`<option value=${w.id}>${w.name} (${w.gpus.length} GPU${w.gpus.length === 1 ? "" : "s"})</option>`)}
        </select><${FieldError} error=${error} field="worker_id" /></label>
      ${
        d.backend === "ollama"
          ? null
          : html`<label>Machines (nodes)
        <input name="nodes" type="number" min="1" max="16" step="1" value=${d.nodes} onInput=${(e: Event) => set({ nodes: val(e) })} ...${invalidAt(error, "nodes")} />
        <small class="muted">More than 1: one replica spans that many workers (the engine's multi-node mode); the chosen worker leads.</small>
        <${FieldError} error=${error} field="nodes" /></label>`
      }
      <${ReplicaRouting} d=${d} set=${set} error=${error} />
    </div>
    <${BackendFields} d=${d} set=${set} error=${error} />
    <${RoutingFields} d=${d} set=${set} error=${error} others=${others} />
    <${PolicyFields} d=${d.policy} onChange=${(policy: PolicyDraft) => onChange({ ...d, policy })} error=${error} />`;
}
