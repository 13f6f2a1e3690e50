/**
 * The files the built-in llama.cpp runtime needs on disk when inferd runs as a compiled binary:
 * node-llama-cpp, its run-time dependency closure (resolved the way Node resolves packages, so
 * nested `node_modules` copies are kept) and one prebuilt binary package such as
 * `@node-llama-cpp/linux-x64`. The build embeds them; the binary unpacks them next to the bundled
 * llama-runner.js and starts it with `BUN_BE_BUN=1`.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, relative, sep } from "node:path";

/** The prebuilt CPU binary package of node-llama-cpp for a platform and arch (Linux, macOS, Windows). */
export function prebuiltPackageName(platform: string = process.platform, arch: string = process.arch): string {
  if (platform === "darwin") return arch === "arm64" ? "@node-llama-cpp/mac-arm64-metal" : "@node-llama-cpp/mac-x64";
  return `@node-llama-cpp/${platform === "win32" ? "win" : platform}-${arch === "arm" ? "armv7l" : arch}`;
}

/**
 * Package dirs (relative to `nodeModules`) node-llama-cpp needs at run time: its dependencies'
 * closure plus the given prebuilt binary packages; optional and peer dependencies are left out.
 * @example nodeLlamaCppPackages("node_modules") // → ["node-llama-cpp", "@huggingface/jinja", …, "@node-llama-cpp/linux-x64"]
 */
export function nodeLlamaCppPackages(
  nodeModules: string,
  binaryPackages: string[] = [prebuiltPackageName()],
): string[] {
  const root = join(nodeModules, "node-llama-cpp");
  if (!existsSync(join(root, "package.json"))) throw new Error(`node-llama-cpp is not installed in ${nodeModules}`);
  const found = new Set<string>();
  const visit = (dir: string) => {
    if (found.has(dir)) return;
    found.add(dir);
    const pkg = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
    for (const dep of Object.keys(pkg.dependencies ?? {})) {
      const at = resolvePackageDir(dep, dir, nodeModules);
      if (!at) throw new Error(`${relative(nodeModules, dir)} depends on ${dep}, which is not installed`);
      visit(at);
    }
  };
  visit(root);
  for (const name of binaryPackages) {
    const dir = join(nodeModules, name);
    if (!existsSync(join(dir, "package.json"))) throw new Error(`${name} is not installed in ${nodeModules}`);
    found.add(dir);
  }
  return [...found].map((d) => relative(nodeModules, d).split(sep).join("/"));
}

/** Where Node would find package `name` from a package at `fromDir`, searching no higher than `top`. */
function resolvePackageDir(name: string, fromDir: string, top: string): string | undefined {
  let dir = fromDir;
  for (;;) {
    const candidate = join(dir, "node_modules", name);
    if (existsSync(join(candidate, "package.json"))) return candidate;
    if (dir === dirname(top) || dirname(dir) === dir) return undefined;
    dir = dirname(dir);
    // From node_modules/a/node_modules/b the next place to look is node_modules/a, then the project.
    if (dir.endsWith(`${sep}node_modules`)) dir = dirname(dir);
  }
}

/** Files not needed at run time: llama.cpp's source bundle (only for building), source maps, type declarations. */
export function isBuildOnlyFile(relPath: string): boolean {
  return relPath === "node-llama-cpp/llama/gitRelease.bundle" || relPath.endsWith(".map") || relPath.endsWith(".d.ts");
}

/**
 * Every file (relative to `nodeModules`) to unpack for the built-in runtime, nested
 * `node_modules` of a package excluded (they are listed as packages of their own when needed).
 */
export function nodeLlamaCppFiles(nodeModules: string, binaryPackages?: string[]): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(join(nodeModules, dir))) {
      const rel = `${dir}/${entry}`;
      if (entry === "node_modules") continue;
      if (statSync(join(nodeModules, rel)).isDirectory()) walk(rel);
      else if (!isBuildOnlyFile(rel)) files.push(rel);
    }
  };
  for (const pkg of nodeLlamaCppPackages(nodeModules, binaryPackages)) walk(pkg);
  return files;
}
