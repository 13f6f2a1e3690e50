/**
 * The one test command (`bun run test [args]`): runs `bun test` over test/ with its output live,
 * counts results from Bun's JUnit report, and ends with exactly one line `N passed, M failed`
 * (`, K skipped` when there are any). Exits non-zero when anything failed or no test ran.
 * Extra arguments go to `bun test`; when one names files, test/ is not added.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { findPostgresBin } from "./helpers/postgres";

const ROOT = join(import.meta.dir, "..");
const TEST_DIR = import.meta.dir;

/** `bun test` flags that take their value as the next argument (so it is not a file filter). */
const VALUED_FLAGS = new Set([
  "-t",
  "--test-name-pattern",
  "--timeout",
  "--rerun-each",
  "--retry",
  "--seed",
  "--max-concurrency",
  "--shard",
  "--path-ignore-patterns",
  "--coverage-reporter",
  "--coverage-dir",
  "--preload",
  "--timings",
]);

/** Result counts of one run. */
export interface Counts {
  passed: number;
  failed: number;
  skipped: number;
}

/** The final line: `N passed, M failed`, with `, K skipped` only when K > 0. */
export function summaryLine(c: Counts): string {
  return `${c.passed} passed, ${c.failed} failed${c.skipped ? `, ${c.skipped} skipped` : ""}`;
}

/**
 * Reads the totals from the `<testsuites>` element of Bun's JUnit report (todo counts as skipped).
 * @example parseJunit('<testsuites name="bun test" tests="3" failures="1" skipped="1">') // → {passed: 1, failed: 1, skipped: 1}
 */
export function parseJunit(xml: string): Counts | null {
  const head = /<testsuites\b([^>]*)>/.exec(xml)?.[1];
  if (head === undefined) return null;
  const attr = (name: string) => Number(new RegExp(`\\b${name}="(\\d+)"`).exec(head)?.[1] ?? 0);
  const tests = attr("tests");
  const failed = attr("failures") + attr("errors");
  const skipped = attr("skipped");
  return { passed: Math.max(0, tests - failed - skipped), failed, skipped };
}

/** The `bun test` arguments: the caller's, plus ./test/ unless they already name files or filters. */
export function bunTestArgs(extra: string[], reportFile: string): string[] {
  const namesFiles = extra.some((a, i) => !a.startsWith("-") && !VALUED_FLAGS.has(extra[i - 1] ?? ""));
  // The outer bound per test (suites poll for conditions with their own deadlines); the preload's
  // setDefaultTimeout does not reach every file when several run in one process.
  const timeout = extra.includes("--timeout") ? [] : ["--timeout", "90000"];
  return [
    "test",
    ...(namesFiles ? [] : ["./test/"]),
    ...timeout,
    ...extra,
    "--reporter=junit",
    `--reporter-outfile=${reportFile}`,
  ];
}

/**
 * System packages some suites need: a browser for the dashboard tests, an X server for the desktop
 * window, openssl for the webhook receivers' certificates, PostgreSQL (`initdb`, `pg_ctl`, not on
 * PATH on Debian) for the *.pg.test.ts suites.
 */
const SYSTEM_PACKAGES = [
  { pkg: "chromium", present: () => existsSync("/usr/bin/chromium"), marker: "playwright-core" },
  { pkg: "xvfb", present: () => existsSync("/usr/bin/Xvfb"), marker: "Xvfb" },
  { pkg: "openssl", present: () => existsSync("/usr/bin/openssl"), marker: "makeTestPki" },
  { pkg: "postgresql", present: () => findPostgresBin() !== undefined, marker: 'Suite("postgres")' },
];

/**
 * Keeps Debian's postgresql package from creating and starting a system cluster when it is
 * installed: the tests start their own (test/helpers/postgres.ts), and nothing should keep running.
 */
function noMainCluster(): void {
  const dir = "/etc/postgresql-common/createcluster.d";
  mkdirSync(dir, { recursive: true });
  writeFileSync(
    join(dir, "inferd-tests.conf"),
    "# bun run test: the tests start their own PostgreSQL\ncreate_main_cluster = false\n",
  );
}

/** Whether some test file under test/ mentions `marker`. */
function testsMention(marker: string): boolean {
  for (const file of new Bun.Glob("**/*.ts").scanSync({ cwd: TEST_DIR })) {
    if (file.includes("node_modules") || file === "run.ts") continue;
    if (readFileSync(join(TEST_DIR, file), "utf8").includes(marker)) return true;
  }
  return false;
}

