#!/usr/bin/env bun
/**
 * The files a chat request runs: which files of `src/` and `agent/` run code on every chat request on
 * the project base URL, counted from line coverage. bench/path-probe.ts runs in-process inferd twice,
 * with 10 and with 110 requests after the same warm-up; a line whose count grew by (nine tenths of)
 * the 100 requests between them runs on every request (start-up and timers grow by far less). Not counted: the
 * local agent's log pump (LOG_PUMP), which runs because the runtime prints a line per request, as
 * vLLM's access log does, beside the request rather than on its path. Prints, for the
 * non-streamed and the streamed request, the files with how many of their lines run, and the line
 * `chat path (<kind>): N files in M folders`. With `<ref>`, measures that ref (its worktree, as
 * bench/ab.ts makes) the same way first. The count says nothing about the order in which folders
 * are entered.
 *
 *   bun bench/path.ts [<ref>]
 */
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { REPO_ROOT } from "./lib";
import { worktreeOf } from "./worktree";

/** The agent's reading of a runtime's output (agent/supervisor.ts pumps it into agent/logfile.ts and agent/ring.ts). */
const LOG_PUMP = new Set(["agent/supervisor.ts", "agent/logfile.ts", "agent/ring.ts"]);
const FEW = 10;
const MANY = 110;
/** The share of the extra requests a line's count must grow by (counts of code the JIT optimised can fall a little short). */
const SHARE = 0.9;
const KINDS = [
  { name: "non-streamed", stream: "0" },
  { name: "streamed", stream: "1" },
] as const;

/** Line counts per file from an lcov file. */
function lcov(file: string): Map<string, Map<number, number>> {
  const out = new Map<string, Map<number, number>>();
  let cur: Map<number, number> | undefined;
  for (const line of readFileSync(file, "utf8").split("\n")) {
    if (line.startsWith("SF:")) out.set(line.slice(3), (cur = new Map()));
    else if (line.startsWith("DA:") && cur) {
      const [n, count] = line.slice(3).split(",").map(Number);
      cur.set(n, count);
    }
  }
  return out;
}

/** Runs the probe in `root` with `requests` requests under coverage; returns its line counts. */
function covered(root: string, requests: number, stream: string): Map<string, Map<number, number>> {
  const dir = mkdtempSync(join(tmpdir(), "inferd-path-"));
  try {
    const p = Bun.spawnSync(
      ["bun", "test", "--coverage", "--coverage-reporter=lcov", `--coverage-dir=${dir}`, "./bench/path-probe.ts"],
      {
        cwd: root,
        stdout: "pipe",
        stderr: "pipe",
        env: {
          ...process.env,
          // Bun finds commands on the PATH it started with: the fakes go on it here, not in the probe.
          PATH: [join(root, "test/fixtures/bin"), process.env.PATH ?? ""].join(delimiter),
          FAKE_GPUS: "1x NVIDIA GeForce RTX 4090:24564",
          FAKE_LOAD_MS: "50",
          INFERD_LOG_LEVEL: "error",
          PROBE_REQUESTS: String(requests),
          PROBE_STREAM: stream,
        },
      },
    );
    const info = join(dir, "lcov.info");
    if (p.exitCode !== 0 || !existsSync(info))
      throw new Error(`the probe failed in ${root}:\n${p.stdout.toString()}${p.stderr.toString()}`);
    return lcov(info);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The src/ and agent/ files with a line run at least once more per extra request, and how many such lines. */
function pathOf(root: string, stream: string): Map<string, number> {
  const few = covered(root, FEW, stream);
  const many = covered(root, MANY, stream);
  const files = new Map<string, number>();
  for (const [file, lines] of many) {
    if (!(file.startsWith("src/") || file.startsWith("agent/")) || LOG_PUMP.has(file)) continue;
    let n = 0;
    for (const [line, count] of lines) if (count - (few.get(file)?.get(line) ?? 0) >= SHARE * (MANY - FEW)) n++;
    if (n > 0) files.set(file, n);
  }
  return files;
}

const folderOf = (file: string) => file.slice(0, file.lastIndexOf("/"));

/** Prints one tree's path for each kind of request. */
function report(label: string, root: string): void {
  for (const kind of KINDS) {
    const files = pathOf(root, kind.stream);
    const names = [...files.keys()].sort();
    const folders = new Set(names.map(folderOf));
    console.log(`\n${label}, ${kind.name}:`);
    for (const f of names) console.log(`  ${f.padEnd(40)} ${String(files.get(f)).padStart(4)} lines`);
    console.log(`chat path (${kind.name}): ${names.length} files in ${folders.size} folders`);
  }
}

const ref = process.argv[2];
if (ref?.startsWith("-")) {
  console.error("usage: bun bench/path.ts [<ref>]");
  process.exit(2);
}
if (ref) {
  const { dir, commit } = worktreeOf(ref);
  // The probe is this tree's: an older ref may not have it.
  copyFileSync(join(REPO_ROOT, "bench/path-probe.ts"), join(dir, "bench/path-probe.ts"));
  report(`${ref} (${commit.slice(0, 12)})`, dir);
}
report("working tree", REPO_ROOT);
