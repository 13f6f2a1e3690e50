/**
 * Loading node-llama-cpp without ever downloading or compiling anything: the prebuilt binaries of
 * `@node-llama-cpp/<platform>` must be installed next to it, or loading fails with a clear message.
 */
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import type * as Nlc from "node-llama-cpp";

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
  if (!existsSync(pkgFile)) throw new Error(`${NODE_MODULES_ENV}=${dir} does not contain node-llama-cpp (no ${pkgFile})`);
  const pkg = JSON.parse(readFileSync(pkgFile, "utf8"));
  const entry: string = pkg.exports?.["."]?.import ?? pkg.main ?? "index.js";
  return import(pathToFileURL(join(pkgDir, entry)).href);
}

/** How to start llama.cpp: GPU wanted or not, thread cap, log sink. */
export interface StartLlamaOptions {
  gpu: boolean;
  maxThreads?: number;
  verbose: boolean;
  log: (line: string) => void;
}

/**
 * Starts llama.cpp from prebuilt binaries only: `build: "never"` never compiles, `skipDownload`
 * never fetches the llama.cpp sources, `usePrebuiltBinaries` picks `@node-llama-cpp/<platform>`.
 * With `gpu: false` only the CPU binaries are tried, so a CPU-only install (the compiled binary's
 * unpacked cache) is enough.
 */
export async function startLlama(nlc: NodeLlamaCpp, opts: StartLlamaOptions): Promise<Nlc.Llama> {
  return nlc.getLlama({
    gpu: opts.gpu ? "auto" : false,
    build: "never",
    skipDownload: true,
    usePrebuiltBinaries: true,
    progressLogs: false,
    maxThreads: opts.maxThreads,
    logLevel: opts.verbose ? nlc.LlamaLogLevel.info : nlc.LlamaLogLevel.warn,
    logger: (level, message) => {
      const text = message.trimEnd();
      if (text) opts.log(`llama.cpp ${level}: ${text}`);
    },
  });
}
