/**
 * Builds the single `inferd` executables into dist/ with `Bun.build({ compile })`.
 *
 *   bun run build                          dist/inferd-linux-x64
 *   bun run build --all                    every target below
 *   bun build/build.ts --target linux-arm64  (repeatable; --target=NAME works too)
 *
 * Cross targets need the target's Bun runtime, which Bun downloads from the npm registry
 * (`@oven/bun-<os>-<arch>`) on first use and caches; a target whose runtime cannot be fetched
 * fails with a message saying so, and the script exits non-zero.
 *
 * Each binary embeds the built-in llama.cpp runtime's pack for its platform (build/llama-pack.ts):
 * the bundled runner plus node-llama-cpp with that platform's prebuilt CPU binaries. npm installs
 * only the host's binary packages, so a target whose package is missing builds without one (a
 * warning is printed) and its built-in runtime refuses to start with a message saying so.
 *
 * The dashboard (ui/) is bundled with Bun's HTML bundler and embedded the same way: the stub
 * src/ui/embedded.ts is replaced by a module importing every built file (src/ui/bundle.ts).
 */
import { rmSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { buildLlamaPack, PACK_FILE, packModules } from "./llama-pack";
import { buildUi, UI_EMBED_DIR, uiModules } from "../src/ui/bundle";

/** The repository root (this file lives in build/). */
export const ROOT = join(import.meta.dir, "..");

/** Where `bun run build` writes the executables (the Dockerfile copies from here). */
export const DIST = join(ROOT, "dist");

/** Every target we ship: its Bun compile target, the file it produces in dist/, and its Node platform/arch. */
export const TARGETS = {
  "linux-x64": { bun: "bun-linux-x64", file: "inferd-linux-x64", os: "linux", cpu: "x64" },
  "linux-arm64": { bun: "bun-linux-arm64", file: "inferd-linux-arm64", os: "linux", cpu: "arm64" },
  "darwin-arm64": { bun: "bun-darwin-arm64", file: "inferd-darwin-arm64", os: "darwin", cpu: "arm64" },
  "windows-x64": { bun: "bun-windows-x64", file: "inferd-windows-x64.exe", os: "win32", cpu: "x64" },
} satisfies Record<
  string,
  { bun: Bun.Build.CompileTarget; file: string; os: NodeJS.Platform; cpu: NodeJS.Architecture }
>;

/** A target name we know how to build. */
export type TargetName = keyof typeof TARGETS;

/** What one build produced. */
export interface Built {
  target: TargetName;
  path: string;
  bytes: number;
  /** The embedded built-in llama.cpp runtime: its pack id and size, or why there is none. */
  llama: { id: string; files: number; packBytes: number } | { unavailable: string };
}

/** A target that could not be built; the message says why in a user's words. */
export class BuildFailed extends Error {}

/**
 * The suffix stamped into the version: `+<short git sha>` of the checkout, or "" when git (or the
 * repository) is not there, so a build from a source tarball still works.
 * @example buildStamp() // → "+91e7e40"
 */
export function buildStamp(cwd: string = ROOT): string {
  try {
    const r = Bun.spawnSync(["git", "rev-parse", "--short", "HEAD"], { cwd, stdout: "pipe", stderr: "ignore" });
    const sha = r.exitCode === 0 ? r.stdout.toString().trim() : "";
    return /^[0-9a-f]{4,40}$/.test(sha) ? `+${sha}` : "";
  } catch {
    return "";
  }
}

/** Turns Bun's build errors into one message, explaining a runtime download that failed. */
function explain(target: TargetName, error: unknown): string {
  const parts = error instanceof AggregateError ? error.errors : [error];
  const text = parts
    .map((e) => (e instanceof Error ? e.message : String((e as { message?: unknown })?.message ?? e)))
    .join("\n");
  if (/failed to download/i.test(text)) {
    return `cannot build ${target}: Bun could not fetch the ${TARGETS[target].bun} runtime from the npm registry (@oven/bun-*), which cross-compiling needs.\n${text}`;
  }
  return `cannot build ${target}:\n${text}`;
}

/**
 * Compiles src/main.ts into `<outDir>/<target file>`: version stamped in, `.env` and `bunfig.toml`
 * autoload off (the binary must not pick up settings from whatever directory it starts in), the
 * built-in llama.cpp runtime's pack embedded. Throws BuildFailed with a readable message.
 */
export async function buildTarget(target: TargetName, opts: { outDir?: string; stamp?: string } = {}): Promise<Built> {
  const outDir = opts.outDir ?? DIST;
  const path = join(outDir, TARGETS[target].file);
  const stamp = opts.stamp ?? buildStamp();
  const { os, cpu } = TARGETS[target];
  let llama: Built["llama"];
  try {
    const pack = await buildLlamaPack(ROOT, os, cpu);
    llama = "unavailable" in pack ? pack : { id: pack.id, files: pack.files, packBytes: pack.bytes.length };
    const ui = uiModules(ROOT, await buildUi(ROOT));
    const out = await Bun.build({
      entrypoints: [join(ROOT, "src/main.ts")],
      files: { ...packModules(ROOT, pack), ...ui },
      compile: {
        target: TARGETS[target].bun,
        outfile: path,
        autoloadDotenv: false,
        autoloadBunfig: false,
        autoloadTsconfig: false,
        autoloadPackageJson: false,
      },
      // Elysia reads handler source to compile routes: keep identifiers, as its deploy guide says.
      minify: { whitespace: true, syntax: true, identifiers: false },
      sourcemap: "linked",
      define: { "process.env.INFERD_BUILD_STAMP": JSON.stringify(stamp) },
      metafile: true,
      throw: true,
    });
    if (!("unavailable" in pack) && !Object.keys(out.metafile?.inputs ?? {}).some((p) => p.endsWith(PACK_FILE))) {
      throw new Error(
        `the built-in llama.cpp runtime's pack was not embedded (the bundler did not use the replacement of agent/runtimes/llama/embedded-pack.ts)`,
      );
    }
    if (!Object.keys(out.metafile?.inputs ?? {}).some((p) => p.includes(UI_EMBED_DIR))) {
      throw new Error(`the dashboard was not embedded (the bundler did not use the replacement of src/ui/embedded.ts)`);
    }
  } catch (e) {
    throw new BuildFailed(explain(target, e));
  }
  // The sourcemap is embedded in the executable (stack traces resolve without it); drop the copy.
  for (const map of new Set([`${path}.map`, `${path.replace(/\.exe$/, "")}.map`])) rmSync(map, { force: true });
  return { target, path, bytes: statSync(path).size, llama };
}

/** Reads `--all`, `--target NAME` (repeatable) and `--help`; no target means linux-x64. */
export function parseTargets(argv: string[]): TargetName[] | "help" {
  const picked = new Set<TargetName>();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--help" || a === "-h") return "help";
    if (a === "--all") for (const t of Object.keys(TARGETS) as TargetName[]) picked.add(t);
    else if (a === "--target" || a.startsWith("--target=")) {
      const raw = a === "--target" ? argv[++i] : a.slice("--target=".length);
      const name = raw?.replace(/^bun-/, "");
      if (!name || !(name in TARGETS))
        throw new Error(`unknown target "${raw ?? ""}"; known: ${Object.keys(TARGETS).join(", ")}`);
      picked.add(name as TargetName);
    } else throw new Error(`unknown argument "${a}" (try --help)`);
  }
  return picked.size ? [...picked] : ["linux-x64"];
}

