/** A workload being edited in a form, and the create/update body it becomes. Pure functions. */
import { flagValue, hasFlag, splitCommand } from "../../agent/command";
import { taskFlagProblem, taskFlagRule } from "../../agent/runtimes/task-flags";
import { BACKENDS, defaultCommand, TASK_TYPES } from "./constants";
import { llamaModelArgs, modelNameOf, refOfCommand, shellWord } from "./model-ref";
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
  /** Between replicas: "prefix", "least_loaded", or "" for the task type's default. */
  routing: string;
  /** The words the form added to the command for the task type (`--embeddings`, `--mmproj <file>`), removed again when the task changes. */
  taskAdded: string;
  /** The projector file known for the llama.cpp model ("" when none is known), for a vision workload's `--mmproj`. */
  projector: string;
}

/** An empty draft for `backend`. */
export const emptyDraft = (backend = "llamacpp"): Draft => ({
  name: "",
  slug: "",
  description: "",
  task_type: "text2text",
  backend,
  model_name: "",
  gguf: "",
  command: defaultCommand(backend, ""),
  version: "",
  worker_id: "",
  nodes: "1",
  commandTouched: false,
  policy: emptyPolicy(),
  aliases: [],
  fallbacks: [],
  routing: "",
  taskAdded: "",
  projector: "",
});

/** What `--mmproj` gets until the model's projector is known: the user replaces it. */
export const PROJECTOR_PLACEHOLDER = "/path/to/mmproj.gguf";

/** Backends whose command names the model (`vllm serve <model>`, `--model-path`): the form asks for it there only. */
export const modelInCommand = (backend: string) =>
  backend === "vllm" || backend === "vllm-omni" || backend === "sglang";

/** A command's words, or undefined when it does not split (an unclosed quote: the server explains that one). */
function splitOrNot(command: string): string[] | undefined {
  try {
    return splitCommand(command);
  } catch {
    return undefined;
  }
}

/** A command's words, or none when it does not split. */
const wordsOf = (command: string) => splitOrNot(command) ?? [];

/** A model word that is still the form's placeholder (`<model>`). */
const unnamed = (w: string | undefined) => !w || w.startsWith("-") || /^<.*>$/.test(w);

/**
 * The model name clients send for a vLLM or SGLang command, as the runtime itself names it: its
 * `--served-model-name`, else the model it loads (`vllm serve <model>`, `--model`, `--model-path`); "" when
 * none, undefined when the command does not split (the server says why).
 * @example servedNameOf("vllm", "vllm serve Qwen/Qwen3-8B --max-model-len 4096") // → "Qwen/Qwen3-8B"
 */
export function servedNameOf(backend: string, command: string): string | undefined {
  const words = splitOrNot(command);
  if (!words) return undefined;
  const named =
    flagValue(words, ["--served-model-name"]) ??
    flagValue(words, backend === "sglang" ? ["--model-path", "--model"] : ["--model"]);
  const serve = words.indexOf("serve");
  const model = named ?? (backend === "sglang" || serve < 0 ? undefined : words[serve + 1]);
  return unnamed(model) ? "" : model!;
}

/**
 * The problem the form shows at a field before saving (so no browser bubble pops up), or undefined:
 * a missing name, a vLLM/SGLang command without its model, a command without its task type's flag.
 */
export function draftProblem(d: Draft): { field: string; message: string } | undefined {
  if (!d.name.trim()) return { field: "name", message: "Give the workload a name." };
  if (modelInCommand(d.backend) && servedNameOf(d.backend, d.command) === "") {
    const example =
      d.backend === "sglang"
        ? "python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B"
        : d.backend === "vllm-omni"
          ? "vllm serve Qwen/Qwen-Image --omni"
          : "vllm serve Qwen/Qwen3-8B";
    return { field: "config.command", message: `Name the model to serve in the command, e.g. ${example}.` };
  }
  if (!modelInCommand(d.backend) && !d.model_name.trim())
    return {
      field: "model_name",
      message:
        d.backend === "ollama" ? "Name the Ollama model, e.g. llama3.2:1b." : "Give the model a name clients may send.",
    };
  const problem = d.backend === "ollama" ? undefined : taskFlagProblem(d.backend, d.task_type, wordsOf(d.command));
  return problem ? { field: "config.command", message: problem } : undefined;
}

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
  if (d.version.trim() && d.backend !== "llamacpp")
    config[d.backend === "sglang" ? "sglang_version" : "vllm_version"] = d.version.trim();
  return config;
}

/**
 * The model name a draft sends. vLLM's and SGLang's is the one its command names; a command that does
 * not split yet names none, and the server is what explains why (an unclosed quote), so a placeholder
 * goes meanwhile (the server refuses the command before it would use the name).
 */
export const sentModelName = (d: Draft) => d.model_name.trim() || (modelInCommand(d.backend) ? "<model>" : "");

/** The create/update body of a draft (slug and pins only when given). */
export function bodyOf(d: Draft): Record<string, unknown> {
  return {
    name: d.name.trim(),
    ...(d.slug.trim() ? { slug: d.slug.trim() } : {}),
    description: d.description,
    task_type: d.task_type,
    backend: d.backend,
    model_name: sentModelName(d),
    config: configOf(d),
    worker_id: d.worker_id || null,
    nodes: Number(d.nodes) || 1,
    aliases: d.aliases.map((a) => a.trim()).filter(Boolean),
    fallbacks: d.fallbacks,
    routing: d.routing || null,
    execution_policy: d.policy.policy,
    execution_params: paramsOf(d.policy),
  };
}

