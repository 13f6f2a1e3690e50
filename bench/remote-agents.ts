#!/usr/bin/env bun
/**
 * Remote agents: throughput of ONE workload served by one remote agent, then by two, then by one
 * again (to see drift), all on loopback. The host is `inferd serve --no-local-agent`; each agent is
 * `inferd agent join https://… --token …` with the fake vLLM and nvidia-smi first on PATH (one fake
 * L4), and its runtime answers after a fixed delay. Each agent's replica has 8 slots, so the ideal
 * is 8 / delay per agent, and a second agent should nearly double throughput. Also reports how
 * the requests split between the runtimes (their `GET /fake/stats`) and each process's CPU time.
 * The exit code is 0 unless something failed (2 when stopped by the time limit).
 *
 *   bun bench/remote-agents.ts [--quick] [--cpu-prof-dir DIR]
 *
 * `--cpu-prof-dir` runs the host under `bun --cpu-prof` and leaves its profile in DIR.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fixtureEnv } from "../test/fixtures";
import {
  allReady,
  benchProjectKey,
  Cleanups,
  closedLoop,
  createVllmWorkload,
  fakeStats,
  fmt,
  machineLoad,
  printTable,
  reapRuntimes,
  REPO_ROOT,
  runtimePids,
  spawnWithTail,
  startInferdForBench,
  summarize,
  waitAssignments,
  withCpu,
  type BenchAssignment,
  type BenchInferd,
  type Cell,
  type LoadResult,
  parseQuickArgs,
  runBenchmark,
} from "./lib";

const USAGE = "usage: bun bench/remote-agents.ts [--quick] [--cpu-prof-dir DIR]";

const { quick: QUICK, profileDir: PROFILE_DIR } = parseQuickArgs(process.argv.slice(2), USAGE);

/** The runtime's answer delay (ms), each agent's slots for the workload, and the client's concurrency. */
const DELAY_MS = 50;
const SLOTS = 8;
const CONCURRENCY = 32;
const MODEL = "agents-model";
const WORKER_TIMEOUT_MS = 5000;
const PLAN = QUICK
  ? { measureMs: 3000, warmupRequests: 32, sequential: 40 }
  : { measureMs: 8000, warmupRequests: 64, sequential: 100 };
/** A request that takes longer than this counts as failed (a stall ends the run instead of hanging it). */
const REQUEST_TIMEOUT_MS = 20_000;
const HARD_LIMIT_MS = 4 * 60_000;

/** A remote agent process joined to the host. */
interface BenchAgent {
  name: string;
  workerId: string;
  dataDir: string;
  pid: number;
  output(): string;
}

/**
 * Adds a worker on the host (`POST /admin/workers`), runs `inferd agent join <url> --token <token>`
 * for it in a fresh data dir and waits until the host shows it online. Its stop (SIGTERM, then
 * SIGKILL; then any runtime it left) is added to `cleanup` before anything can fail.
 */
async function startAgent(host: BenchInferd, name: string, cleanup: Cleanups): Promise<BenchAgent> {
  const created = await host.admin("/admin/workers", { body: { name } });
  const url = String(created.join_command).split(" ")[3];
  if (!url?.startsWith("https://")) throw new Error(`unexpected join command: ${created.join_command}`);
  const dataDir = mkdtempSync(join(tmpdir(), `inferd-bench-${name}-`));
  const env = fixtureEnv({ FAKE_GPUS: "1x NVIDIA L4:23034", FAKE_LOAD_MS: "50", FAKE_DELAY_MS: String(DELAY_MS) });
  // Ours are dropped, but not the fixtures' INFERD_RUNTIME_ENV=FAKE_*: the runtimes need their delays.
  for (const k of Object.keys(env)) if (k.startsWith("INFERD_") && k !== "INFERD_RUNTIME_ENV") delete env[k];
  const cmd = [
    process.execPath,
    join(REPO_ROOT, "src/main.ts"),
    "agent",
    "join",
    url,
    "--token",
    created.join_token,
    "--data-dir",
    dataDir,
  ];
  const child = spawnWithTail(cmd, { env, name: `agent ${name}` });
  cleanup.add(`agent ${name}`, async () => {
    await child.stop(15_000);
    reapRuntimes(dataDir, `outlived agent ${name}`);
    rmSync(dataDir, { recursive: true, force: true });
  });
  const deadline = Date.now() + 30_000;
  for (;;) {
    const workers: { id: string; state: string }[] = await host.admin("/admin/workers");
    if (workers.some((w) => w.id === created.id && w.state === "online")) break;
    if (child.proc.exitCode !== null)
      throw new Error(
        `agent ${name} exited (${child.proc.exitCode}) before coming online\n--- its output ---\n${child.output()}`,
      );
    if (Date.now() > deadline)
      throw new Error(`agent ${name} not online within 30 s\n--- its output ---\n${child.output()}`);
    await Bun.sleep(50);
  }
  return { name, workerId: created.id, dataDir, pid: child.pid, output: child.output };
}

