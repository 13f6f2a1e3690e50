#!/usr/bin/env bun
/**
 * Two hosts, one runtime (issue 21): two `inferd serve` hosts on one PostgreSQL (each its own data
 * dir, one admin token) and ONE fake vLLM runtime: a workload with one replica, under host A's local
 * agent (host B runs no local agent, so A's machine is the cluster's only one and B reaches the
 * replica through that agent's link to B). The same closed-loop load (64 at a time, non-stream
 * chats, the runtime answering after 20 ms) goes, in alternating order within each round:
 *   - all to host A ("one host": the replica's own host, a single-host set-up's path),
 *   - spread over both hosts (worker i sends to host i mod 2),
 *   - all to host B (for reference: every request crosses the agent link).
 * Prints each mode's throughput and latency, the CPU each process used per request, and the aim:
 * spread over both hosts ≥ 0.9× the throughput of one host. The exit code is 0 unless something
 * failed (2 when stopped by the time limit).
 *
 *   bun bench/cluster.ts [--quick] [--database-url postgres://…] [--cpu-prof-dir DIR]
 *
 * `--cpu-prof-dir` runs both hosts under `bun --cpu-prof` and leaves their profiles in DIR.
 * Without `--database-url` a PostgreSQL with default, durable settings is started for the run
 * (`bench/pg.ts`); with it, a new database is made in that server and dropped afterwards.
 */
import { randomBytes } from "node:crypto";
import {
  AdminError,
  closedLoop,
  createBenchWorkload,
  fakeStats,
  fmt,
  machineLoad,
  parseQuickArgs,
  printTable,
  runBenchmark,
  startInferdForBench,
  summarize,
  withCpu,
  type BenchInferd,
  type Cell,
  type LoadResult,
} from "./lib";
import { startBenchPostgres, takeStoreArgs } from "./pg";

const USAGE = "usage: bun bench/cluster.ts [--quick] [--database-url postgres://…] [--cpu-prof-dir DIR]";

const { choice: STORE, rest: ARGV } = takeStoreArgs(process.argv.slice(2));
if (STORE.store !== "postgres" && process.argv.includes("--store")) {
  console.error(`a cluster needs PostgreSQL: drop --store sqlite\n${USAGE}`);
  process.exit(2);
}
const { quick: QUICK, profileDir: PROFILE_DIR } = parseQuickArgs(ARGV, USAGE);

/** The runtime's answer delay (ms), the client's concurrency and the model. */
const DELAY_MS = 20;
const CONCURRENCY = 64;
const MODEL = "cluster-model";
/** Slots of the one replica: inferd's queue never holds requests back. */
const SLOTS = 1000;
const AIM_RATIO = 0.9;
/** A request that takes longer than this counts as failed (a stall ends the run instead of hanging it). */
const REQUEST_TIMEOUT_MS = 20_000;
const HARD_LIMIT_MS = 5 * 60_000;
/** How long host B may take to route to the replica under host A's machine. */
const ROUTE_TIMEOUT_MS = 60_000;

/** Rounds alternate the order of the modes; each mode runs `measureMs` per round. */
const PLAN = QUICK
  ? { rounds: 2, measureMs: 1500, warmupRequests: 200 }
  : { rounds: 4, measureMs: 4000, warmupRequests: 600 };

const words = "one two three four five six seven eight nine ten eleven twelve";
const chatBody = JSON.stringify({ model: MODEL, messages: [{ role: "user", content: words }], max_tokens: 8 });

/** One non-stream chat completion through `endpoint`, body read to the end; throws unless 200. */
async function chatOnce(endpoint: string, key: string): Promise<void> {
  const r = await fetch(`${endpoint}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${key}` },
    body: chatBody,
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  const bytes = await r.arrayBuffer();
  if (r.status !== 200)
    throw new Error(`${endpoint}: HTTP ${r.status} ${new TextDecoder().decode(bytes).slice(0, 200)}`);
}

/** Polls a chat through `endpoint` until one answers 200 (host B learning of the replica); fails after `timeoutMs` with the last error. */
async function waitRouting(endpoint: string, key: string, timeoutMs: number): Promise<number> {
  const t0 = performance.now();
  for (;;) {
    try {
      await chatOnce(endpoint, key);
      return performance.now() - t0;
    } catch (e) {
      if (performance.now() - t0 > timeoutMs)
        throw new Error(
          `no answer through ${endpoint} within ${timeoutMs} ms: ${e instanceof Error ? e.message : String(e)}`,
        );
    }
    await Bun.sleep(100);
  }
}

