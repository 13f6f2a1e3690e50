/**
 * Which models a workload's command names, and the command to run once they are on disk: a
 * llama.cpp command may say `-hf owner/repo[:quant]`, `-hff file`, `-m hf:…` or `-mu <url>`
 * (rewritten to `-m <local file>`); a vLLM or SGLang command names a hub repo as it always did
 * (`vllm serve owner/repo`, `--model`, `--model-path`), which the runtime then reads from the store.
 */
import { llamaHfArg, parseSource, type ModelSource } from "./models/source";

/** A model a command names: where in the words it is, and what to pull. */
export interface ModelRef {
  source: ModelSource;
  /** How to rewrite the command once the model is pulled: `-m <entry>` (llama.cpp) or nothing (hub repos read via HF_HOME). */
  rewrite: "llama-m" | "none";
  /** Indices of the words this reference used (flags and values), replaced on rewrite. */
  words: number[];
  /**
   * llama.cpp's `-hf` also loads the repo's vision projector unless the command names one or says
   * `--no-mmproj` (common/arg.cpp): the rewrite adds `--mmproj <file>` when the pull found one.
   */
  projector?: boolean;
}

/** Flags by which a llama-server command names its own projector, or turns the `-hf` one off. */
const OWN_PROJECTOR = ["--mmproj", "-mm", "--mmproj-url", "-mmu", "--no-mmproj", "--no-mmproj-auto"];

const HUB_REPO = /^[A-Za-z0-9][\w.-]*\/[\w.-]+$/;

/** The value of the first of `names` in `--name value` / `--name=value` form, with the words it takes. */
function flagAt(words: string[], names: string[]): { value: string; words: number[] } | undefined {
  for (let i = 0; i < words.length; i++) {
    for (const n of names) {
      if (words[i] === n && words[i + 1] !== undefined) return { value: words[i + 1], words: [i, i + 1] };
      if (words[i].startsWith(`${n}=`)) return { value: words[i].slice(n.length + 1), words: [i] };
    }
  }
  return undefined;
}

/** llama.cpp: `-hf repo[:quant]` (+ `-hff file`), `-m hf:…`, `-mu url`. */
function llamaRefs(words: string[]): ModelRef[] {
  const hf = flagAt(words, ["-hf", "-hfr", "--hf-repo"]);
  if (hf) {
    const file = flagAt(words, ["-hff", "--hf-file"]);
    const base = llamaHfArg(hf.value);
    const source: ModelSource =
      file && base.kind !== "url" && base.kind !== "local"
        ? { kind: "hf-file", repo: base.repo, revision: base.revision, file: file.value }
        : base;
    const ownProjector = words.some((w) => OWN_PROJECTOR.some((f) => w === f || w.startsWith(`${f}=`)));
    return [
      {
        source,
        rewrite: "llama-m",
        words: [...hf.words, ...(file?.words ?? [])],
        ...(source.kind === "hf-quant" && !ownProjector ? { projector: true } : {}),
      },
    ];
  }
  const m = flagAt(words, ["-m", "--model"]);
  if (m && m.value.startsWith("hf:")) return [{ source: parseSource(m.value), rewrite: "llama-m", words: m.words }];
  const url = flagAt(words, ["-mu", "--model-url"]);
  if (url) return [{ source: parseSource(url.value), rewrite: "llama-m", words: url.words }];
  return [];
}

/** vLLM / SGLang: the hub repo the server loads (a path or a bare name is not a hub repo). */
function hubRefs(backend: string, words: string[]): ModelRef[] {
  let named: { value: string; words: number[] } | undefined;
  if (backend === "sglang") named = flagAt(words, ["--model-path", "--model"]);
  else {
    named = flagAt(words, ["--model"]);
    const serve = words.indexOf("serve");
    if (!named && serve >= 0 && words[serve + 1] && !words[serve + 1].startsWith("-"))
      named = { value: words[serve + 1], words: [serve + 1] };
  }
  if (!named) return [];
  const value = named.value.startsWith("hf:") ? named.value.slice(3) : named.value;
  if (!HUB_REPO.test(value)) return [];
  const revision = flagAt(words, ["--revision"])?.value ?? "main";
  return [{ source: { kind: "hf-repo", repo: value, revision }, rewrite: "none", words: named.words }];
}

/**
 * The models a command names, by backend (Ollama pulls through its own daemon: none here).
 * @example modelRefs("llamacpp", ["llama-server", "-hf", "o/r:Q8_0"]) // → [{source: {kind: "hf-quant", repo: "o/r", quant: "Q8_0", …}, rewrite: "llama-m", words: [1, 2]}]
 */
export function modelRefs(backend: string, words: string[]): ModelRef[] {
  if (backend === "llamacpp") return llamaRefs(words);
  if (backend === "vllm" || backend === "vllm-omni" || backend === "sglang") return hubRefs(backend, words);
  return [];
}

/**
 * The command with each llama.cpp reference replaced by `-m <entry>` (the local file), plus
 * `--mmproj <file>` where `-hf` would have loaded the repo's projector; hub repos stay as written
 * (the runtime finds them in the store through HF_HOME).
 * @example rewriteCommand(["llama-server", "-hf", "o/r", "-c", "512"], [{ref, entry: "/m/x.gguf"}]) // → ["llama-server", "-c", "512", "-m", "/m/x.gguf"]
 */
export function rewriteCommand(
  words: string[],
  resolved: { ref: ModelRef; entry: string; projector?: string }[],
): string[] {
  const drop = new Set(resolved.filter((r) => r.ref.rewrite === "llama-m").flatMap((r) => r.ref.words));
  const out = words.filter((_, i) => !drop.has(i));
  for (const r of resolved) {
    if (r.ref.rewrite !== "llama-m") continue;
    out.push("-m", r.entry);
    if (r.ref.projector && r.projector) out.push("--mmproj", r.projector);
  }
  return out;
}