/** Places the workload on an agent by hand with `SLOTS` slots; returns the new assignment's id. */
async function place(host: BenchInferd, workloadId: string, agent: BenchAgent): Promise<string> {
  const a = await host.admin(`/admin/workloads/${workloadId}/assignments`, {
    body: { worker_id: agent.workerId, concurrency: SLOTS },
  });
  return a.id;
}

/** The pid of the vLLM runtime an agent runs (from its pid files), if it runs one. */
const runtimePid = (agent: BenchAgent) =>
  runtimePids(agent.dataDir).find((r) => r.argv.some((a) => a.includes("vllm")))?.pid;

/** One measured configuration: the load, requests per runtime (delta of `/fake/stats`), CPU per process. */
interface Phase {
  label: string;
  agents: number;
  load: LoadResult;
  split: { agent: string; requests: number }[];
  cpuMs: Record<string, number>;
}

/** Warms up, then runs the closed loop at `CONCURRENCY` for the planned time, reading each runtime's counters around it. */
async function measure(
  label: string,
  send: () => Promise<void>,
  replicas: { agent: BenchAgent; a: BenchAssignment }[],
  host: BenchInferd,
  all: BenchAgent[],
): Promise<Phase> {
  console.log(`  ${label}: warmup, then ${PLAN.measureMs} ms at concurrency ${CONCURRENCY}`);
  const warm = await closedLoop({ concurrency: 8, requests: PLAN.warmupRequests, fn: send });
  if (warm.errors) throw new Error(`${label} warmup: ${warm.errors} failed, first: ${warm.firstError}`);
  const pids: Record<string, number | undefined> = { host: host.pid };
  for (const agent of all) {
    pids[agent.name] = agent.pid;
    pids[`${agent.name} runtime`] = runtimePid(agent);
  }
  const before = await Promise.all(replicas.map((r) => fakeStats(r.a.base_url!)));
  const { result, cpuMs } = await withCpu(pids, () =>
    closedLoop({ concurrency: CONCURRENCY, durationMs: PLAN.measureMs, maxErrors: 50, fn: send }),
  );
  const after = await Promise.all(replicas.map((r) => fakeStats(r.a.base_url!)));
  if (result.errors) throw new Error(`${label}: ${result.errors} failed requests, first: ${result.firstError}`);
  const split = replicas.map((r, i) => ({ agent: r.agent.name, requests: after[i].total - before[i].total }));
  return { label, agents: replicas.length, load: result, split, cpuMs };
}

/** Sequential requests (concurrency 1) through the host and straight to the agent's runtime, interleaved: ms each. */
async function sequentialLatency(
  viaHost: () => Promise<void>,
  direct: () => Promise<void>,
): Promise<{ host: number[]; direct: number[] }> {
  console.log(
    `  latency at concurrency 1: ${PLAN.sequential} requests through the host and ${PLAN.sequential} straight to the runtime`,
  );
  const out = { host: [] as number[], direct: [] as number[] };
  for (let i = 0; i < PLAN.sequential; i++) {
    for (const [side, fn] of i % 2 === 0
      ? ([
          ["host", viaHost],
          ["direct", direct],
        ] as const)
      : ([
          ["direct", direct],
          ["host", viaHost],
        ] as const)) {
      const t = performance.now();
      await fn();
      out[side].push(performance.now() - t);
    }
  }
  return out;
}

