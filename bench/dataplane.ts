#!/usr/bin/env bun
/**
 * Data-plane overhead: the same fake vLLM runtime called directly and through inferd, in one run.
 * Measures non-stream chat latency at concurrency 1, throughput at several concurrencies and the
 * time to first token of streams, then prints both figures, the overhead and the ratio, and the
 * aims (informational: the exit code is 0 unless something failed).
 *
 *   bun bench/dataplane.ts [--quick] [--cpu-prof-dir DIR] [--store sqlite|postgres | --database-url postgres://…]
 *
 * `--cpu-prof-dir` runs inferd under `bun --cpu-prof` and leaves its profile in DIR.
 * `--store postgres` runs inferd in PostgreSQL mode on a server started for the run with default,
 * durable settings (`bench/pg.ts`); `--database-url` uses that server instead (a new database in
 * it). Both then also print one line per aim of cluster mode. Without them: the embedded SQLite store.
 * Direct and through-inferd phases alternate (ABBA) so drift on a shared machine hits both alike.
 */
import {
  closedLoop,
  createBenchWorkload,
  fmt,
  hardLimit,
  printTable,
  startInferdForBench,
  summarize,
  withCpu,
  type BenchInferd,
  type Cell,
  type LoadResult,
  parseQuickArgs,
} from "./lib";
import { startBenchPostgres, STORE_USAGE, takeStoreArgs, type BenchPostgres } from "./pg";

const USAGE = `usage: bun bench/dataplane.ts [--quick] [--cpu-prof-dir DIR] ${STORE_USAGE}`;

const { choice: STORE, rest: ARGV } = takeStoreArgs(process.argv.slice(2));
const { quick: QUICK, profileDir: PROFILE_DIR } = parseQuickArgs(ARGV, USAGE);

/** The runtime's floor: non-stream answer delay, first-token delay and per-token delay (ms). */
const DELAY_MS = 20;
const FIRST_TOKEN_MS = 20;
const TOKEN_MS = 2;
/** Tokens per streamed answer. */
const STREAM_TOKENS = 8;
const MODEL = "bench-model";
const CONCURRENCIES = [1, 8, 64];
/** The whole run must end within this, cleanup included. */
const HARD_LIMIT_MS = 5 * 60_000;

/** How much to measure: rounds alternate direct/inferd order; counts are per side and round. */
const PLAN = QUICK
  ? { rounds: 2, latencyRequests: 40, throughputMs: 800, streams: 20, warmupRequests: 100, idleMs: 1000 }
  : { rounds: 4, latencyRequests: 100, throughputMs: 2000, streams: 50, warmupRequests: 400, idleMs: 3000 };

/** The aims this benchmark reports on. */
const AIM_P50_OVERHEAD_MS = 1;
const AIM_C64_RATIO = 0.9;
/** inferd's event loop may stall at most this long under c=64 load (ms). */
const AIM_STALL_MS = 5;
/** The window of inferd's stall gauge (src/usage/lag.ts WINDOW_S), in seconds. */
const STALL_WINDOW_S = 10;
/** The project base URL (routed by `model`) may add at most this to the workload base URL's p50 (ms). */
const AIM_PROJECT_ROUTE_MS = 0.1;

/** One way to reach the runtime: directly, or through inferd's data plane (a workload's base URL or its project's). */
interface Side {
  name: "direct" | "inferd" | "project";
  chatUrl: string;
  headers: Record<string, string>;
}

const words = "one two three four five six seven eight nine ten eleven twelve";
const chatBody = JSON.stringify({
  model: MODEL,
  messages: [{ role: "user", content: words }],
  max_tokens: STREAM_TOKENS,
});
const streamBody = JSON.stringify({
  model: MODEL,
  messages: [{ role: "user", content: words }],
  max_tokens: STREAM_TOKENS,
  stream: true,
});

/** One non-stream chat completion, body read to the end; throws unless 200. */
async function chatOnce(side: Side): Promise<void> {
  const r = await fetch(side.chatUrl, { method: "POST", headers: side.headers, body: chatBody });
  const bytes = await r.arrayBuffer();
  if (r.status !== 200)
    throw new Error(`${side.name}: HTTP ${r.status} ${new TextDecoder().decode(bytes).slice(0, 200)}`);
}

