/**
 * llama-server's command-line flags, parsed into the options of the built-in llama.cpp runtime
 * (agent/runtimes/llama-runner.ts). The same workload command works with the real `llama-server`
 * and with the built-in runtime; flags the built-in runtime has no use for are accepted and listed
 * in `ignored` so the runner can say so in its log.
 */

/** GPU offload: a layer count, "auto" (llama-server's default, -1) or "max" ("all"). */
export type GpuLayers = number | "auto" | "max";

/** What the built-in runtime takes from a llama-server command line. */
export interface LlamaRunnerOptions {
  /** -m, --model: path of the GGUF file. */
  model: string;
  /** -a, --alias: the model name served by /v1/models; llama-server uses the model path when unset. */
  alias?: string;
  /** -c, --ctx-size: total context shared by all slots; 0 means the model's training context; unset means 4096 or the training context if smaller. */
  ctxSize?: number;
  /** -np, --parallel: concurrent sequences (slots). Default 1. */
  parallel: number;
  /** --embedding, --embeddings: serve /v1/embeddings. */
  embedding: boolean;
  /** -ngl, --n-gpu-layers, --gpu-layers. Default "auto". */
  gpuLayers: GpuLayers;
  /** --host. Default 127.0.0.1. */
  host: string;
  /** --port. Default 8080. */
  port: number;
  /** -t, --threads: CPU threads for generation; unset lets the runtime pick. */
  threads?: number;
  /** -b, --batch-size. */
  batchSize?: number;
  /** -fa, --flash-attn: on, off or auto. */
  flashAttention?: boolean | "auto";
  /** --no-mmap. */
  noMmap: boolean;
  /** --api-key: when set, requests other than /health must carry `Authorization: Bearer <key>`. */
  apiKey?: string;
  /** -n, --n-predict: default max tokens of a request; -1 means until the context is full. */
  nPredict: number;
  /** Default sampling of requests that do not set their own. */
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
  seed?: number;
  /** -v, --verbose: pass llama.cpp's info logs through. */
  verbose: boolean;
  /** Flags accepted but without effect in the built-in runtime, as written. */
  ignored: string[];
}

/** A command line the built-in runtime cannot run; the message names the flag. */
export class LlamaArgsError extends Error {}

type Setter = (o: LlamaRunnerOptions, value: string, flag: string) => void;

const int = (flag: string, v: string, min = Number.MIN_SAFE_INTEGER): number => {
  const n = Number(v);
  if (v.trim() === "" || !Number.isInteger(n) || n < min)
    throw new LlamaArgsError(
      `${flag} expects a whole number${min > Number.MIN_SAFE_INTEGER ? ` >= ${min}` : ""}, got "${v}"`,
    );
  return n;
};
const num = (flag: string, v: string): number => {
  const n = Number(v);
  if (v.trim() === "" || !Number.isFinite(n)) throw new LlamaArgsError(`${flag} expects a number, got "${v}"`);
  return n;
};

function gpuLayers(flag: string, v: string): GpuLayers {
  const s = v.toLowerCase();
  if (s === "auto" || s === "-1") return "auto";
  if (s === "all" || s === "max") return "max";
  return int(flag, v, 0);
}

function flashAttn(flag: string, v: string): boolean | "auto" {
  const s = v.toLowerCase();
  if (["on", "true", "1", "enabled"].includes(s)) return true;
  if (["off", "false", "0", "disabled"].includes(s)) return false;
  if (s === "auto") return "auto";
  throw new LlamaArgsError(`${flag} expects on, off or auto, got "${v}"`);
}