/** Prints throughput and latency per phase, the 2-vs-1 ratio, the split and CPU per request. */
function report(phases: Phase[], agents: BenchAgent[], seq: { host: number[]; direct: number[] }): void {
  const [h, d] = [summarize(seq.host), summarize(seq.direct)];
  printTable(
    ["path", "n", "p50 ms", "p90 ms", "p99 ms"],
    [
      ["client → runtime (direct)", d.n, fmt(d.p50), fmt(d.p90), fmt(d.p99)],
      ["client → host → agent → runtime", h.n, fmt(h.p50), fmt(h.p90), fmt(h.p99)],
      ["remote path overhead", "", fmt(h.p50 - d.p50), fmt(h.p90 - d.p90), fmt(h.p99 - d.p99)],
    ],
    `Latency at concurrency 1 (1 agent; the runtime answers after ${DELAY_MS} ms)`,
  );
  const ideal = (n: number) => (n * SLOTS * 1000) / DELAY_MS;
  printTable(
    ["configuration", "requests", "req/s", "ideal req/s", "of ideal", "p50 ms", "p99 ms", "errors"],
    phases.map((p) => {
      const s = summarize(p.load.latencies);
      return [
        p.label,
        p.load.completed,
        fmt(p.load.rps, 1),
        fmt(ideal(p.agents), 0),
        `${fmt((100 * p.load.rps) / ideal(p.agents), 1)}%`,
        fmt(s.p50, 1),
        fmt(s.p99, 1),
        p.load.errors,
      ];
    }),
    `Throughput of one workload (runtime delay ${DELAY_MS} ms, ${SLOTS} slots per agent, closed loop at concurrency ${CONCURRENCY})`,
  );
  const one = phases.filter((p) => p.agents === 1);
  const two = phases.find((p) => p.agents === 2)!;
  const oneRps = one.reduce((a, p) => a + p.load.rps, 0) / one.length;
  console.log(
    `2 agents / 1 agent: ${fmt(two.load.rps / oneRps)}x (1 agent: ${one.map((p) => fmt(p.load.rps, 1)).join(" and ")} req/s; aim: close to 2x)`,
  );

  printTable(
    ["configuration", ...agents.map((a) => `${a.name} runtime`), "sum", "through inferd"],
    phases.map((p) => {
      const sum = p.split.reduce((a, s) => a + s.requests, 0);
      const cell = (a: BenchAgent) => {
        const got = p.split.find((s) => s.agent === a.name);
        return got ? `${got.requests} (${fmt((100 * got.requests) / Math.max(sum, 1), 1)}%)` : "-";
      };
      return [p.label, ...agents.map(cell), sum, p.load.completed];
    }),
    "Requests served per runtime (GET /fake/stats, during the measurement; the sum may exceed inferd's count by the requests still in flight at the end)",
  );

  const names = ["client", "host", ...agents.flatMap((a) => [a.name, `${a.name} runtime`])];
  const rows: Cell[][] = phases.map((p) => {
    const per = (n: string) =>
      p.cpuMs[n] === undefined || Number.isNaN(p.cpuMs[n]) ? "-" : fmt((p.cpuMs[n] * 1000) / p.load.completed, 0);
    const total = names.reduce((a, n) => a + (Number.isNaN(p.cpuMs[n] ?? NaN) ? 0 : p.cpuMs[n]), 0);
    return [p.label, ...names.map(per), fmt((total * 1000) / p.load.completed, 0), fmt(total / p.load.elapsedMs, 2)];
  });
  printTable(
    ["configuration", ...names, "total", "CPUs busy"],
    rows,
    "CPU time per request (µs, user+system; 10 ms resolution per process and phase)",
  );
}

process.exit(
  await runBenchmark(HARD_LIMIT_MS, async (cleanup) => {
    console.log(
      `agents benchmark${QUICK ? " (quick)" : ""}: runtime delay ${DELAY_MS} ms, ${SLOTS} slots per agent; ${machineLoad()}`,
    );
    if (PROFILE_DIR) console.log(`the host runs under the CPU profiler (slower); its profile goes to ${PROFILE_DIR}`);
    const bunFlags = PROFILE_DIR ? ["--cpu-prof", "--cpu-prof-dir", PROFILE_DIR] : [];
    const host = await startInferdForBench(
      { INFERD_LOCAL_AGENT: "0", INFERD_WORKER_TIMEOUT_MS: String(WORKER_TIMEOUT_MS) },
      { bunFlags },
    );
    cleanup.add("host", () => host.stop());
    const liveKey = await benchProjectKey(host, "bench");
    const one = await startAgent(host, "agent-1", cleanup);
    console.log(`host ${host.url} (pid ${host.pid}); agent-1 worker ${one.workerId} (pid ${one.pid})`);
    const wl = await createVllmWorkload(host, { model: MODEL });
    const a1 = await place(host, wl.id, one);
    const [r1] = await waitAssignments(host, wl.id, (as) => as.length === 1 && as[0].id === a1 && allReady(as));
    const endpoint = `${host.url}/endpoint/bench/${wl.slug}/v1/chat/completions`;
    const body = JSON.stringify({
      model: MODEL,
      messages: [{ role: "user", content: "one two three four five" }],
      max_tokens: 8,
    });
    const post = async (url: string) => {
      const headers = { authorization: `Bearer ${liveKey}`, "content-type": "application/json" };
      const r = await fetch(url, { method: "POST", headers, body, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
      const text = await r.text();
      if (r.status !== 200) throw new Error(`HTTP ${r.status} ${text.slice(0, 200)}`);
    };
    const send = () => post(endpoint);
    const phases: Phase[] = [await measure("1 agent", send, [{ agent: one, a: r1 }], host, [one])];
    const seq = await sequentialLatency(send, () => post(`${r1.base_url}/v1/chat/completions`));

    const two = await startAgent(host, "agent-2", cleanup);
    console.log(`agent-2 worker ${two.workerId} (pid ${two.pid})`);
    const a2 = await place(host, wl.id, two);
    const both = await waitAssignments(host, wl.id, (as) => as.length === 2 && allReady(as));
    const byId = (id: string) => both.find((a) => a.id === id)!;
    phases.push(
      await measure(
        "2 agents",
        send,
        [
          { agent: one, a: byId(a1) },
          { agent: two, a: byId(a2) },
        ],
        host,
        [one, two],
      ),
    );

    await host.admin(`/admin/assignments/${a2}`, { method: "DELETE" });
    await waitAssignments(host, wl.id, (as) => as.length === 1 && allReady(as));
    phases.push(await measure("1 agent (again)", send, [{ agent: one, a: byId(a1) }], host, [one, two]));
    console.log(`done; ${machineLoad()}`);
    report(phases, [one, two], seq);
  }),
);
