#!/usr/bin/env bun
/**
 * A against B, same benchmarks, alternated in one run: checks out `<ref>` (say, the previous landing)
 * in a temporary worktree (`inferd-ab-<commit>` in the system's temp folder, node_modules shared with this checkout), then
 * runs each named benchmark in both trees in ABBA order for `--rounds` rounds, reads every figure of
 * the tables they print, and prints each figure's median for the ref and for the working tree with
 * the ratio (working tree / ref). Nothing is judged: a ratio below 1 is less of that figure.
 *
 *   bun bench/ab.ts <ref> [--rounds N] [--bench dataplane,limits] [--full] [-- <arguments for each benchmark>]
 *
 * Without `--full` each benchmark runs with `--quick`; what follows `--` is passed to each (e.g. `--store postgres`). Benchmarks must print their figures with
 * bench/lib.ts's `printTable` (a header line, a line of dashes, rows).
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fmt, formatTable, summarize } from "./lib";
import { git, worktreeOf } from "./worktree";

const ROOT = join(import.meta.dir, "..");
const USAGE =
  "usage: bun bench/ab.ts <ref> [--rounds N] [--bench dataplane,limits] [--full] [-- <arguments for each benchmark>]";

/** The command line, checked. */
function parseArgs(argv: string[]): {
  ref: string;
  rounds: number;
  benches: string[];
  quick: boolean;
  extra: string[];
} {
  const out = { ref: "", rounds: 2, benches: ["dataplane", "limits"], quick: true, extra: [] as string[] };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") {
      out.extra = argv.slice(i + 1);
      break;
    }
    if (a === "--rounds" && /^\d+$/.test(argv[i + 1] ?? "")) out.rounds = Math.max(1, Number(argv[++i]));
    else if (a === "--bench" && argv[i + 1]) out.benches = argv[++i].split(",").filter(Boolean);
    else if (a === "--full") out.quick = false;
    else if (!a.startsWith("-") && !out.ref) out.ref = a;
    else {
      console.error(`unknown argument "${a}"\n${USAGE}`);
      process.exit(2);
    }
  }
  if (!out.ref) {
    console.error(USAGE);
    process.exit(2);
  }
  for (const b of out.benches) {
    if (!/^[a-z0-9-]+$/.test(b) || !existsSync(join(ROOT, "bench", `${b}.ts`))) {
      console.error(`there is no benchmark bench/${b}.ts`);
      process.exit(2);
    }
  }
  return out;
}

/**
 * Every figure of the tables in a benchmark's output, by name: `<table title> | <row's name> | <column>`
 * (a row's name: its first cell, and its other cells that are words).
 * Columns are cut where the dashes line says, so empty cells stay empty.
 */
export function figuresOf(output: string): Map<string, number> {
  const lines = output.split("\n");
  const out = new Map<string, number>();
  for (let i = 1; i < lines.length; i++) {
    if (!/^-+( +-+)*$/.test(lines[i])) continue;
    const spans: [number, number][] = [];
    for (const m of lines[i].matchAll(/-+/g)) spans.push([m.index!, m.index! + m[0].length]);
    const cut = (line: string) =>
      spans.map(([a, b], k) => line.slice(a, k === spans.length - 1 ? undefined : b).trim());
    const header = cut(lines[i - 1]);
    // The table's name: the title line printTable puts above it (up to its first parenthesis), else its header.
    const title = (i >= 2 ? lines[i - 2].trim() : "").split(" (")[0];
    const table = title && !/^-+/.test(title) ? title : header.join(" ");
    for (let j = i + 1; j < lines.length && lines[j].trim(); j++) {
      const cells = cut(lines[j]);
      const number = (c: string) => (/^[-+]?\d+(\.\d+)?(%|x| ms)?$/.test(c) ? Number.parseFloat(c) : undefined);
      // The row's name: its first cell (`c=64` when a number), and the other cells that are words.
      const first = number(cells[0]) === undefined ? cells[0] : `${header[0]}=${cells[0]}`;
      // Verdicts (PASS, MISS, met) are not part of a row's name: they may differ between the two sides.
      const label = [
        first,
        ...cells.slice(1).filter((c) => c && !/\d/.test(c) && !/^(PASS|MISS|met|not met)$/.test(c)),
      ].join(" ");
      cells.forEach((c, k) => {
        const v = k === 0 ? undefined : number(c);
        if (v !== undefined && header[k]) out.set(`${table} | ${label} | ${header[k]}`, v);
      });
    }
  }
  return out;
}

/** Runs one benchmark in `dir`; its output (it is printed too, indented, so a failure can be read). */
async function runIn(dir: string, bench: string, quick: boolean, extra: string[]): Promise<string> {
  const p = Bun.spawn(["bun", `bench/${bench}.ts`, ...(quick ? ["--quick"] : []), ...extra], {
    cwd: dir,
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`bench/${bench}.ts in ${dir} exited with ${code}:\n${out}\n${err}`);
  return out;
}

async function main(): Promise<void> {
  const { ref, rounds, benches, quick, extra } = parseArgs(process.argv.slice(2));
  const a = worktreeOf(ref);
  const head = git(["rev-parse", "--short=12", "HEAD"]);
  const dirty = git(["status", "--porcelain", "--untracked-files=no"]) ? " + uncommitted changes" : "";
  console.log(
    `A = ${ref} (${a.commit.slice(0, 12)}), B = working tree (${head}${dirty}); ${rounds} rounds, ABBA order${quick ? ", --quick" : ""}`,
  );
  for (const bench of benches) {
    const seen = { A: new Map<string, number[]>(), B: new Map<string, number[]>() };
    for (let r = 0; r < rounds; r++) {
      const order: ("A" | "B")[] = r % 2 === 0 ? ["A", "B"] : ["B", "A"];
      for (const side of order) {
        const out = await runIn(side === "A" ? a.dir : ROOT, bench, quick, extra);
        for (const [k, v] of figuresOf(out)) seen[side].set(k, [...(seen[side].get(k) ?? []), v]);
        console.log(`  bench/${bench}.ts round ${r + 1} ${side} done`);
      }
    }
    const rows = [...seen.B.keys()]
      .filter((k) => seen.A.has(k))
      .map((k) => {
        const [ma, mb] = [summarize(seen.A.get(k)!).p50, summarize(seen.B.get(k)!).p50];
        return [k, fmt(ma), fmt(mb), ma === 0 ? "n/a" : `${fmt(mb / ma)}x`];
      });
    console.log(`\nbench/${bench}.ts: medians over ${rounds} runs each`);
    console.log(formatTable(["figure", "A (ref)", "B (work)", "B/A"], rows));
  }
}

if (import.meta.main) await main();