/** A way to send the load: which host each closed-loop worker sends to. */
interface Mode {
  name: "one host" | "two hosts" | "host B alone";
  /** The host worker `w` sends to: 0 is A, 1 is B. */
  hostOf(w: number): 0 | 1;
}

/** One measured run of a mode, with each process's CPU time (ms) and the requests each host took. */
type Run = LoadResult & { cpuMs: Record<string, number>; perHost: number[] };

/** Runs `mode` for `durationMs` (or `requests`) at CONCURRENCY; fails on any failed request. */
async function runMode(
  mode: Mode,
  endpoints: [string, string],
  key: string,
  pids: Record<string, number | undefined>,
  pgCpu: () => number,
  load: { durationMs?: number; requests?: number },
): Promise<Run> {
  const perHost = [0, 0];
  const pgBefore = pgCpu();
  const { result, cpuMs } = await withCpu(pids, () =>
    closedLoop({
      concurrency: CONCURRENCY,
      ...load,
      fn: async (w) => {
        const host = mode.hostOf(w);
        await chatOnce(endpoints[host], key);
        perHost[host]++;
      },
    }),
  );
  cpuMs.postgres = pgCpu() - pgBefore;
  if (result.errors > 0) throw new Error(`${mode.name}: ${result.errors} failed requests, first: ${result.firstError}`);
  return { ...result, cpuMs, perHost };
}

/** Requests per second over every round of a mode. */
const pooledRps = (runs: LoadResult[]) =>
  runs.reduce((a, r) => a + r.completed, 0) / (runs.reduce((a, r) => a + r.elapsedMs, 0) / 1000);

