/**
 * What a runtime's command must say to serve a task type: llama-server answers /v1/embeddings only
 * with `--embeddings`, /v1/rerank only with `--reranking`, and images only with a projector
 * (`--mmproj`); SGLang serves embeddings only with `--is-embedding`. vLLM finds the task from the
 * model itself, so it needs nothing. One table, read by the server (refused at save) and by the
 * dashboard's workload form (which adds the flag when the task type is chosen). Pure functions.
 */
import { hasFlag } from "../command";

/** One rule: a task type on a backend needs one of `flags` in its command. */
export interface TaskFlagRule {
  backend: string;
  task: string;
  /** Any of these satisfies the rule (aliases, `=` forms count). */
  flags: string[];
  /** The flag the form adds, and the one the refusal names. */
  add: string;
  /** What `add` takes as its value, in words (e.g. "<projector file>"); none for a switch. */
  value?: string;
  /** The workload in words, for the refusal ("an embeddings workload on llama.cpp"). */
  what: string;
}

/** The rules, by backend and task type. */
export const TASK_FLAG_RULES: TaskFlagRule[] = [
  {
    backend: "llamacpp",
    task: "embedding",
    flags: ["--embeddings", "--embedding"],
    add: "--embeddings",
    what: "an embeddings workload on llama.cpp",
  },
  {
    backend: "llamacpp",
    task: "reranker",
    flags: ["--reranking", "--rerank"],
    add: "--reranking",
    what: "a rerank workload on llama.cpp",
  },
  {
    backend: "llamacpp",
    task: "image2text",
    flags: ["--mmproj", "-mm", "--mmproj-url", "-mmu"],
    add: "--mmproj",
    value: "<projector file>",
    what: "a vision workload on llama.cpp",
  },
  {
    backend: "sglang",
    task: "embedding",
    flags: ["--is-embedding"],
    add: "--is-embedding",
    what: "an embeddings workload on SGLang",
  },
];

/** The rule for a backend and task type, if it has one. */
export const taskFlagRule = (backend: string, task: string): TaskFlagRule | undefined =>
  TASK_FLAG_RULES.find((r) => r.backend === backend && r.task === task);

/**
 * Why a command (split into words) cannot serve its task type, naming the flag to add; undefined when it can.
 * @example taskFlagProblem("llamacpp", "embedding", ["llama-server", "-m", "e.gguf"]) // → "an embeddings workload on llama.cpp needs --embeddings in its command"
 */
export function taskFlagProblem(backend: string, task: string, words: string[]): string | undefined {
  const rule = taskFlagRule(backend, task);
  if (!rule || hasFlag(words, rule.flags)) return undefined;
  return `${rule.what} needs ${rule.add}${rule.value ? ` ${rule.value}` : ""} in its command`;
}
