/**
 * How a llama.cpp command names its model, from what the user picked or typed: a Hugging Face
 * reference with or without `hf:` (`owner/repo:Q4_K_M` → `-hf owner/repo:Q4_K_M`, pulled before
 * launch; no tag: llama.cpp's default, or the only quantisation there is), an `hf:` source
 * or URL from the model store, or a GGUF path on the worker (`-m /path`). Pure functions.
 */
import type { Model } from "./types";

/** The model a first run downloads unless the user names another (about 400 MB). */
export const STARTER_MODEL = "Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M";

/** What kind of reference a string is. */
export type RefKind = "empty" | "hub" | "hf" | "url" | "path" | "unknown";

const HUB = /^[A-Za-z0-9][\w.-]*\/[\w.-]+(?::[A-Za-z0-9][\w.-]*)?$/;

/**
 * The kind of a model reference.
 * @example refKind("Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M") // → "hub"
 */
export function refKind(ref: string): RefKind {
  const r = ref.trim();
  if (!r) return "empty";
  if (r.startsWith("/")) return "path";
  if (r.startsWith("hf:")) return "hf";
  if (/^https?:\/\//i.test(r)) return "url";
  return HUB.test(r) ? "hub" : "unknown";
}

/** A word as a POSIX shell would read it back (single-quoted when it holds spaces or quotes). */
export function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/**
 * The llama-server flags that load a reference.
 * @example llamaModelArgs("owner/repo:Q8_0") // → "-hf owner/repo:Q8_0"
 */
export function llamaModelArgs(ref: string): string {
  const r = ref.trim();
  switch (refKind(r)) {
    case "empty":
      return "-m /path/to/model.gguf";
    case "hub":
      return `-hf ${r}`;
    case "hf":
      // A repo (with a quant tag or none) without a revision is what llama.cpp's own -hf takes.
      return /^hf:[^/@:]+\/[^/@:]+(?::[^/@:]+)?$/.test(r) ? `-hf ${r.slice(3)}` : `-m ${shellWord(r)}`;
    case "url":
      return `-mu ${shellWord(r)}`;
    default:
      return `-m ${shellWord(r)}`;
  }
}

/** The model reference in a llama.cpp command (`-hf`, `-m` or `-mu`), or "". */
export function refOfCommand(command: string): string {
  const m = /(?:^|\s)(?:-hf|-hfr|--hf-repo|-m|--model|-mu|--model-url)(?:\s+|=)('[^']*'|"[^"]*"|\S+)/.exec(command);
  if (!m) return "";
  const v = m[1];
  return /^(['"]).*\1$/.test(v) ? v.slice(1, -1) : v;
}

/** The reference a llama.cpp workload uses for a model of the store (its hub reference when it has one). */
export function refOfModel(m: Pick<Model, "kind" | "source" | "entry">): string {
  if (m.kind === "local") return m.entry ?? m.source;
  const quant = /^hf:([^/@:]+\/[^/@:]+:[^/@:]+)$/.exec(m.source);
  return quant ? quant[1] : m.source;
}

/** The same model named two ways (`hf:o/r:q4_k_m`, `o/r:Q4_K_M`) compare equal. */
export const sameRef = (a: string, b: string) =>
  a.trim().replace(/^hf:/, "").toLowerCase() === b.trim().replace(/^hf:/, "").toLowerCase();

/**
 * The model name clients may send, from a reference.
 * @example modelNameOf("Qwen/Qwen2.5-0.5B-Instruct-GGUF:Q4_K_M") // → "Qwen2.5-0.5B-Instruct"
 */
export function modelNameOf(ref: string): string {
  const r = ref.trim().replace(/^hf:/, "");
  const kind = refKind(ref);
  if (kind === "hub" || (kind === "hf" && !/\.gguf$/i.test(r)))
    return (r.split("/")[1] ?? "").split(/[:@]/)[0].replace(/-GGUF$/i, "");
  return (r.split(/[\\/]/).pop() ?? "").replace(/\.gguf$/i, "");
}
