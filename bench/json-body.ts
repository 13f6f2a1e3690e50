#!/usr/bin/env bun
/**
 * A coding agent's request body through the data plane's JSON check: the strict UTF-8 decode, the
 * depth scan (src/http.ts `jsonDepth`, which refuses a body nested too deep before it is parsed) and
 * `JSON.parse`, on a body shaped like an agent's turn (~117 KB: 40 messages of source code with
 * escaped quotes, 20 tools). All on the request thread, once per request. With `<ref>`, that ref's
 * src/http.ts (its worktree, as bench/ab.ts makes) is timed alternately with the working tree's and
 * the ratios printed.
 *
 *   bun bench/json-body.ts [<ref>] [--rounds 5]
 */
import { fmt, percentile, printTable, REPO_ROOT } from "./lib";
import { worktreeOf } from "./worktree";

const argv = process.argv.slice(2);
const roundsAt = argv.indexOf("--rounds");
const ROUNDS = roundsAt >= 0 ? Math.max(1, Number(argv[roundsAt + 1]) || 5) : 5;
const ref = argv.find((a, i) => !a.startsWith("-") && argv[i - 1] !== "--rounds");
const PER_ROUND = 300;

const code = 'function f(x) {\n  return "a\\"b" + x; // {[ ]}\n}\n'.repeat(50);
const body = JSON.stringify({
  model: "qwen-coder",
  stream: true,
  messages: Array.from({ length: 40 }, (_, i) => ({
    role: i % 2 ? "assistant" : "user",
    content: `${code} é ü 中文`,
  })),
  tools: Array.from({ length: 20 }, (_, i) => ({
    type: "function",
    function: {
      name: `tool_${i}`,
      description: "does things ".repeat(20),
      parameters: {
        type: "object",
        properties: { a: { type: "string" }, b: { type: "array", items: { type: "number" } } },
      },
    },
  })),
});
const bytes = new TextEncoder().encode(body);

type Http = typeof import("../src/http");
interface Side {
  name: string;
  http: Http;
  depth: number[];
  whole: number[];
}

/** µs per call of `fn`, over PER_ROUND calls. */
function time(fn: () => unknown): number {
  const t0 = performance.now();
  for (let i = 0; i < PER_ROUND; i++) fn();
  return ((performance.now() - t0) * 1000) / PER_ROUND;
}

const sides: Side[] = [];
if (ref) {
  const { dir, commit } = worktreeOf(ref);
  sides.push({
    name: `${ref} (${commit.slice(0, 12)})`,
    http: await import(`${dir}/src/http.ts`),
    depth: [],
    whole: [],
  });
}
sides.push({ name: "working tree", http: await import(`${REPO_ROOT}/src/http.ts`), depth: [], whole: [] });
for (const s of sides) for (let i = 0; i < 50; i++) s.http.parseJsonBytes(bytes); // warm the JIT

for (let round = 0; round < ROUNDS; round++)
  for (const s of round % 2 ? [...sides].reverse() : sides) {
    s.depth.push(time(() => s.http.jsonDepth(body, s.http.MAX_JSON_DEPTH)));
    s.whole.push(time(() => s.http.parseJsonBytes(bytes)));
  }

const median = (xs: number[]) => percentile(xs, 50);
const rows = sides.map((s) => [s.name, fmt(median(s.depth), 1), fmt(median(s.whole), 1)]);
if (sides.length === 2) {
  const [a, b] = sides;
  rows.push([
    "ratio (working tree / ref)",
    `${fmt(median(b.depth) / median(a.depth), 3)}x`,
    `${fmt(median(b.whole) / median(a.whole), 3)}x`,
  ]);
}
printTable(
  ["tree", "depth scan (µs)", "decode + scan + parse (µs)"],
  rows,
  `a coding agent's body (${(bytes.length / 1024).toFixed(0)} KB): medians of ${ROUNDS} rounds of ${PER_ROUND} calls`,
);
