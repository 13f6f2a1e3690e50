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
 */
import { rmSync, statSync } from "node:fs";
import { join, relative } from "node:path";

/** The repository root (this file lives in build/). */
export const ROOT = join(import.meta.dir, "..");

/** Every target we ship: its Bun compile target and the file it produces in dist/. */
export const TARGETS = {
  "linux-x64": { bun: "bun-linux-x64", file: "inferd-linux-x64" },
  "linux-arm64": { bun: "bun-linux-arm64", file: "inferd-linux-arm64" },
  "darwin-arm64": { bun: "bun-darwin-arm64", file: "inferd-darwin-arm64" },
  "windows-x64": { bun: "bun-windows-x64", file: "inferd-windows-x64.exe" },
} satisfies Record<string, { bun: Bun.Build.CompileTarget; file: string }>;

/** A target name we know how to build. */
export type TargetName = keyof typeof TARGETS;

/** What one build produced. */
export interface Built {
  target: TargetName;
  path: string;
  bytes: number;
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
  const text = parts.map((e) => (e instanceof Error ? e.message : String((e as { message?: unknown })?.message ?? e))).join("\n");
  if (/failed to download/i.test(text)) {
    return `cannot build ${target}: Bun could not fetch the ${TARGETS[target].bun} runtime from the npm registry (@oven/bun-*), which cross-compiling needs.\n${text}`;
  }
  return `cannot build ${target}:\n${text}`;
}

/**
 * Compiles src/main.ts into `<outDir>/<target file>`: version stamped in, `.env` and `bunfig.toml`
 * autoload off (the binary must not pick up settings from whatever directory it starts in).
 * Throws BuildFailed with a readable message.
 */
export async function buildTarget(target: TargetName, opts: { outDir?: string; stamp?: string } = {}): Promise<Built> {
  const outDir = opts.outDir ?? join(ROOT, "dist");
  const path = join(outDir, TARGETS[target].file);
  const stamp = opts.stamp ?? buildStamp();
  try {
    await Bun.build({
      entrypoints: [join(ROOT, "src/main.ts")],
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
      throw: true,
    });
  } catch (e) {
    throw new BuildFailed(explain(target, e));
  }
  // The sourcemap is embedded in the executable (stack traces resolve without it); drop the copy.
  for (const map of new Set([`${path}.map`, `${path.replace(/\.exe$/, "")}.map`])) rmSync(map, { force: true });
  return { target, path, bytes: statSync(path).size };
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
      if (!name || !(name in TARGETS)) throw new Error(`unknown target "${raw ?? ""}"; known: ${Object.keys(TARGETS).join(", ")}`);
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
    console.log(`usage: bun build/build.ts [--all] [--target NAME]...\ntargets: ${Object.keys(TARGETS).join(", ")} (default linux-x64)`);
    return 0;
  }
  const stamp = buildStamp();
  let failed = 0;
  for (const target of targets) {
    const started = performance.now();
    try {
      const built = await buildTarget(target, { stamp });
      const secs = ((performance.now() - started) / 1000).toFixed(1);
      console.log(`${relative(process.cwd(), built.path) || built.path}  ${human(built.bytes)}  (${target}, version stamp "${stamp}", ${secs} s)`);
    } catch (e) {
      failed++;
      console.error(`build: ${(e as Error).message}`);
    }
  }
  return failed ? 1 : 0;
}

if (import.meta.main) process.exit(await main(process.argv.slice(2)));
