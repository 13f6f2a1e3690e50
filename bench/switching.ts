#!/usr/bin/env bun
/**
 * Many models, few GPUs (issue 38): six vLLM models on two GPUs, each filling one GPU alone (vLLM
 * takes 90 % of it), requests jumping between them at random, one at a time. The fake vLLM keeps
 * the real costs: a cold start of `--cold-ms` (default 20 s, as a mid-size vLLM model loads), a
 * level-1 wake of 300 ms and a level-2 wake of 2.5 s (vLLM's own figures put a wake 18–200× under a
 * reload). Run twice in one go — replicas stopped and started (today's swap, `sleep: false`) and put
 * to sleep and woken — and prints for each the line
 *
 *   stop/start: switches 40 (6 first loads), TTFT of a switch back p50 20.4 s p95 20.9 s, first loads p50 20.3 s, failed 0, over-commits 0, peak GPU 21600/24000 MiB, peak sleep RAM 0/65536 MiB
 *   sleep/wake: …
 *
 * "A switch" is a request whose model had no ready replica when it was sent; its TTFT is the time to
 * its first streamed token. A model's first request is a cold start in both runs: switches back to a
 * model that ran before are the ones sleeping changes (a wake instead of a start). Over-commits count the samples (every 250 ms) where a GPU's reported use
 * exceeded its memory or the worker's sleeping replicas held more host RAM than allowed.
 *
 *   bun bench/switching.ts [--switches 40] [--cold-ms 20000] [--sleep-ram-mib 65536] [--only sleep|stop] [--quick]
 *
 * With the default sleep RAM three of the six models sleep at level 1 and the others at level 2; a
 * level-2 wake reads its weights back through host RAM, so it stops a level-1 sleeper, whose next
 * switch back is a cold start. `--sleep-ram-mib 131072` lets every resting model sleep at level 1.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { benchProjectKey, Cleanups, percentile, startInferdForBench, type BenchInferd } from "./lib";

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(name);
  return i >= 0 ? Number(process.argv[i + 1]) : dflt;
};
const QUICK = process.argv.includes("--quick");
const SWITCHES = arg("--switches", QUICK ? 8 : 40);
const COLD_MS = arg("--cold-ms", QUICK ? 3000 : 20_000);
const MODELS = 6;
/** Host RAM sleeping replicas may hold per machine: two vLLM replicas' share of an L4 (the host's upper bound of their weights). */
const SLEEP_RAM_MIB = arg("--sleep-ram-mib", 65_536);
const GPU_MIB = 24_000;

interface Run {
  /** TTFT of switches to a model that had run before (a wake, or a start again). */
  ttfts: number[];
  /** TTFT of each model's first request (a cold start in both runs). */
  firsts: number[];
  failed: number;
  overCommits: number;
  peakGpu: number;
  peakRam: number;
}

/** Milliseconds to the first streamed token of a chat, or NaN when it failed. */
async function streamTtft(url: string, key: string, model: string): Promise<number> {
  const t0 = performance.now();
  const r = await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model, stream: true, max_tokens: 4, messages: [{ role: "user", content: "hi" }] }),
  }).catch(() => undefined);
  if (!r?.ok || !r.body) {
    await r?.body?.cancel();
    return Number.NaN;
  }
  const reader = r.body.getReader();
  let first = Number.NaN;
  for (;;) {
    const { done } = await reader.read();
    if (done) break;
    if (Number.isNaN(first)) first = performance.now() - t0;
  }
  return first;
}

/**
 * Samples the GPUs' reported use every 250 ms until `stop`, and the host RAM the sleeping fakes hold
 * (what they took from `ramFile`, the machine's RAM as the fakes keep it).
 */
function sampler(inferd: BenchInferd, run: Run, ramFile: string): { stop(): void } {
  let on = true;
  void (async () => {
    while (on) {
      const workers = await inferd.admin("/admin/workers").catch(() => []);
      const free = (() => {
        try {
          return Number(JSON.parse(readFileSync(ramFile, "utf8")).free_mib);
        } catch {
          return SLEEP_RAM_MIB;
        }
      })();
      const ram = SLEEP_RAM_MIB - free;
      run.peakRam = Math.max(run.peakRam, ram);
      if (ram > SLEEP_RAM_MIB) run.overCommits++;
      for (const w of workers as { gpus: { memory_used_mib: number; memory_total_mib: number }[] }[]) {
        for (const g of w.gpus) {
          run.peakGpu = Math.max(run.peakGpu, g.memory_used_mib);
          if (g.memory_used_mib > g.memory_total_mib) run.overCommits++;
        }
      }
      await Bun.sleep(250);
    }
  })();
  return { stop: () => void (on = false) };
}

