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
import { type Cleanups, fmt, printTable, REPO_ROOT, runBenchmark } from "./lib";
import { CONCURRENCY, chatSide, type Figures, MODEL, median, steadyArgs } from "./steady";
import { git, worktreeOf } from "./worktree";

const USAGE = "usage: bun bench/ab-steady.ts <ref> [--rounds N] [--seconds S]";

/** One side: a server of one tree with its workload (each tree's own bench/lib.ts starts it, as bench/dataplane.ts does). */
async function side(dir: string, cleanup: Cleanups) {
  const lib = (await import(`${dir}/bench/lib.ts`)) as typeof import("./lib");
  const inferd = await lib.startInferdForBench({ FAKE_DELAY_MS: "20", FAKE_LOAD_MS: "0" });
  cleanup.add(`the server of ${dir}`, () => inferd.stop());
  const wl = await lib.createBenchWorkload(inferd, { model: MODEL });
  return chatSide(dir, inferd.pid, `${wl.endpoint}/v1/chat/completions`, { authorization: `Bearer ${wl.liveKey}` });
}

const args = steadyArgs(process.argv.slice(2), USAGE, 10);
if (!args.ref) {
  console.error(USAGE);
  process.exit(2);
}
const { rounds, seconds } = args;
const ref = args.ref;
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
