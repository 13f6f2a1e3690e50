/**
 * What bench/ab-steady.ts and bench/floor.ts share: their command line, and a server answering the
 * bench chat request at c=64 round after round, with its CPU per request, p99 and requests/s.
 */
import { closedLoop, cpuMsOf, percentile } from "./lib";

/** The concurrency of every round. */
export const CONCURRENCY = 64;
/** The bench workload's model. */
export const MODEL = "bench-model";

/** `[<ref>] [--rounds N] [--seconds S]`, checked: prints `usage` and exits 2 on anything else. */
export function steadyArgs(
  argv: string[],
  usage: string,
  rounds: number,
): { ref: string | undefined; rounds: number; seconds: number } {
  const out = { ref: undefined as string | undefined, rounds, seconds: 4 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--rounds" && /^\d+$/.test(argv[i + 1] ?? "")) out.rounds = Math.max(2, Number(argv[++i]));
    else if (a === "--seconds" && /^\d+(\.\d+)?$/.test(argv[i + 1] ?? "")) out.seconds = Number(argv[++i]);
    else if (!a.startsWith("-") && !out.ref) out.ref = a;
    else {
      console.error(usage);
      process.exit(2);
    }
  }
  return out;
}

/** A side's figures, a value per round. */
export interface Figures {
  cpu: number[];
  p99: number[];
  rps: number[];
}

/**
 * A server (process `pid`) answering the bench chat request at `url` with `headers`: `run(ms)` adds a
 * round at c=64 to its figures (the process's user+system CPU per request from /proc).
 */
export function chatSide(name: string, pid: number, url: string, headers: Record<string, string>) {
  const init = {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "one two three" }], max_tokens: 8 }),
  };
  const once = async () => {
    const r = await fetch(url, init);
    await r.arrayBuffer();
    if (r.status !== 200) throw new Error(`${name}: ${r.status}`);
  };
  const figures: Figures = { cpu: [], p99: [], rps: [] };
  return {
    name,
    figures,
    warm: () => closedLoop({ concurrency: CONCURRENCY, requests: 3000, fn: once }),
    async run(ms: number) {
      const before = cpuMsOf(pid) ?? Number.NaN;
      const r = await closedLoop({ concurrency: CONCURRENCY, durationMs: ms, fn: once });
      if (r.errors) throw new Error(`${name}: ${r.errors} failed requests (${r.firstError})`);
      figures.cpu.push((((cpuMsOf(pid) ?? Number.NaN) - before) * 1000) / r.completed);
      figures.p99.push(percentile(r.latencies, 99));
      figures.rps.push(r.rps);
    },
  };
}

/** The median of a side's rounds. */
export const median = (xs: number[]) => percentile(xs, 50);