/** `command` without the words `added` (where they stand as whole words), else unchanged. */
function withoutAdded(command: string, added: string): string {
  const at = new RegExp(`\\s+${added.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}(?=\\s|$)`);
  return added ? command.replace(at, "") : command;
}

/**
 * The command with its task type's flag (agent/runtimes/task-flags.ts): the one the form added for
 * the previous task is taken out, the new one added unless the command has it already (then it is
 * the user's, and stays when the task changes again).
 */
function withTaskFlag(d: Draft): Draft {
  const command = withoutAdded(d.command, d.taskAdded);
  const rule = d.backend === "ollama" ? undefined : taskFlagRule(d.backend, d.task_type);
  if (!rule || hasFlag(wordsOf(command), rule.flags)) return { ...d, command, taskAdded: "" };
  const added = rule.value ? `${rule.add} ${shellWord(d.projector || PROJECTOR_PLACEHOLDER)}` : rule.add;
  return { ...d, command: `${command.trimEnd()} ${added}`, taskAdded: added };
}

/**
 * Applies one edit, keeping an untouched model name and command in step with the model (a typed
 * command still gets a new model in place of the old one's flags), the task type's flag in the
 * command, and a vLLM/SGLang model name in step with the model its command serves.
 */
export function edit(d: Draft, patch: Partial<Draft>): Draft {
  const next = { ...d, ...patch };
  if (patch.gguf !== undefined && patch.projector === undefined && patch.gguf !== d.gguf) next.projector = "";
  if (patch.gguf !== undefined && (!d.model_name || d.model_name === modelNameOf(d.gguf)))
    next.model_name = modelNameOf(patch.gguf);
  let redo =
    patch.task_type !== undefined ||
    patch.backend !== undefined ||
    (patch.projector !== undefined && patch.projector !== d.projector);
  if (
    patch.gguf !== undefined &&
    next.commandTouched &&
    d.backend === "llamacpp" &&
    d.command.includes(llamaModelArgs(d.gguf))
  ) {
    next.command = d.command.replace(llamaModelArgs(d.gguf), llamaModelArgs(patch.gguf));
  } else if (!next.commandTouched || patch.backend !== undefined) {
    next.command = defaultCommand(next.backend, next.model_name, next.gguf);
    if (patch.backend !== undefined) next.commandTouched = false;
    redo = true;
  }
  const served =
    patch.command !== undefined && modelInCommand(next.backend) ? servedNameOf(next.backend, next.command) : undefined;
  const before = servedNameOf(d.backend, d.command);
  if (served !== undefined && (!d.model_name || before === undefined || d.model_name === before))
    next.model_name = served;
  return redo ? withTaskFlag(next) : next;
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
    routing: w.routing_is_default === false ? w.routing : "",
  };
}

/** Task type words a link may use besides the API's ids (`?task=embeddings`). */
const TASK_WORDS: Record<string, string> = {
  chat: "text2text",
  embeddings: "embedding",
  embed: "embedding",
  rerank: "reranker",
  vision: "image2text",
};

/**
 * A new workload's draft from the page's query (`?model=…&backend=llamacpp&task=embeddings`, as a
 * model's "Serve this model" links): the model where that backend names it, the command built from it.
 * @example draftFromQuery(new URLSearchParams("model=o/r-GGUF:Q8_0&task=embeddings")).command // → "llama-server -hf o/r-GGUF:Q8_0 -c 4096 --embeddings"
 */
export function draftFromQuery(query: URLSearchParams): Draft {
  const asked = query.get("backend") ?? "";
  const backend = BACKENDS.some((b) => b.id === asked && b.offered) ? asked : "llamacpp";
  const task = TASK_WORDS[query.get("task") ?? ""] ?? query.get("task") ?? "";
  const model = (query.get("model") ?? "").trim();
  let d = emptyDraft(backend);
  if (TASK_TYPES.some(([id]) => id === task)) d = edit(d, { task_type: task });
  if (!model) return d;
  const hub = model.replace(/^hf:/, "").replace(/:[^/:]*$/, "");
  if (backend === "llamacpp") d = edit(d, { gguf: model });
  else d = edit(d, { model_name: backend === "ollama" ? model : hub });
  return { ...d, name: backend === "llamacpp" ? modelNameOf(model) : (hub.split("/").pop() ?? hub) };
}

/** The field of a history entry's state that holds a workload form's unsaved draft. */
const KEPT = "workloadDraft";

/** What a draft is kept in: the browser's history (tests pass their own). */
type Kept = Pick<History, "state" | "replaceState">;

/**
 * Keeps an unsaved draft in the current history entry's state, so Back to the form (or Forward, or
 * a reload) brings it back as it was; a new visit of the form is a new entry and starts afresh.
 * Called from the edit itself, never later: a link clicked next must find the draft already kept.
 */
export function keepDraft(d: Draft, h: Kept = history): void {
  h.replaceState({ ...((h.state as Record<string, unknown> | null) ?? {}), [KEPT]: d }, "");
}

/**
 * The draft kept in the current history entry (over an empty draft of its backend, so a draft of
 * an older dashboard still has every field), or undefined.
 * @example keptDraft({ state: null, replaceState() {} }) // → undefined
 */
export function keptDraft(h: Kept = history): Draft | undefined {
  const d = (h.state as Record<string, unknown> | null)?.[KEPT] as Partial<Draft> | undefined;
  if (!d || typeof d !== "object" || typeof d.backend !== "string") return undefined;
  return { ...emptyDraft(d.backend), ...d };
}
