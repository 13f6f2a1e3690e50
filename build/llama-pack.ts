/**
 * Makes the built-in llama.cpp runtime's pack for one target (see agent/runtimes/llama/pack.ts):
 * llama-runner.ts bundled into `llama-runner.js` (node-llama-cpp left external), and under
 * `node_modules/` node-llama-cpp, its dependencies and the target's prebuilt CPU binaries package.
 * `packModules` gives the in-memory modules that make `Bun.build` embed it in the executable.
 *
 * The binary packs the CPU build only (on macOS arm64 that package is the Metal build): the GPU
 * builds are far bigger (CUDA ~180 MB, Vulkan ~70 MB) and only some machines can use them. A replica
 * placed on a GPU fetches its GPU build from the npm registry at first use (agent/runtimes/llama-gpu.ts).
 */
import { existsSync, readFileSync, realpathSync, statSync } from "node:fs";
import { join } from "node:path";
import { encodePack, type PackInput } from "../agent/runtimes/llama/pack";
import { nodeLlamaCppFiles, prebuiltPackageName } from "../agent/runtimes/llama/runtime-files";

/** A pack ready to embed, or why the target gets none. */
export type LlamaPack = { bytes: Uint8Array; id: string; files: number; rawBytes: number } | { unavailable: string };

/** Where the in-memory pack pretends to live (it is never written there). */
export const PACK_FILE = "agent/runtimes/llama/builtin-llama.pack";

/** Native libraries and executables keep an executable mode; everything else is 0644. */
export function packMode(path: string, mode: number): number {
  return mode & 0o111 || /\.(node|so|dylib|dll|exe)$|\.so\.\d/.test(path) ? 0o755 : 0o644;
}

/** llama-runner.ts and its helpers as one ES module for Bun, node-llama-cpp imported at run time. */
export async function bundleRunner(root: string): Promise<Uint8Array> {
  const out = await Bun.build({
    entrypoints: [join(root, "agent/runtimes/llama-runner.ts")],
    target: "bun",
    format: "esm",
    external: ["node-llama-cpp"],
    throw: true,
  });
  return new Uint8Array(await out.outputs[0].arrayBuffer());
}

/**
 * The pack for a target platform (Node names: `linux`/`darwin`/`win32`, `x64`/`arm64`), or
 * `{unavailable}` when that platform's prebuilt binaries are not installed in `<root>/node_modules`
 * (package managers install only the host's optional binary packages). Throws when node-llama-cpp
 * itself or one of its dependencies is missing: a broken install, not a platform limit.
 */
export async function buildLlamaPack(root: string, os: string, cpu: string): Promise<LlamaPack> {
  const nodeModules = join(root, "node_modules");
  const binaries = prebuiltPackageName(os, cpu);
  if (!existsSync(join(nodeModules, binaries, "package.json"))) {
    return {
      unavailable: `node-llama-cpp's prebuilt binaries ${binaries} were not installed when this inferd was built`,
    };
  }
  const files = nodeLlamaCppFiles(nodeModules, [binaries]);
  const inputs: PackInput[] = [{ path: "llama-runner.js", bytes: await bundleRunner(root), mode: 0o644 }];
  for (const rel of files) {
    const abs = join(nodeModules, rel);
    inputs.push({ path: `node_modules/${rel}`, bytes: readFileSync(abs), mode: packMode(rel, statSync(abs).mode) });
  }
  const version = JSON.parse(readFileSync(join(nodeModules, "node-llama-cpp/package.json"), "utf8")).version as string;
  const { bytes, index } = encodePack(inputs, { label: `${version}-${os}-${cpu}` });
  return { bytes, id: index.id, files: inputs.length, rawBytes: inputs.reduce((n, f) => n + f.bytes.length, 0) };
}

/**
 * The `files` option of `Bun.build` that replaces agent/runtimes/llama/embedded-pack.ts with a
 * module embedding the pack (an in-memory file imported `with { type: "file" }`) or naming why
 * there is none, so nothing is written into the source tree. Keys are real paths: the bundler
 * matches them against resolved imports, which follow symlinks.
 */
export function packModules(root: string, pack: LlamaPack): Record<string, string | Uint8Array> {
  root = realpathSync(root);
  const stub = join(root, "agent/runtimes/llama/embedded-pack.ts");
  const type = "{ path?: string; unavailable?: string }";
  if ("unavailable" in pack)
    return { [stub]: `export const embeddedPack: ${type} = { unavailable: ${JSON.stringify(pack.unavailable)} };\n` };
  const file = join(root, PACK_FILE);
  return {
    [stub]: `import path from ${JSON.stringify(file)} with { type: "file" };\nexport const embeddedPack: ${type} = { path };\n`,
    [file]: pack.bytes,
  };
}
