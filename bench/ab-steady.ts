#!/usr/bin/env bun
/**
 * The data plane at concurrency 64, `<ref>` against the working tree, with both servers up at once:
 * c=64 runs of `--seconds` each, alternated ABBA for `--rounds` rounds, on each server's own
 * workload and fake runtime (each tree's bench/lib.ts starts its own, as bench/dataplane.ts does).
 * Prints each side's median CPU per request (the server process, user+system from /proc), p99 and
 * requests/s, every round's figure, and the ratio B/A. Longer runs than bench/ab.ts's and both
 * servers warm in every round, so a change of a few per cent shows above the machine's noise.
 *
 *   bun bench/ab-steady.ts <ref> [--rounds 10] [--seconds 4]
 */
import { type Cleanups, cpuMsOf, fmt, percentile, printTable, REPO_ROOT, runBenchmark } from "./lib";
import { git, worktreeOf } from "./worktree";

const USAGE = "usage: bun bench/ab-steady.ts <ref> [--rounds N] [--seconds S]";
const CONCURRENCY = 64;
const MODEL = "bench-model";

/** The command line, checked. */
function parseArgs(argv: string[]): { ref: string; rounds: number; seconds: number } {
  const out = { ref: "", rounds: 10, seconds: 4 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--rounds" && /^\d+$/.test(argv[i + 1] ?? "")) out.rounds = Math.max(2, Number(argv[++i]));
    else if (a === "--seconds" && /^\d+(\.\d+)?$/.test(argv[i + 1] ?? "")) out.seconds = Number(argv[++i]);
    else if (!a.startsWith("-") && !out.ref) out.ref = a;
    else {
      console.error(USAGE);
      process.exit(2);
    }
  }
  if (!out.ref) {
    console.error(USAGE);
    process.exit(2);
  }
  return out;
}

/** What each side's figures are: CPU µs per request, p99 ms and requests/s of every round. */
interface Figures {
  cpu: number[];
  p99: number[];
  rps: number[];
}

/** One side: a server of one tree with its workload, and a run at c=64 that reports its figures. */
async function side(dir: string, cleanup: Cleanups) {
  // Each tree's own bench/lib.ts, so each starts its own tree's server (an older tree's lib works alike).
  const lib = (await import(`${dir}/bench/lib.ts`)) as typeof import("./lib");
  const inferd = await lib.startInferdForBench({ FAKE_DELAY_MS: "20", FAKE_LOAD_MS: "0" });
  cleanup.add(`the server of ${dir}`, () => inferd.stop());
  const wl = await lib.createBenchWorkload(inferd, { model: MODEL });
  const init = {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${wl.liveKey}` },
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "one two three" }], max_tokens: 8 }),
  };
  const url = `${wl.endpoint}/v1/chat/completions`;
  const once = async () => {
    const r = await fetch(url, init);
    await r.arrayBuffer();
    if (r.status !== 200) throw new Error(`${dir}: ${r.status}`);
  };
  const figures: Figures = { cpu: [], p99: [], rps: [] };
  return {
    figures,
    warm: () => lib.closedLoop({ concurrency: CONCURRENCY, requests: 3000, fn: once }),
    async run(ms: number) {
      const before = cpuMsOf(inferd.pid) ?? Number.NaN;
      const r = await lib.closedLoop({ concurrency: CONCURRENCY, durationMs: ms, fn: once });
      if (r.errors) throw new Error(`${dir}: ${r.errors} failed requests`);
      figures.cpu.push((((cpuMsOf(inferd.pid) ?? Number.NaN) - before) * 1000) / r.completed);
      figures.p99.push(percentile(r.latencies, 99));
      figures.rps.push(r.rps);
    },
  };
}

const median = (xs: number[]) => percentile(xs, 50);

const { ref, rounds, seconds } = parseArgs(process.argv.slice(2));
const a = worktreeOf(ref);
const head = git(["rev-parse", "--short=12", "HEAD"]);
const dirty = git(["status", "--porcelain", "--untracked-files=no"]) ? " + uncommitted changes" : "";
console.log(
  `A = ${ref} (${a.commit.slice(0, 12)}), B = working tree (${head}${dirty}); c=${CONCURRENCY}, ${rounds} rounds of ${seconds} s per side, ABBA, both servers up`,
);
process.exitCode = await runBenchmark(10 * 60_000, async (cleanup) => {
  const A = await side(a.dir, cleanup);
  const B = await side(REPO_ROOT, cleanup);
  await A.warm();
  await B.warm();
  for (let round = 0; round < rounds; round++) for (const s of round % 2 ? [B, A] : [A, B]) await s.run(seconds * 1000);
  const row = (name: string, k: keyof Figures, digits: number) => {
    const [ma, mb] = [median(A.figures[k]), median(B.figures[k])];
    const each = (xs: number[]) => xs.map((x) => fmt(x, 0)).join(" ");
    return [name, fmt(ma, digits), fmt(mb, digits), `${fmt(mb / ma, 3)}x`, each(A.figures[k]), each(B.figures[k])];
  };
  printTable(
    ["figure", "A", "B", "B/A", "A per round", "B per round"],
    [row("CPU time per request (µs)", "cpu", 1), row("p99 (ms)", "p99", 1), row("requests/s", "rps", 0)],
    `the data plane at c=${CONCURRENCY}: medians of ${rounds} rounds`,
  );
});
