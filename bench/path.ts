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
 * bench/ab.ts makes) the same way first.
 *
 * Then how many times a request enters each folder: the probe runs again with bench/path-trace.ts
 * preloaded, which notes each function entered and the files on the stack under it; a folder is
 * entered when one of its functions is called while none of its code is on the stack (a callback
 * into a folder that has not returned, as a memo's `andThen` makes, is not an entry). A call from
 * outside src/ and agent/ (the server, a stream, a timer) enters its folder. Files directly in src/ are the folder `src`. Of five requests, the
 * fewest entries per folder count (a timer's work can only add). Prints them and the line
 * `folder entries (<kind>): N entries, K of M folders entered more than once`.
 *
 *   bun bench/path.ts [<ref>]
 */
import { copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { delimiter, join } from "node:path";
import { REPO_ROOT } from "./lib";
import type { Entry } from "./path-trace";
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

/** The probe's environment. Bun finds commands on the PATH it started with: the fakes go on it here, not in the probe. */
function probeEnv(root: string, requests: number, stream: string): Record<string, string | undefined> {
  return {
    ...process.env,
    PATH: [join(root, "test/fixtures/bin"), process.env.PATH ?? ""].join(delimiter),
    FAKE_GPUS: "1x NVIDIA GeForce RTX 4090:24564",
    FAKE_LOAD_MS: "50",
    INFERD_LOG_LEVEL: "error",
    PROBE_REQUESTS: String(requests),
    PROBE_STREAM: stream,
  };
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
        env: probeEnv(root, requests, stream),
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

/** How many times one request enters each folder (the fewest of the traced requests), from bench/path-trace.ts's notes. */
function entriesOf(root: string, stream: string): Map<string, number> {
  const dir = mkdtempSync(join(tmpdir(), "inferd-path-"));
  try {
    const out = join(dir, "entries.json");
    const p = Bun.spawnSync(["bun", "test", "--preload", "./bench/path-trace.ts", "./bench/path-probe.ts"], {
      cwd: root,
      stdout: "pipe",
      stderr: "pipe",
      // In strict code JavaScriptCore drops a caller's frame on a call in tail position: without
      // that, a function's stack names its real caller.
      env: { ...probeEnv(root, 0, stream), PROBE_TRACE: out, BUN_JSC_useTailCalls: "0" },
    });
    if (p.exitCode !== 0 || !existsSync(out))
      throw new Error(`the traced probe failed in ${root}:\n${p.stdout.toString()}${p.stderr.toString()}`);
    const requests = JSON.parse(readFileSync(out, "utf8")) as Entry[][];
    const counts = requests.map((entries) => {
      const m = new Map<string, number>();
      for (const { file, callers } of entries) {
        if (LOG_PUMP.has(file) || callers.some((c) => folderOf(c) === folderOf(file))) continue;
        m.set(folderOf(file), (m.get(folderOf(file)) ?? 0) + 1);
      }
      return m;
    });
    const fewest = new Map<string, number>();
    for (const folder of new Set(counts.flatMap((m) => [...m.keys()])))
      fewest.set(folder, Math.min(...counts.map((m) => m.get(folder) ?? 0)));
    for (const [folder, n] of fewest) if (n === 0) fewest.delete(folder);
    return fewest;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Prints one tree's path for each kind of request. */
function report(label: string, root: string): void {
  for (const kind of KINDS) {
    const files = pathOf(root, kind.stream);
    const names = [...files.keys()].sort();
    const folders = new Set(names.map(folderOf));
    console.log(`\n${label}, ${kind.name}:`);
    for (const f of names) console.log(`  ${f.padEnd(40)} ${String(files.get(f)).padStart(4)} lines`);
    console.log(`chat path (${kind.name}): ${names.length} files in ${folders.size} folders`);
    const entries = entriesOf(root, kind.stream);
    const byCount = [...entries].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
    console.log(`  entries: ${byCount.map(([f, n]) => `${f} ${n}`).join(", ")}`);
    const total = byCount.reduce((sum, [, n]) => sum + n, 0);
    const twice = byCount.filter(([, n]) => n > 1).length;
    console.log(
      `folder entries (${kind.name}): ${total} entries, ${twice} of ${byCount.length} folders entered more than once`,
    );
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
  for (const f of ["bench/path-probe.ts", "bench/path-trace.ts"]) copyFileSync(join(REPO_ROOT, f), join(dir, f));
  report(`${ref} (${commit.slice(0, 12)})`, dir);
}
report("working tree", REPO_ROOT);