/** One run: a fresh inferd, six on-demand models, `SWITCHES` requests to a model other than the last. */
async function runOnce(sleep: boolean, seed: number): Promise<Run> {
  const cleanups = new Cleanups();
  const run: Run = { ttfts: [], firsts: [], failed: 0, overCommits: 0, peakGpu: 0, peakRam: 0 };
  try {
    const usage = join(process.env.TMPDIR ?? "/tmp", `switching-usage-${process.pid}-${sleep}`);
    const ramFile = join(process.env.TMPDIR ?? "/tmp", `switching-ram-${process.pid}-${sleep}.json`);
    // One machine: both GPUs' sleeping replicas share its RAM (the host's cap and the fakes' agree).
    writeFileSync(ramFile, JSON.stringify({ free_mib: SLEEP_RAM_MIB }));
    const inferd = await startInferdForBench({
      FAKE_GPUS: `2x NVIDIA L4:${GPU_MIB}`,
      FAKE_GPU_USAGE_DIR: usage,
      FAKE_LOAD_MS: String(COLD_MS),
      FAKE_WAKE_MS: "300",
      FAKE_WAKE_L2_MS: "2500",
      FAKE_WEIGHTS_MIB: "21600",
      FAKE_HOST_RAM_FILE: ramFile,
      FAKE_TOKEN_MS: "5",
      INFERD_SLEEP_RAM_MIB: String(SLEEP_RAM_MIB),
      INFERD_QUEUE_WAIT_MS: String(COLD_MS * 4 + 60_000),
    });
    cleanups.add("inferd", () => inferd.stop());
    const key = await benchProjectKey(inferd, "switching");
    const ids: string[] = [];
    for (let i = 0; i < MODELS; i++) {
      const made = await inferd.admin("/admin/projects/switching/workloads", {
        body: {
          name: `m${i}`,
          backend: "vllm",
          model_name: `m${i}`,
          config: { command: `vllm serve m${i}` },
          execution_policy: "autoscaling",
          execution_params: { min_replicas: 0, max_replicas: 1, idle_timeout_s: 3600, sleep },
        },
      });
      ids.push(made.id);
    }
    const s = sampler(inferd, run, ramFile);
    cleanups.add("sampler", async () => s.stop());
    const url = `${inferd.url}/endpoint/switching/v1/chat/completions`;
    let state = seed;
    const random = () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0) / 2 ** 32;
    let last = -1;
    let switches = 0;
    const seen = new Set<number>();
    while (switches < SWITCHES) {
      let m = Math.floor(random() * MODELS);
      if (m === last) m = (m + 1) % MODELS;
      last = m;
      const w = (await inferd.admin(`/admin/workloads/${ids[m]}`)) as { assignments: { state: string }[] };
      const loaded = w.assignments.some((a) => a.state === "ready");
      const t = await streamTtft(url, key, `m${m}`);
      if (Number.isNaN(t)) run.failed++;
      else if (!loaded) (seen.has(m) ? run.ttfts : run.firsts).push(t);
      if (!loaded) switches++;
      seen.add(m);
    }
    s.stop();
  } finally {
    await cleanups.run();
  }
  return run;
}

const seconds = (ms: number) => `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;

console.log(
  `switching: ${MODELS} vLLM models on 2 GPUs (one fits a GPU), ${SWITCHES} switches each, cold start ${seconds(COLD_MS)}, wake 0.30 s (level 1) / 2.50 s (level 2), sleep RAM ${SLEEP_RAM_MIB} MiB`,
);
/** `--only sleep` or `--only stop`: one of the two runs (a long sleep/wake run without waiting hours for cold starts). */
const only = process.argv.includes("--only") ? process.argv[process.argv.indexOf("--only") + 1] : undefined;
for (const sleep of [false, true].filter((x) => !only || (only === "sleep") === x)) {
  const r = await runOnce(sleep, 42);
  console.log(
    `${sleep ? "sleep/wake" : "stop/start"}: switches ${r.ttfts.length + r.firsts.length + r.failed} (${r.firsts.length} first loads), TTFT of a switch back p50 ${seconds(percentile(r.ttfts, 50))} p95 ${seconds(percentile(r.ttfts, 95))}, first loads p50 ${seconds(percentile(r.firsts, 50))}, failed ${r.failed}, over-commits ${r.overCommits}, peak GPU ${r.peakGpu}/${GPU_MIB} MiB, peak sleep RAM ${r.peakRam}/${SLEEP_RAM_MIB} MiB`,
  );
}