/** One streamed chat completion: ms to the first content token and to the end of the stream. */
async function streamOnce(side: Side): Promise<{ ttft: number; total: number }> {
  const t0 = performance.now();
  const r = await fetch(side.chatUrl, { method: "POST", headers: side.headers, body: streamBody });
  if (r.status !== 200 || !r.body)
    throw new Error(`${side.name}: stream HTTP ${r.status} ${(await r.text()).slice(0, 200)}`);
  const decoder = new TextDecoder();
  let text = "";
  let ttft = NaN;
  for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) {
    text += decoder.decode(chunk, { stream: true });
    if (Number.isNaN(ttft) && /"content":"[^"]/.test(text)) ttft = performance.now() - t0;
  }
  const total = performance.now() - t0;
  if (Number.isNaN(ttft) || !text.includes("data: [DONE]"))
    throw new Error(`${side.name}: stream without a token or [DONE]: ${text.slice(0, 200)}`);
  return { ttft, total };
}

/** Runs `fn` on both sides for `rounds` rounds, alternating which goes first; results per side. */
async function alternate<T>(
  sides: [Side, Side],
  rounds: number,
  fn: (side: Side) => Promise<T>,
): Promise<Record<Side["name"], T[]>> {
  const out: Record<Side["name"], T[]> = { direct: [], inferd: [], project: [] };
  for (let r = 0; r < rounds; r++) {
    for (const side of r % 2 === 0 ? sides : [sides[1], sides[0]]) out[side.name].push(await fn(side));
  }
  return out;
}

/** Fails on any failed request of a load run, naming the side. */
function checked(side: Side, r: LoadResult): LoadResult {
  if (r.errors > 0)
    throw new Error(
      `${side.name} at concurrency ${r.concurrency}: ${r.errors} failed requests, first: ${r.firstError}`,
    );
  return r;
}

/** Sequential requests and streams (warmup): validates both sides and lets connections and JITs settle. */
async function warmUp(sides: [Side, Side]): Promise<void> {
  for (const side of sides) {
    const r = await fetch(side.chatUrl, { method: "POST", headers: side.headers, body: chatBody });
    const body = (await r.json()) as { choices?: { message?: { content?: string } }[] };
    if (r.status !== 200 || !body.choices?.[0]?.message?.content)
      throw new Error(`${side.name}: unexpected answer ${r.status} ${JSON.stringify(body).slice(0, 200)}`);
    checked(side, await closedLoop({ concurrency: 8, requests: PLAN.warmupRequests, fn: () => chatOnce(side) }));
    checked(side, await closedLoop({ concurrency: 64, requests: PLAN.warmupRequests, fn: () => chatOnce(side) }));
    for (let i = 0; i < 10; i++) await streamOnce(side);
  }
}

/** A throughput run with the CPU time (ms) the client, inferd and the runtime used during it. */
type Run = LoadResult & { cpuMs: Record<string, number> };

/** What one run measured, per side. */
/** Samples of the direct and through-inferd sides. */
type Pair = Record<"direct" | "inferd", number[]>;

interface Figures {
  latency: Pair;
  ttft: Pair;
  streamTotal: Pair;
  /** Latency at concurrency 1 on the workload's base URL and on the project's (routed by model), alternating. */
  projectRoute: { workload: number[]; project: number[] };
  throughput: { concurrency: number; direct: Run[]; inferd: Run[] }[];
  /** inferd's longest event-loop stall (ms) right after each of its throughput runs, per concurrency. */
  stalls: Map<number, Stall[]>;
  /** inferd's JS heap allocation per request (bytes) in each of its throughput runs, per concurrency. */
  allocation: Map<number, number[]>;
}

/** Processes whose CPU time is reported (undefined: not known). */
type Pids = { inferd: number; runtime: number | undefined };

