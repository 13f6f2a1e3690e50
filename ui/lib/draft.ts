/** A workload being edited in a form, and the create/update body it becomes. Pure functions. */
import { defaultCommand } from "./constants";
import { llamaModelArgs, modelNameOf, refOfCommand } from "./model-ref";
import { emptyPolicy, paramsOf, policyDraftOf, type PolicyDraft } from "./policy";
import type { Workload } from "./types";

/** What the workload form edits. */
export interface Draft {
  name: string;
  slug: string;
  description: string;
  task_type: string;
  backend: string;
  model_name: string;
  /** llama.cpp's model: a GGUF path or a Hugging Face reference (see model-ref.ts). */
  gguf: string;
  command: string;
  version: string;
  worker_id: string;
  /** Machines one replica spans ("1": one worker). */
  nodes: string;
  /** Whether the user typed the command (else it follows the model). */
  commandTouched: boolean;
  policy: PolicyDraft;
  /** Other names the project base URL routes to this workload, one per input (blank ones are not sent). */
  aliases: string[];
  /** Other workloads' slugs, tried in this order when this one fails before answering. */
  fallbacks: string[];
}

/** An empty draft for `backend`. */
export const emptyDraft = (backend = "llamacpp"): Draft => ({
  name: "", slug: "", description: "", task_type: "text2text", backend, model_name: "", gguf: "",
  command: defaultCommand(backend, ""), version: "", worker_id: "", nodes: "1", commandTouched: false, policy: emptyPolicy(),
  aliases: [], fallbacks: [],
});

/**
 * Where the alias typed in input `i` stands in the body sent (blank inputs are left out), for the
 * server's `aliases.N`; -1 when that input is blank.
 * @example sentAliasIndex(["a", " ", "b"], 2) // → 1
 */
export function sentAliasIndex(aliases: string[], i: number): number {
  if (!aliases[i]?.trim()) return -1;
  return aliases.slice(0, i).filter((a) => a.trim()).length;
}

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
    nodes: Number(d.nodes) || 1,
    aliases: d.aliases.map((a) => a.trim()).filter(Boolean),
    fallbacks: d.fallbacks,
    execution_policy: d.policy.policy,
    execution_params: paramsOf(d.policy),
  };
}

/**
 * Applies one edit, keeping an untouched model name and command in step with the model (a typed
 * command still gets a new model in place of the old one's flags).
 */
export function edit(d: Draft, patch: Partial<Draft>): Draft {
  const next = { ...d, ...patch };
  if (patch.gguf !== undefined && (!d.model_name || d.model_name === modelNameOf(d.gguf))) next.model_name = modelNameOf(patch.gguf);
  if (patch.gguf !== undefined && next.commandTouched && d.backend === "llamacpp" && d.command.includes(llamaModelArgs(d.gguf))) {
    next.command = d.command.replace(llamaModelArgs(d.gguf), llamaModelArgs(patch.gguf));
  } else if (!next.commandTouched || patch.backend !== undefined) {
    next.command = defaultCommand(next.backend, next.model_name, next.gguf);
    if (patch.backend !== undefined) next.commandTouched = false;
  }
  return next;
}

/** A draft holding an existing workload's values. */
export function draftOf(w: Workload): Draft {
  const command = String(w.config.command ?? "");
  return {
    ...emptyDraft(w.backend),
    name: w.name,
    slug: w.slug,
    description: w.description,
    task_type: w.task_type,
    backend: w.backend,
    model_name: w.model_name,
    gguf: w.backend === "llamacpp" ? refOfCommand(command) : "",
    command,
    version: String(w.config.vllm_version ?? w.config.sglang_version ?? ""),
    worker_id: w.worker_id ?? "",
    nodes: String(w.nodes ?? 1),
    commandTouched: true,
    policy: policyDraftOf(w.execution_policy, w.execution_params),
    aliases: [...(w.aliases ?? [])],
    fallbacks: [...(w.fallbacks ?? [])],
  };
}