/** Flags that take a value and set an option. */
const VALUE_FLAGS: [string[], Setter][] = [
  [["-m", "--model"], (o, v) => (o.model = v)],
  [["-a", "--alias"], (o, v) => (o.alias = v)],
  [["-c", "--ctx-size"], (o, v, f) => (o.ctxSize = int(f, v, 0))],
  [["-np", "--parallel"], (o, v, f) => (o.parallel = int(f, v, 1))],
  [["-ngl", "--n-gpu-layers", "--gpu-layers"], (o, v, f) => (o.gpuLayers = gpuLayers(f, v))],
  [["--host"], (o, v) => (o.host = v)],
  [["--port"], (o, v, f) => (o.port = int(f, v, 0))],
  [
    ["-t", "--threads"],
    (o, v, f) => {
      const n = int(f, v, -1);
      o.threads = n > 0 ? n : undefined;
    },
  ],
  [["-b", "--batch-size"], (o, v, f) => (o.batchSize = int(f, v, 1))],
  [["--api-key"], (o, v) => (o.apiKey = v)],
  [["-n", "--n-predict", "--predict"], (o, v, f) => (o.nPredict = int(f, v, -2))],
  [["--temp", "--temperature"], (o, v, f) => (o.temperature = num(f, v))],
  [["--top-k"], (o, v, f) => (o.topK = int(f, v, 0))],
  [["--top-p"], (o, v, f) => (o.topP = num(f, v))],
  [["--min-p"], (o, v, f) => (o.minP = num(f, v))],
  [["-s", "--seed"], (o, v, f) => (o.seed = int(f, v))],
];

/** Flags without a value that set an option. */
const SWITCHES: [string[], (o: LlamaRunnerOptions) => void][] = [
  [["--embedding", "--embeddings"], (o) => (o.embedding = true)],
  [["--no-mmap"], (o) => (o.noMmap = true)],
  [["-v", "--verbose", "--log-verbose"], (o) => (o.verbose = true)],
];

/** Common llama-server flags that take a value and have no effect here. */
const IGNORED_VALUE_FLAGS = new Set([
  "-tb",
  "--threads-batch",
  "-ub",
  "--ubatch-size",
  "--keep",
  "--chat-template",
  "--chat-template-file",
  "--chat-template-kwargs",
  "--rope-scaling",
  "--rope-scale",
  "--rope-freq-base",
  "--rope-freq-scale",
  "-ctk",
  "--cache-type-k",
  "-ctv",
  "--cache-type-v",
  "--mmproj",
  "-mm",
  "--lora",
  "--lora-scaled",
  "-to",
  "--timeout",
  "--threads-http",
  "--pooling",
  "--reasoning-format",
  "--reasoning-budget",
  "-ts",
  "--tensor-split",
  "-sm",
  "--split-mode",
  "-mg",
  "--main-gpu",
  "--log-file",
  "--repeat-penalty",
  "--repeat-last-n",
  "--presence-penalty",
  "--frequency-penalty",
  "--slot-save-path",
  "-dev",
  "--device",
  "--override-kv",
  "--path",
  "--api-key-file",
  "--ssl-key-file",
  "--ssl-cert-file",
  "-sps",
  "--slot-prompt-similarity",
  "--cache-reuse",
  "-md",
  "--model-draft",
  "--draft-max",
  "--draft-min",
  "-ot",
  "--override-tensor",
  "--grammar",
  "--grammar-file",
  "-j",
  "--json-schema",
  "--numa",
  "-lv",
  "--verbosity",
  "--cpu-moe",
  "-ncmoe",
  "--n-cpu-moe",
  "--media-path",
  "--prio",
  "-C",
  "--cpu-mask",
  "-cram",
  "--cache-ram",
  "--sleep-idle-seconds",
]);

/** Common llama-server flags without a value that have no effect here. */
const IGNORED_SWITCHES = new Set([
  "--no-mmproj",
  "--mmproj-auto",
  "--no-mmproj-auto",
  "--jinja",
  "--no-jinja",
  "--metrics",
  "--slots",
  "--no-slots",
  "--props",
  "-cb",
  "--cont-batching",
  "-nocb",
  "--no-cont-batching",
  "--mlock",
  "--no-webui",
  "--webui",
  "--log-disable",
  "--log-colors",
  "--no-warmup",
  "--context-shift",
  "--no-context-shift",
  "--reranking",
  "--rerank",
  "-kvu",
  "--kv-unified",
  "--no-kv-offload",
  "-nkvo",
  "--swa-full",
  "--check-tensors",
  "--no-perf",
  "--cache-prompt",
  "--no-cache-prompt",
  "--log-prefix",
  "--log-timestamps",
  "--special",
  "-sp",
  "--no-op-offload",
  "--direct-io",
  "--no-direct-io",
]);

