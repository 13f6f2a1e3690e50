/**
 * Loading node-llama-cpp without ever downloading or compiling anything: the prebuilt binaries of
 * `@node-llama-cpp/<platform>` must be installed next to it, or loading fails with a clear message.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type * as Nlc from "node-llama-cpp";
import { GPU_ENV, GPU_NAMES, GPU_UNAVAILABLE_ENV, isGpuType } from "./gpu-env.ts";

/** The node-llama-cpp module's exports. */
export type NodeLlamaCpp = typeof Nlc;

/** Environment variable naming a node_modules dir holding node-llama-cpp (used by the compiled binary's unpacked copy). */
export const NODE_MODULES_ENV = "INFERD_NODE_MODULES";

/**
 * Imports node-llama-cpp from `$INFERD_NODE_MODULES/node-llama-cpp` when that is set, else by normal
 * resolution from this file. The specifier is held in a variable so bundling this file leaves the
 * import to run time whether or not node-llama-cpp is marked external.
 */
export async function importNodeLlamaCpp(env: Record<string, string | undefined> = process.env): Promise<NodeLlamaCpp> {
  const dir = env[NODE_MODULES_ENV];
  if (!dir) {
    const specifier = "node-llama-cpp";
    return import(specifier);
  }
  const pkgDir = join(dir, "node-llama-cpp");
  const pkgFile = join(pkgDir, "package.json");
  if (!existsSync(pkgFile))
    throw new Error(`${NODE_MODULES_ENV}=${dir} does not contain node-llama-cpp (no ${pkgFile})`);
  const pkg = JSON.parse(readFileSync(pkgFile, "utf8"));
  const entry: string = pkg.exports?.["."]?.import ?? pkg.main ?? "index.js";
  return import(pathToFileURL(join(pkgDir, entry)).href);
}

/** How to start llama.cpp: GPU wanted or not, thread cap, log sink, and the agent's env naming the GPU build. */
export interface StartLlamaOptions {
  gpu: boolean;
  maxThreads?: number;
  verbose: boolean;
  log: (line: string) => void;
  env?: Record<string, string | undefined>;
}

/** A started llama.cpp and its backend in words: "CUDA", "CPU", or "CPU (GPU build unavailable: …)". */
export interface StartedLlama {
  llama: Nlc.Llama;
  backend: string;
}

/**
 * Starts llama.cpp from prebuilt binaries only: `build: "never"` never compiles, `skipDownload`
 * never fetches the llama.cpp sources, `usePrebuiltBinaries` picks `@node-llama-cpp/<platform>`.
 * With `$INFERD_LLAMA_GPU` set, that build is tried first; when it does not load, the CPU build is
 * used and the backend says why (node-llama-cpp's own last word on it). With `gpu: false` or
 * `$INFERD_LLAMA_GPU_UNAVAILABLE` only the CPU binaries are tried.
 */
export async function startLlama(nlc: NodeLlamaCpp, opts: StartLlamaOptions): Promise<StartedLlama> {
  const env = opts.env ?? process.env;
  const base = {
    build: "never",
    skipDownload: true,
    usePrebuiltBinaries: true,
    maxThreads: opts.maxThreads,
    logLevel: opts.verbose ? nlc.LlamaLogLevel.info : nlc.LlamaLogLevel.warn,
    logger: (level: Nlc.LlamaLogLevel, message: string) => {
      const text = message.trimEnd();
      if (text) opts.log(`llama.cpp ${level}: ${text}`);
    },
  } as const;
  let why = env[GPU_UNAVAILABLE_ENV];
  const wanted = env[GPU_ENV];
  if (opts.gpu && !why && isGpuType(wanted)) {
    const said: string[] = [];
    try {
      const llama = await saying(said, opts.log, () => nlc.getLlama({ ...base, gpu: wanted, progressLogs: true }));
      return { llama, backend: nameOf(llama.gpu) };
    } catch (e) {
      why = notLoaded(GPU_NAMES[wanted], said.at(-1) ?? (e as Error).message);
      opts.log(`warning: ${why}; falling back to the CPU build`);
    }
  }
  const llama = await nlc.getLlama({ ...base, gpu: opts.gpu && !why && !wanted ? "auto" : false, progressLogs: false });
  if (llama.gpu !== false) return { llama, backend: nameOf(llama.gpu) };
  return { llama, backend: why ? `CPU (GPU build unavailable: ${why})` : "CPU" };
}

/**
 * Why a GPU build did not load, short enough for the replica's row, from node-llama-cpp's last
 * warning (its full text is in the log).
 * @example notLoaded("CUDA", 'The prebuilt binary for platform "linux" "x64" with CUDA support is not compatible with the current system') // → "the CUDA build does not run on this machine"
 */
export function notLoaded(name: string, said: string): string {
  if (/is not compatible with the current system/i.test(said)) return `the ${name} build does not run on this machine`;
  if (/prebuilt binary was not found/i.test(said)) return `the ${name} build was not found`;
  const detail = said.replace(/^Failed to load a prebuilt binary.*?Error:\s*/i, "").replace(/\.$/, "");
  return `the ${name} build did not load: ${detail.charAt(0).toLowerCase()}${detail.slice(1)}`;
}

/** A backend as people name it ("CUDA"), node-llama-cpp's own name for one we do not know. */
const nameOf = (gpu: string | false) => (gpu === false ? "CPU" : isGpuType(gpu) ? GPU_NAMES[gpu] : gpu);

/** Runs `fn` with node-llama-cpp's console warnings and errors sent to `log` and kept (colours removed) in `said`. */
async function saying<T>(said: string[], log: (line: string) => void, fn: () => Promise<T>): Promise<T> {
  const { warn, error } = console;
  const keep = (...args: unknown[]) => {
    const line = args
      .map((a) => (a instanceof Error ? a.message : String(a)))
      .join(" ")
      .replace(/\x1b\[[\d;]*m/g, "")
      .trim();
    if (!line) return;
    log(line);
    said.push(line.replace(/^\[node-llama-cpp\]\s*/, ""));
  };
  console.warn = keep;
  console.error = keep;
  try {
    return await fn();
  } finally {
    console.warn = warn;
    console.error = error;
  }
}