/** Every measurement, in order: latency at concurrency 1, throughput per concurrency, streams. */
async function measure(sides: [Side, Side], project: Side, pids: Pids, probe: () => Promise<Probe>): Promise<Figures> {
  const step = (what: string) => console.log(`  ${what}…`);
  step(
    `project route: ${PLAN.rounds} × ${PLAN.latencyRequests} sequential requests on the workload's and the project's base URL`,
  );
  const routes = await alternate([sides[1], project], PLAN.rounds, async (side) =>
    checked(side, await closedLoop({ concurrency: 1, requests: PLAN.latencyRequests, fn: () => chatOnce(side) })),
  );
  step(`latency: ${PLAN.rounds} × ${PLAN.latencyRequests} sequential requests per side`);
  const lat = await alternate(sides, PLAN.rounds, async (side) =>
    checked(side, await closedLoop({ concurrency: 1, requests: PLAN.latencyRequests, fn: () => chatOnce(side) })),
  );
  const throughput: Figures["throughput"] = [];
  const stalls: Figures["stalls"] = new Map();
  const allocation: Figures["allocation"] = new Map();
  for (const c of CONCURRENCIES) {
    step(`throughput at concurrency ${c}: ${PLAN.rounds} × ${PLAN.throughputMs} ms per side`);
    const got = await alternate(sides, PLAN.rounds, async (side) => {
      const before = side.name === "inferd" ? await probe() : undefined;
      const { result, cpuMs } = await withCpu(pids, () =>
        closedLoop({ concurrency: c, durationMs: PLAN.throughputMs, fn: () => chatOnce(side) }),
      );
      if (before) {
        const after = await probe();
        stalls.set(c, [...(stalls.get(c) ?? []), after]);
        const perRequest = (after.allocated - before.allocated) / Math.max(1, result.completed);
        allocation.set(c, [...(allocation.get(c) ?? []), perRequest]);
      }
      return { ...checked(side, result), cpuMs };
    });
    throughput.push({ concurrency: c, ...got });
  }
  step(`time to first token: ${PLAN.rounds} × ${PLAN.streams} sequential streams per side`);
  const streams = await alternate(sides, PLAN.rounds, async (side) => {
    const runs: { ttft: number; total: number }[] = [];
    for (let i = 0; i < PLAN.streams; i++) runs.push(await streamOnce(side));
    return runs;
  });
  const pick = (k: "ttft" | "total") => ({
    direct: streams.direct.flat().map((s) => s[k]),
    inferd: streams.inferd.flat().map((s) => s[k]),
  });
  return {
    latency: { direct: lat.direct.flatMap((r) => r.latencies), inferd: lat.inferd.flatMap((r) => r.latencies) },
    ttft: pick("ttft"),
    streamTotal: pick("total"),
    projectRoute: {
      workload: routes.inferd.flatMap((r) => r.latencies),
      project: routes.project.flatMap((r) => r.latencies),
    },
    throughput,
    stalls,
    allocation,
  };
}

/** A longest event-loop stall (ms): whole, and less the time inferd's thread waited for a CPU meanwhile. */
interface Stall {
  whole: number;
  own: number;
}

/** What inferd's /metrics says of its event loop and heap: the stalls of the last seconds, and the bytes allocated so far. */
interface Probe extends Stall {
  allocated: number;
}

/** inferd's longest event-loop stalls of the last seconds (`inferd_event_loop_{,own_}stall_seconds`) and its heap allocation so far. */
async function loopProbe(inferd: BenchInferd): Promise<Probe> {
  const r = await fetch(`${inferd.url}/metrics`, { headers: { authorization: `Bearer ${inferd.adminToken}` } });
  const text = await r.text();
  const value = (name: string) => {
    const m = new RegExp(`^${name} (\\S+)$`, "m").exec(text);
    return m ? Number(m[1]) : NaN;
  };
  return {
    whole: value("inferd_event_loop_stall_seconds") * 1000,
    own: value("inferd_event_loop_own_stall_seconds") * 1000,
    allocated: value("inferd_heap_allocated_bytes_total"),
  };
}

/** Requests per second over every round of a side. */
const pooledRps = (runs: LoadResult[]) =>
  runs.reduce((a, r) => a + r.completed, 0) / (runs.reduce((a, r) => a + r.elapsedMs, 0) / 1000);

const signed = (x: number) => `${x >= 0 ? "+" : ""}${fmt(x)}`;