/** Sizes as people read them, e.g. "98.4 MB". */
function human(bytes: number): string {
  return bytes >= 1e6 ? `${(bytes / 1e6).toFixed(1)} MB` : `${(bytes / 1e3).toFixed(1)} kB`;
}

/** Builds the targets asked for, printing each path and size; returns the exit code. */
export async function main(argv: string[]): Promise<number> {
  let targets: TargetName[] | "help";
  try {
    targets = parseTargets(argv);
  } catch (e) {
    console.error(`build: ${(e as Error).message}`);
    return 2;
  }
  if (targets === "help") {
    console.log(
      `usage: bun build/build.ts [--all] [--target NAME]...\ntargets: ${Object.keys(TARGETS).join(", ")} (default linux-x64)`,
    );
    return 0;
  }
  const stamp = buildStamp();
  let failed = 0;
  for (const target of targets) {
    const started = performance.now();
    try {
      const built = await buildTarget(target, { stamp });
      const secs = ((performance.now() - started) / 1000).toFixed(1);
      console.log(
        `${relative(process.cwd(), built.path) || built.path}  ${human(built.bytes)}  (${target}, version stamp "${stamp}", ${secs} s)`,
      );
      if ("unavailable" in built.llama)
        console.warn(`build: warning: ${target} has no built-in llama.cpp runtime: ${built.llama.unavailable}`);
      else
        console.log(
          `  built-in llama.cpp runtime ${built.llama.id}: ${built.llama.files} files, ${human(built.llama.packBytes)} packed`,
        );
    } catch (e) {
      failed++;
      console.error(`build: ${(e as Error).message}`);
    }
  }
  return failed ? 1 : 0;
}

if (import.meta.main) process.exit(await main(process.argv.slice(2)));