process.exit(
  await runBenchmark(HARD_LIMIT_MS, async (cleanup) => {
    console.log(
      `cluster benchmark${QUICK ? " (quick)" : ""}: two hosts on one PostgreSQL, one runtime (delay ${DELAY_MS} ms), ${CONCURRENCY} at a time; ${machineLoad()}`,
    );
    const pg = await startBenchPostgres({ databaseUrl: STORE.databaseUrl });
    cleanup.add("postgres", () => pg.stop());
    console.log(`store: ${pg.describe()}`);
    const token = `ik_admin_bench-${randomBytes(24).toString("hex")}`;
    const common = { INFERD_DATABASE_URL: pg.url, INFERD_ADMIN_TOKEN: token, FAKE_DELAY_MS: String(DELAY_MS) };
    // Host A first (it migrates the new database and leads), with the cluster's one machine.
    const bunFlags = PROFILE_DIR ? ["--cpu-prof", "--cpu-prof-dir", PROFILE_DIR] : [];
    if (PROFILE_DIR)
      console.log(
        `both hosts run under the CPU profiler (slower); their profiles go to ${PROFILE_DIR} (host A's pid first below)`,
      );
    const a = await startInferdForBench({ ...common, INFERD_LOCAL_AGENT: "1" }, { bunFlags });
    cleanup.add("host A", () => a.stop());
    const b = await startInferdForBench({ ...common, INFERD_LOCAL_AGENT: "0" }, { bunFlags });
    cleanup.add("host B", () => b.stop());
    const wl = await createBenchWorkload(a, { model: MODEL, concurrency: SLOTS });
    const endpointB = `${b.url}/endpoint/${wl.projectSlug}/${wl.workloadSlug}`;
    const routedMs = await waitRouting(endpointB, wl.liveKey, ROUTE_TIMEOUT_MS);
    // The slots set through A reach A's own queue at once; set them through B too, so B's queue does
    // not hold its share back until the agent's next report of the replica.
    await b
      .admin(`/admin/assignments/${wl.assignmentId}`, { method: "PATCH", body: { concurrency: SLOTS } })
      .catch((e) => {
        throw e instanceof AdminError ? new Error(`setting the replica's slots through host B: ${e.message}`) : e;
      });
    console.log(
      `host A ${a.url} (pid ${a.pid}, its local agent runs the replica); host B ${b.url} (pid ${b.pid}, no local agent; routing through A's agent after ${fmt(routedMs / 1000, 1)} s); runtime ${wl.runtimeUrl}${wl.runtimePid ? ` (pid ${wl.runtimePid})` : ""}`,
    );

    const endpoints: [string, string] = [wl.endpoint, endpointB];
    const modes: Mode[] = [
      { name: "one host", hostOf: () => 0 },
      { name: "two hosts", hostOf: (w) => (w % 2 === 0 ? 0 : 1) },
      { name: "host B alone", hostOf: () => 1 },
    ];
    const pids = { "host A": a.pid, "host B": b.pid, runtime: wl.runtimePid };
    const pgCpu = () => pg.cpuMs();
    console.log(`  warming up: ${PLAN.warmupRequests} requests per mode`);
    for (const mode of modes)
      await runMode(mode, endpoints, wl.liveKey, pids, pgCpu, { requests: PLAN.warmupRequests });
    const servedBefore = (await fakeStats(wl.runtimeUrl)).total;
    const runs = new Map<Mode["name"], Run[]>(modes.map((m) => [m.name, []]));
    for (let round = 0; round < PLAN.rounds; round++) {
      const order = round % 2 === 0 ? modes : [...modes].reverse();
      console.log(
        `  round ${round + 1} of ${PLAN.rounds}: ${order.map((m) => m.name).join(", ")} (${PLAN.measureMs} ms each)`,
      );
      for (const mode of order)
        runs
          .get(mode.name)!
          .push(await runMode(mode, endpoints, wl.liveKey, pids, pgCpu, { durationMs: PLAN.measureMs }));
    }
    const served = (await fakeStats(wl.runtimeUrl)).total - servedBefore;
    const sent = [...runs.values()].flat().reduce((n, r) => n + r.completed, 0);
    console.log(`done; the runtime served ${served} of the ${sent} requests measured; ${machineLoad()}`);

    const rows: Cell[][] = modes.map((m) => {
      const rs = runs.get(m.name)!;
      const s = summarize(rs.flatMap((r) => r.latencies));
      const split =
        m.name === "two hosts"
          ? rs.reduce((acc, r) => [acc[0] + r.perHost[0], acc[1] + r.perHost[1]], [0, 0]).join(" / ")
          : "";
      return [
        m.name,
        s.n,
        fmt(pooledRps(rs), 1),
        rs.map((r) => fmt(r.rps, 0)).join(" / "),
        split,
        fmt(s.p50),
        fmt(s.p99),
      ];
    });
    printTable(
      ["mode", "requests", "req/s", "req/s per round", "A / B", "p50 ms", "p99 ms"],
      rows,
      `Closed loop, ${CONCURRENCY} at a time, same runtime (rounds alternate the order)`,
    );
    const who = ["client", "host A", "host B", "runtime", "postgres"];
    const cpuRows: Cell[][] = modes.map((m) => {
      const rs = runs.get(m.name)!;
      const n = rs.reduce((a, r) => a + r.completed, 0);
      const per = who.map((k) => (rs.reduce((a, r) => a + r.cpuMs[k], 0) * 1000) / n);
      return [
        m.name,
        ...per.map((x) => fmt(x, 0)),
        fmt(
          per.filter(Number.isFinite).reduce((a, x) => a + x, 0),
          0,
        ),
      ];
    });
    printTable(
      ["mode", ...who, "total"],
      cpuRows,
      "CPU time per request (µs, user+system, all threads; 10 ms resolution per run)",
    );

    const one = pooledRps(runs.get("one host")!);
    const two = pooledRps(runs.get("two hosts")!);
    const bOnly = pooledRps(runs.get("host B alone")!);
    const ratio = two / one;
    const perRound = runs
      .get("two hosts")!
      .map((r, i) => fmt(r.rps / runs.get("one host")![i].rps))
      .join(" / ");
    console.log(
      `two hosts: ${fmt(two, 0)} req/s vs one host ${fmt(one, 0)} req/s = ${fmt(ratio)}× (aim ≥ ${AIM_RATIO}×: ${ratio >= AIM_RATIO ? "met" : "not met"}); per round ${perRound}`,
    );
    console.log(
      `  host B alone (every request through A's agent link): ${fmt(bOnly, 0)} req/s = ${fmt(bOnly / one)}× one host`,
    );
  }),
);
