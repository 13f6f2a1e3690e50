import { join } from "node:path";
import { embeddedPack } from "./llama/embedded-pack";
import { isUnpacked, unpackOnce } from "./llama/pack";

/** How to start the built-in runtime: the argv prefix (llama-server's flags follow) and extra env. */
export interface BuiltinLaunch {
  argv: string[];
  env: Record<string, string>;
}

/**
 * nlc.ts's NODE_MODULES_ENV, repeated: importing nlc.ts would make the binary's bundler follow its
 * `import("node-llama-cpp")` and fail on the other platforms' optional binary packages.
 */
const NODE_MODULES_ENV = "INFERD_NODE_MODULES";

/** Where compiled binaries unpack their pack: `<dataDir>/runtimes/builtin-llama/<pack id>/`. */
export const builtinLlamaDir = (dataDir: string) => join(dataDir, "runtimes", "builtin-llama");

/** Pack ids this process unpacked or found complete, by base dir (so a launch re-reads nothing). */
const known = new Map<string, string>();

/**
 * How to start the built-in llama.cpp runtime (node-llama-cpp behind llama-server's flags).
 * From source, Bun runs `agent/runtimes/llama-runner.ts` directly. In a compiled binary, the
 * embedded pack is unpacked once per data dir and pack id (synchronously: 0.2–1 s of blocked event
 * loop on first use, then one small file read per launch) and the binary itself runs
 * the bundled `llama-runner.js` as Bun (`BUN_BE_BUN=1`, which must stay in the env: node-llama-cpp
 * starts a copy of the executable to test its native binaries). Throws, with a message saying what
 * to do, when this build has no pack for its platform or the unpack fails.
 */
export function builtinLlama(
  dataDir: string,
  pack: { path?: string; unavailable?: string } = embeddedPack,
  standalone = Bun.isStandaloneExecutable,
): BuiltinLaunch {
  if (!standalone) return { argv: [process.execPath, join(import.meta.dir, "llama-runner.ts")], env: {} };
  if (!pack.path) {
    throw new Error(
      `llama-server is not installed and this inferd has no built-in llama.cpp runtime for ${process.platform}-${process.arch} (${pack.unavailable ?? "none was embedded"}); install llama.cpp's llama-server on PATH`,
    );
  }
  const base = builtinLlamaDir(dataDir);
  let id = known.get(base);
  if (!id || !isUnpacked(join(base, id), id)) {
    try {
      id = unpackOnce(pack.path, base).id;
    } catch (e) {
      throw new Error(`cannot unpack the built-in llama.cpp runtime into ${base}: ${(e as Error).message}`);
    }
    known.set(base, id);
  }
  const dir = join(base, id);
  return {
    argv: [process.execPath, join(dir, "llama-runner.js")],
    env: { BUN_BE_BUN: "1", [NODE_MODULES_ENV]: join(dir, "node_modules") },
  };
}