/** Flags naming a model to download, which the built-in runtime cannot do. */
const DOWNLOAD_FLAGS = new Set([
  "-hf",
  "-hfr",
  "--hf-repo",
  "-hff",
  "--hf-file",
  "-mu",
  "--model-url",
  "-dr",
  "--docker-repo",
]);

/** The defaults llama-server uses when a flag is absent. */
export function defaultLlamaRunnerOptions(): LlamaRunnerOptions {
  return {
    model: "",
    parallel: 1,
    embedding: false,
    gpuLayers: "auto",
    host: "127.0.0.1",
    port: 8080,
    noMmap: false,
    nPredict: -1,
    verbose: false,
    ignored: [],
  };
}

/**
 * Parses llama-server flags (`--flag value` or `--flag=value`), without the command word.
 * @example parseLlamaServerArgs(["-m", "/models/q.gguf", "--port=9000", "-np", "2"]).parallel // → 2
 */
export function parseLlamaServerArgs(args: string[]): LlamaRunnerOptions {
  const o = defaultLlamaRunnerOptions();
  for (let i = 0; i < args.length; i++) {
    const word = args[i];
    const eq = word.startsWith("-") ? word.indexOf("=") : -1;
    const flag = eq > 0 ? word.slice(0, eq) : word;
    const inline = eq > 0 ? word.slice(eq + 1) : undefined;
    const takeValue = (): string => {
      if (inline !== undefined) return inline;
      if (i + 1 >= args.length) throw new LlamaArgsError(`${flag} needs a value`);
      return args[++i];
    };
    const setter = VALUE_FLAGS.find(([names]) => names.includes(flag))?.[1];
    const sw = SWITCHES.find(([names]) => names.includes(flag))?.[1];
    if (setter) setter(o, takeValue(), flag);
    else if (sw) sw(o);
    else if (flag === "-fa" || flag === "--flash-attn") {
      // Older llama-server: a switch; newer: on|off|auto.
      const next = args[i + 1];
      if (inline !== undefined) o.flashAttention = flashAttn(flag, inline);
      else if (next !== undefined && /^(on|off|auto|true|false|1|0|enabled|disabled)$/i.test(next))
        o.flashAttention = flashAttn(flag, args[++i]);
      else o.flashAttention = true;
    } else if (DOWNLOAD_FLAGS.has(flag)) {
      throw new LlamaArgsError(
        `${flag} downloads a model, which the built-in llama.cpp runtime does not do; pass a local GGUF file with -m`,
      );
    } else if (IGNORED_VALUE_FLAGS.has(flag)) {
      const v = takeValue();
      o.ignored.push(inline === undefined ? `${flag} ${v}` : word);
    } else if (IGNORED_SWITCHES.has(flag)) o.ignored.push(word);
    else if (flag.startsWith("-") && !/^-\d/.test(flag)) {
      // Unknown flag: take the next word as its value unless it looks like another flag.
      const next = args[i + 1];
      const hasValue = inline === undefined && next !== undefined && (!next.startsWith("-") || /^-\d/.test(next));
      o.ignored.push(hasValue ? `${flag} ${args[++i]}` : word);
    } else o.ignored.push(word);
  }
  if (!o.model) throw new LlamaArgsError("no model given: pass a GGUF file with -m/--model");
  return o;
}

/**
 * Parses a whole llama-server command: the first word (`llama-server` or a path to it) is skipped.
 * @example parseLlamaServerCommand(["llama-server", "-m", "q.gguf", "--embedding"]).embedding // → true
 */
export function parseLlamaServerCommand(words: string[]): LlamaRunnerOptions {
  return parseLlamaServerArgs(words.slice(1));
}