/** Prints the comparison, the load runs, CPU per request and the aims. */
function report(f: Figures): void {
  const rows: Cell[][] = [];
  const msRows = (label: string, samples: Pair) => {
    const d = summarize(samples.direct);
    const v = summarize(samples.inferd);
    rows.push([`${label} p50 (ms)`, fmt(d.p50), fmt(v.p50), signed(v.p50 - d.p50), ""]);
    rows.push([`${label} p99 (ms)`, fmt(d.p99), fmt(v.p99), signed(v.p99 - d.p99), ""]);
  };
  msRows("latency c=1", f.latency);
  msRows("TTFT", f.ttft);
  msRows("stream total", f.streamTotal);
  for (const t of f.throughput) {
    const d = pooledRps(t.direct);
    const v = pooledRps(t.inferd);
    rows.push([`throughput c=${t.concurrency} (req/s)`, fmt(d, 1), fmt(v, 1), "", `${fmt(v / d)}x`]);
  }
  printTable(
    ["measure", "direct", "inferd", "overhead ms", "ratio"],
    rows,
    "Direct vs through inferd (same runtime process)",
  );

  const loadRows = f.throughput.flatMap((t) =>
    (["direct", "inferd"] as const).map((side) => {
      const s = summarize(t[side].flatMap((r) => r.latencies));
      return [
        t.concurrency,
        side,
        s.n,
        fmt(pooledRps(t[side]), 1),
        t[side].map((r) => fmt(r.rps, 0)).join(" / "),
        fmt(s.p50),
        fmt(s.p99),
      ];
    }),
  );
  printTable(
    ["c", "side", "requests", "req/s", "req/s per round", "p50 ms", "p99 ms"],
    loadRows,
    "Throughput runs (closed loop, per round alternating order)",
  );

  const perRequest = (runs: Run[], who: string) =>
    (runs.reduce((a, r) => a + r.cpuMs[who], 0) * 1000) / runs.reduce((a, r) => a + r.completed, 0);
  const cpuRows = f.throughput.flatMap((t) =>
    (["direct", "inferd"] as const).map((side) => {
      const [client, inferd, runtime] = ["client", "inferd", "runtime"].map((who) => perRequest(t[side], who));
      return [
        t.concurrency,
        side,
        fmt(client, 0),
        side === "direct" ? "" : fmt(inferd, 0),
        fmt(runtime, 0),
        fmt(client + runtime + (side === "direct" ? 0 : inferd), 0),
      ];
    }),
  );
  printTable(
    ["c", "side", "client", "inferd", "runtime", "total"],
    cpuRows,
    "CPU time per request (µs, user+system, all threads; 10 ms resolution per run)",
  );

  printTable(
    ["c", "longest stall ms", "own stall ms", "per round"],
    [...f.stalls].map(([c, s]) => [
      c,
      fmt(Math.max(...s.map((x) => x.whole))),
      fmt(Math.max(...s.map((x) => x.own))),
      s.map((x) => `${fmt(x.whole)} (${fmt(x.own)})`).join(" / "),
    ]),
    `inferd's event loop: its longest stall in the ${STALL_WINDOW_S} s up to the end of each throughput run (a lag probe, /metrics); own: less the time its thread waited for a CPU meanwhile (the client, the runtime and inferd share the cores)`,
  );

  printTable(
    ["c", "KB per request", "per round"],
    [...f.allocation].map(([c, b]) => [c, fmt(summarize(b).p50 / 1000), b.map((x) => fmt(x / 1000)).join(" / ")]),
    "inferd's JS heap allocation per request in each throughput run (its heap's growth summed over readings 500 ms apart, /metrics; median of the rounds)",
  );

  const overhead = summarize(f.latency.inferd).p50 - summarize(f.latency.direct).p50;
  const c64 = f.throughput.find((t) => t.concurrency === 64);
  const ratio = c64 ? pooledRps(c64.inferd) / pooledRps(c64.direct) : NaN;
  const c64Stall = Math.max(...(f.stalls.get(64) ?? [{ whole: NaN }]).map((x) => x.whole));
  const c64Own = Math.max(...(f.stalls.get(64) ?? [{ own: NaN }]).map((x) => x.own));
  const verdict = (ok: boolean) => (ok ? "PASS" : "MISS");
  printTable(
    ["aim", "measured", "result"],
    [
      [
        `p50 overhead under ${AIM_P50_OVERHEAD_MS} ms`,
        `${signed(overhead)} ms`,
        verdict(overhead < AIM_P50_OVERHEAD_MS),
      ],
      [
        `throughput at concurrency 64 at least ${AIM_C64_RATIO * 100}% of direct`,
        `${fmt(ratio * 100, 1)}%`,
        verdict(ratio >= AIM_C64_RATIO),
      ],
      [
        `event loop's longest stall under c=64 load at most ${AIM_STALL_MS} ms`,
        `${fmt(c64Stall)} ms`,
        verdict(c64Stall <= AIM_STALL_MS),
      ],
      [
        `of it inferd's own (less its wait for a CPU) at most ${AIM_STALL_MS} ms`,
        `${fmt(c64Own)} ms`,
        verdict(c64Own <= AIM_STALL_MS),
      ],
    ],
    "Aims (informational)",
  );
  const wp = summarize(f.projectRoute.workload).p50;
  const pp = summarize(f.projectRoute.project).p50;
  console.log(
    `project route vs workload route: p50 ${fmt(pp)} ms vs ${fmt(wp)} ms (${signed(pp - wp)} ms; aim ≤ +${AIM_PROJECT_ROUTE_MS} ms: ${verdict(pp - wp <= AIM_PROJECT_ROUTE_MS)})`,
  );
  if (STORE.store === "postgres") {
    const met = (ok: boolean) => (ok ? "met" : "not met");
    console.log(
      `postgres: p50 overhead ${signed(overhead)} ms (aim ≤ +${AIM_P50_OVERHEAD_MS} ms: ${met(overhead <= AIM_P50_OVERHEAD_MS)}); c=64 ${fmt(ratio)}x direct (aim ≥ ${AIM_C64_RATIO}x: ${met(ratio >= AIM_C64_RATIO)})`,
    );
  }
}

