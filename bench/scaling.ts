#!/usr/bin/env bun
/**
 * Scale to zero and GPU swapping: what inferd adds on top of the runtime's own start.
 *
 * 1. Cold start. Baseline: the fake vLLM started by hand (`vllm serve`, FAKE_LOAD_MS of load time)
 *    until its first chat answer. inferd: a chat request to an autoscaling workload at zero replicas
 *    until its answer (the replica starts on demand, then serves). The difference is inferd's
 *    overhead (aim < 50 ms).
 * 2. Swap. Two autoscaling workloads that cannot share the one fake GPU (each holds 90% of it)
 *    answer alternating requests; each answer needs the other's runtime stopped and its own
 *    started. Reported: the time per swap, and that time minus the runtime's own start (the baseline).
 *
 *   bun bench/scaling.ts [--quick]
 */
import { fixtureEnv, freePort } from "../test/fixtures";
import { tempDir, cleanup as removeTemp } from "../test/helpers/proc";
import {
  benchProjectKey,
  fmt,
  machineLoad,
  parseQuickArgs,
  printTable,
  runBenchmark,
  startInferdForBench,
  summarize,
  type BenchInferd,
} from "./lib";

const { quick: QUICK } = parseQuickArgs(process.argv.slice(2), "usage: bun bench/scaling.ts [--quick]");
const LOAD_MS = 300;
const ROUNDS = QUICK ? 4 : 10;
const BODY = JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 4 });

/** The runtime alone: spawn the fake vLLM, wait for its first answer, stop it. Returns ms. */
async function directStart(): Promise<number> {
  const port = await freePort();
  const t0 = performance.now();
  const proc = Bun.spawn(["vllm", "serve", "direct", "--host", "127.0.0.1", "--port", String(port)], {
    env: fixtureEnv({ FAKE_LOAD_MS: String(LOAD_MS) }),
    stdout: "ignore",
    stderr: "ignore",
  });
  try {
    for (;;) {
      const r = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: BODY,
      }).catch(() => null);
      if (r?.ok) {
        await r.text();
        return performance.now() - t0;
      }
      await Bun.sleep(5);
    }
  } finally {
    proc.kill("SIGTERM");
    await proc.exited;
  }
}

/** One chat request through inferd, timed; throws unless it is answered 200. */
async function timedChat(inferd: BenchInferd, key: string, slug: string): Promise<number> {
  const t0 = performance.now();
  const r = await fetch(`${inferd.url}/endpoint/bench/${slug}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: BODY,
  });
  const text = await r.text();
  if (r.status !== 200) throw new Error(`${slug}: HTTP ${r.status} ${text}`);
  return performance.now() - t0;
}

/** Waits until every replica of the workload is idle again (its runtime stopped). */
async function untilIdle(inferd: BenchInferd, id: string): Promise<void> {
  for (;;) {
    const d = await inferd.admin(`/admin/workloads/${id}`);
    if (d.assignments.every((a: { state: string }) => a.state === "idle")) return;
    await Bun.sleep(20);
  }
}

const onDemand = (inferd: BenchInferd, name: string, idle_timeout_s: number) =>
  inferd.admin("/admin/projects/bench/workloads", {
    body: {
      name,
      backend: "vllm",
      model_name: name,
      config: { command: `vllm serve ${name}` },
      execution_policy: "autoscaling",
      execution_params: { min_replicas: 0, max_replicas: 1, idle_timeout_s },
    },
  });

process.exit(
  await runBenchmark(5 * 60_000, async (cleanup) => {
    console.log(`machine load: ${machineLoad()}; ${ROUNDS} rounds; the fake runtime loads in ${LOAD_MS} ms`);
    const direct: number[] = [];
    for (let i = 0; i < ROUNDS; i++) direct.push(await directStart());
    const inferd = await startInferdForBench({
      FAKE_LOAD_MS: String(LOAD_MS),
      FAKE_GPU_USAGE_DIR: tempDir("bench-usage"),
      INFERD_TELEMETRY_INTERVAL_MS: "200",
    });
    cleanup.add("inferd", () => inferd.stop());
    cleanup.add("temp dirs", () => removeTemp());
    const key = await benchProjectKey(inferd);

    const cold = await onDemand(inferd, "cold", 1);
    const coldTimes: number[] = [];
    for (let i = 0; i < ROUNDS; i++) {
      await untilIdle(inferd, cold.id);
      coldTimes.push(await timedChat(inferd, key, cold.slug));
    }
    await inferd.admin(`/admin/workloads/${cold.id}`, { method: "DELETE" });

    const a = await onDemand(inferd, "swap-a", 600);
    const b = await onDemand(inferd, "swap-b", 600);
    await timedChat(inferd, key, a.slug);
    const swaps: number[] = [];
    for (let i = 0; i < ROUNDS; i++) swaps.push(await timedChat(inferd, key, (i % 2 === 0 ? b : a).slug));

    const d = summarize(direct);
    const c = summarize(coldTimes);
    const s = summarize(swaps);
    printTable(
      ["", "p50 ms", "min ms", "max ms", "p50 over the runtime's own start"],
      [
        ["runtime started by hand, to its first answer", fmt(d.p50, 1), fmt(d.min, 1), fmt(d.max, 1), ""],
        [
          "cold start through inferd (scale from zero)",
          fmt(c.p50, 1),
          fmt(c.min, 1),
          fmt(c.max, 1),
          `+${fmt(c.p50 - d.p50, 1)} ms (aim < 50 ms)`,
        ],
        [
          "swap: the other model out, this one in",
          fmt(s.p50, 1),
          fmt(s.min, 1),
          fmt(s.max, 1),
          `+${fmt(s.p50 - d.p50, 1)} ms`,
        ],
      ],
    );
  }),
);
