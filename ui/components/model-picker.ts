/**
 * Choosing a llama.cpp model: one pulled into inferd's store (never a failed or cancelled pull), a
 * GGUF file other tools left on this machine, one found by name on Hugging Face, or a typed
 * reference, URL or path — with a plain note of what will happen (downloaded first, found, or not
 * there at all) before the workload is saved.
 */
import { html } from "htm/preact";
import { useId } from "preact/hooks";
import { useApi, useDebouncedApi } from "../lib/hooks";
import { can } from "../lib/me";
import { bytes } from "../lib/format";
import { refKind, refOfModel, sameRef } from "../lib/model-ref";
import type { FileCheck, FoundModel, Model } from "../lib/types";
import { HubSearch } from "./hub-search";

/** Whether a store model is something llama.cpp can load (a GGUF file, not a safetensors snapshot; a one-quant GGUF repo is one). */
const isGguf = (m: Model) =>
  m.info?.format === "gguf" ||
  m.kind === "hf-quant" ||
  /\.gguf$/i.test(m.entry ?? (m.kind === "hf-repo" ? "" : m.source));

/** The store's usable GGUF models (pulled or downloading) and the GGUF files found on this machine (admins), read once. */
export function useModelChoices() {
  const models = useApi<Model[]>("/admin/models?state=ready,downloading");
  const found = useApi<FoundModel[]>(can("model.discover") ? "/admin/models/discover" : null);
  return { models: (models.data ?? []).filter(isGguf), found: found.data ?? [] };
}

/** What is at a typed absolute path on this machine, asked a moment after typing stops; or why a non-admin may not look there. */
function useFileCheck(path: string | null): FileCheck | { refused: string } | undefined {
  const { data, error } = useDebouncedApi<FileCheck>(
    path && `/admin/models/file?path=${encodeURIComponent(path)}`,
    {},
    path ?? "",
  );
  if (error?.code === "command_not_allowed") return { refused: error.message };
  return data && data.path === path ? data : undefined;
}

/** The store model a reference names, if any. */
const storeModel = (ref: string, models: Model[]) =>
  models.find((m) => sameRef(refOfModel(m), ref) || sameRef(m.source, ref) || m.entry === ref.trim());

/** A note on a reference: downloaded first, already in the store, found here, or missing. `bad` marks a path with no GGUF file. */
export function useRefNote(
  ref: string,
  choices: { models: Model[]; found: FoundModel[] },
): { text: string; tone: "ok" | "info" | "warn" | "error"; bad: boolean } | null {
  const kind = refKind(ref);
  const m = storeModel(ref, choices.models);
  const f = choices.found.find((x) => x.path === ref.trim());
  const check = useFileCheck(kind === "path" && !m && !f ? ref.trim() : null);
  if (kind === "empty") return null;
  if (m?.state === "ready")
    return {
      text: `In inferd's models: ${bytes(m.size_bytes)}${m.info?.quantization ? `, ${m.info.quantization}` : ""}.`,
      tone: "ok",
      bad: false,
    };
  if (m?.state === "downloading")
    return {
      text: `Downloading into inferd's models now (${m.progress?.percent ?? 0}%); the replica starts when it is done.`,
      tone: "info",
      bad: false,
    };
  if (f)
    return {
      text: `Found on this machine (${f.origin}): ${bytes(f.size_bytes)}${f.quant ? `, ${f.quant}` : ""}.`,
      tone: "ok",
      bad: false,
    };
  if (kind === "hub" || kind === "hf")
    return {
      text: "Downloaded from Hugging Face before the runtime starts; the replica shows the progress.",
      tone: "info",
      bad: false,
    };
  if (kind === "url")
    return {
      text: "Downloaded from this URL before the runtime starts; the replica shows the progress.",
      tone: "info",
      bad: false,
    };
  if (kind === "unknown")
    return {
      text: "Write an absolute path (/…/model.gguf), a Hugging Face model as owner/repo:QUANT, or an https:// URL.",
      tone: "warn",
      bad: true,
    };
  if (!check) return null;
  if ("refused" in check) return { text: check.refused, tone: "error", bad: true };
  if (check.kind === null)
    return {
      text: "There is no file at this path on this machine. A workload placed here would fail; check the path, or download the model instead.",
      tone: "error",
      bad: true,
    };
  if (check.kind === "folder")
    return { text: "This is a folder: name the .gguf file inside it.", tone: "error", bad: true };
  if (!check.gguf)
    return { text: "This file is not a GGUF model (it does not start with GGUF).", tone: "error", bad: true };
  return { text: `A GGUF file of ${bytes(check.size_bytes ?? 0)} on this machine.`, tone: "ok", bad: false };
}

/** The note under a model field, announced as it changes. */
export function RefNote({ note, id }: { note: ReturnType<typeof useRefNote>; id: string }) {
  return html`<p id=${id} class=${`ref-note ${note?.tone ?? ""}`} aria-live="polite" data-testid="model-note">${note?.text ?? ""}</p>`;
}

/** A model field with a list of known models to pick from; `label` names the text field. */
export function ModelPicker({
  value,
  onChange,
  label = "GGUF file or Hugging Face model",
}: {
  value: string;
  onChange(ref: string): void;
  label?: string;
}) {
  const choices = useModelChoices();
  const note = useRefNote(value, choices);
  const noteId = useId();
  const inStore = choices.models.find((m) => sameRef(refOfModel(m), value));
  const picked = inStore ? `m:${refOfModel(inStore)}` : choices.found.some((f) => f.path === value) ? `f:${value}` : "";
  const pick = (v: string) => v && onChange(v.slice(2));
  const known = choices.models.length + choices.found.length > 0;
  return html`<div class="model-picker">
    ${
      known
        ? html`<label>Pick a model
      <select value=${picked} onChange=${(e: Event) => pick((e.target as HTMLSelectElement).value)}>
        <option value="">Type one below, or choose…</option>
        ${choices.models.length ? html`<optgroup label="In inferd's models">${choices.models.map((m) => html`<option value=${`m:${refOfModel(m)}`}>${m.source} (${m.state === "ready" ? bytes(m.size_bytes) : m.state})</option>`)}</optgroup>` : null}
        ${choices.found.length ? html`<optgroup label="Found on this machine">${choices.found.map((f) => html`<option value=${`f:${f.path}`}>${f.name} (${f.origin}, ${bytes(f.size_bytes)})</option>`)}</optgroup>` : null}
      </select></label>`
        : null
    }
    <label>${label}
      <input name="gguf" value=${value} onInput=${(e: Event) => onChange((e.target as HTMLInputElement).value)} spellcheck=${false}
        placeholder="owner/repo-GGUF:Q4_K_M or /models/model.gguf" aria-invalid=${note?.bad ? "true" : undefined} aria-describedby=${noteId} />
      <small>A Hugging Face model as <code>owner/repo:Q4_K_M</code> (downloaded first, becomes <code>-hf</code>), or the path of a GGUF file on the worker.</small></label>
    <${RefNote} note=${note} id=${noteId} />
    <${HubSearch} backend="llamacpp" action=${{ kind: "use", onUse: onChange }} models=${choices.models} />
  </div>`;
}