async function main(): Promise<number> {
  const delays = {
    FAKE_DELAY_MS: String(DELAY_MS),
    FAKE_FIRST_TOKEN_MS: String(FIRST_TOKEN_MS),
    FAKE_TOKEN_MS: String(TOKEN_MS),
    FAKE_LOAD_MS: "0",
  };
  let inferd: BenchInferd | undefined;
  let pg: BenchPostgres | undefined;
  const limit = hardLimit(HARD_LIMIT_MS, async () => {
    await inferd?.stop();
    await pg?.stop();
  });
  try {
    console.log(
      `dataplane benchmark${QUICK ? " (quick)" : ""}: runtime delay ${DELAY_MS} ms (non-stream), first token ${FIRST_TOKEN_MS} ms, ${STREAM_TOKENS} tokens at ${TOKEN_MS} ms`,
    );
    const bunFlags = PROFILE_DIR ? ["--cpu-prof", "--cpu-prof-dir", PROFILE_DIR] : [];
    if (PROFILE_DIR) console.log("inferd runs under the CPU profiler: its figures are slower than without it");
    const storeEnv: Record<string, string> = {};
    if (STORE.store === "postgres") {
      pg = await startBenchPostgres({ databaseUrl: STORE.databaseUrl });
      console.log(`store: ${pg.describe()}`);
      storeEnv.INFERD_DATABASE_URL = pg.url;
    }
    inferd = await startInferdForBench({ ...delays, ...storeEnv }, { bunFlags });
    const wl = await createBenchWorkload(inferd, { model: MODEL });
    console.log(
      `inferd ${inferd.url} (pid ${inferd.pid}); runtime ${wl.runtimeUrl}${wl.runtimePid ? ` (pid ${wl.runtimePid})` : ""}`,
    );
    const headers = { "content-type": "application/json", authorization: `Bearer ${wl.liveKey}` };
    const sides: [Side, Side] = [
      { name: "direct", chatUrl: `${wl.runtimeUrl}/v1/chat/completions`, headers },
      { name: "inferd", chatUrl: `${wl.endpoint}/v1/chat/completions`, headers },
    ];
    const project: Side = {
      name: "project",
      chatUrl: `${inferd.url}/endpoint/${wl.projectSlug}/v1/chat/completions`,
      headers,
    };
    console.log("  warming up…");
    await warmUp(sides);
    checked(project, await closedLoop({ concurrency: 8, requests: PLAN.warmupRequests, fn: () => chatOnce(project) }));
    const pids = { inferd: inferd.pid, runtime: wl.runtimePid };
    const pgBefore = pg?.cpuMs() ?? NaN;
    const idle = await withCpu(pids, () => Bun.sleep(PLAN.idleMs));
    const perSecond = (ms: number) => `${fmt((ms * 1000) / PLAN.idleMs, 0)} ms/s`;
    const pgIdle = pg?.started ? `, postgres ${perSecond(pg.cpuMs() - pgBefore)}` : "";
    console.log(
      `  idle CPU (background work, not per request): inferd ${perSecond(idle.cpuMs.inferd)}, runtime ${perSecond(idle.cpuMs.runtime)}${pgIdle}`,
    );
    const pgMeasureBefore = pg?.cpuMs() ?? NaN;
    const t0 = performance.now();
    const figures = await measure(sides, project, pids, () => loopProbe(inferd!));
    if (pg?.started)
      console.log(
        `  postgres CPU while measuring: ${fmt((pg.cpuMs() - pgMeasureBefore) / ((performance.now() - t0) / 1000), 0)} ms/s (the hot path should not touch the database)`,
      );
    report(figures);
    return 0;
  } catch (e) {
    if (limit.fired) return 2; // stopped on purpose; the failures that caused are no finding
    console.error(`\nbenchmark failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    return 1;
  } finally {
    await inferd?.stop();
    await pg?.stop();
    limit.clear();
    if (PROFILE_DIR) console.log(`\ninferd CPU profile written to ${PROFILE_DIR}`);
  }
}

process.exit(await main());