/**
 * Installs the Debian packages the suites need (chromium, xvfb, openssl, postgresql) when a test
 * needs one, it is missing and we are root on Debian; otherwise does nothing (says why when one is missing).
 */
export function ensureSystemPackages(): void {
  const missing = SYSTEM_PACKAGES.filter((p) => !p.present() && testsMention(p.marker)).map((p) => p.pkg);
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0 || !existsSync("/etc/debian_version")) {
    console.error(
      `test/run: some tests need ${missing.join(", ")} (Debian: apt-get install ${missing.join(" ")}); not root on Debian, so not installing them`,
    );
    return;
  }
  console.error(`test/run: installing ${missing.join(", ")} (apt-get)…`);
  if (missing.includes("postgresql")) noMainCluster();
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  for (const cmd of [
    ["apt-get", "update"],
    ["apt-get", "install", "-y", "--no-install-recommends", ...missing],
  ]) {
    const r = Bun.spawnSync(cmd, { env, stdin: "ignore", stdout: "inherit", stderr: "inherit" });
    if (r.exitCode !== 0) {
      console.error(
        `test/run: "${cmd.join(" ")}" exited with ${r.exitCode}; the tests that need ${missing.join(", ")} will fail`,
      );
      return;
    }
  }
}

/**
 * Type-checks the whole project (`tsc --noEmit`), printing what it reports; true when clean.
 * Run before the suite on a whole-suite run, so a type error fails CI like a failing test.
 */
export function typecheck(): boolean {
  const tsc = join(ROOT, "node_modules", ".bin", "tsc");
  const r = Bun.spawnSync([tsc, "--noEmit", "-p", join(ROOT, "tsconfig.json")], {
    cwd: ROOT,
    stdin: "ignore",
    stdout: "inherit",
    stderr: "inherit",
  });
  if (r.exitCode !== 0)
    console.error(`test/run: tsc --noEmit found type errors (exit code ${r.exitCode}); counted as one failure`);
  else console.log("test/run: tsc --noEmit: no type errors");
  return r.exitCode === 0;
}

/**
 * Checks the formatting (`biome format`, no write; biome.json names the files and the style),
 * printing the files it would change; true when clean. Run beside the type check on a whole-suite run.
 */
export function formatCheck(): boolean {
  const biome = join(ROOT, "node_modules", ".bin", "biome");
  const r = Bun.spawnSync([biome, "format", "--reporter=summary"], {
    cwd: ROOT,
    stdin: "ignore",
    stdout: "inherit",
    stderr: "inherit",
  });
  if (r.exitCode !== 0)
    console.error(
      `test/run: biome format found files to format (exit code ${r.exitCode}; \`bunx biome format --write\` formats them); counted as one failure`,
    );
  else console.log("test/run: biome format: every file formatted");
  return r.exitCode === 0;
}

/** Runs the suite and returns the exit code; the last line printed is the summary line. */
export async function main(extra: string[]): Promise<number> {
  ensureSystemPackages();
  // A whole-suite run (no file named) also type-checks and checks the formatting; a single file's run stays quick.
  const wholeSuite = !extra.some((a, i) => !a.startsWith("-") && !VALUED_FLAGS.has(extra[i - 1] ?? ""));
  const typesOk = wholeSuite ? typecheck() : true;
  const formatOk = wholeSuite ? formatCheck() : true;
  const reportDir = mkdtempSync(join(tmpdir(), "inferd-junit-"));
  const reportFile = join(reportDir, "junit.xml");
  try {
    const proc = Bun.spawn([process.execPath, ...bunTestArgs(extra, reportFile)], {
      cwd: ROOT,
      stdin: "ignore",
      stdout: "inherit",
      stderr: "inherit",
    });
    const code = await proc.exited;
    const counts = existsSync(reportFile) ? parseJunit(readFileSync(reportFile, "utf8")) : null;
    const result = counts ?? { passed: 0, failed: 0, skipped: 0 };
    if (!counts) console.error(`test/run: bun test wrote no JUnit report (exit code ${code})`);
    if (code !== 0 && result.failed === 0) {
      console.error(
        `test/run: bun test exited with code ${code} outside any test (an error in a file or hook); counted as one failure`,
      );
      result.failed = 1;
    }
    if (!typesOk) result.failed += 1;
    if (!formatOk) result.failed += 1;
    const ran = result.passed + result.failed;
    if (ran === 0) console.error("test/run: no test ran");
    console.log(summaryLine(result));
    return result.failed > 0 || ran === 0 ? 1 : 0;
  } finally {
    rmSync(reportDir, { recursive: true, force: true });
  }
}

if (import.meta.main) process.exit(await main(process.argv.slice(2)));
