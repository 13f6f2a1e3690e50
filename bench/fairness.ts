#!/usr/bin/env bun
/**
 * Fair share between keys (issue 25), against one `inferd serve` child (SQLite) with one vLLM-style
 * workload on the fake runtime: 1 replica × 4 slots, 200 ms per request (FAKE_DELAY_MS), so the
 * slots are the bottleneck (20 requests/s at most).
 *  1. Key Q sends a steady trickle (2 requests/s) alone.
 *  2. Key F floods the same workload with 20× Q's rate (40 requests/s, twice what it can serve) and
 *     submits 10,000 jobs; once F's queue has built up, Q sends the same trickle again.
 * Prints Q's queue wait alone and beside the flood (p50/p99), F's completed requests/s, and the jobs
 * completed while the synchronous flood lasted. Q's wait is measured by the client: its time to
 * answer minus the runtime's fixed 200 ms (no per-request wait is exposed by the server), so it
 * includes inferd's own overhead (about a millisecond).
 *
 * The aim: Q's p99 beside the flood ≤ 2× alone. Alone, Q hardly waits (a slot is free), so the
 * ratio of waits is dominated by the residual time until one of four busy slots frees (0–200 ms,
 * the floor for any scheduler that does not pre-empt); the line "Q time to answer" gives the ratio
 * a client sees, which is the one the aim can hold to. For the figures before fair share, run this
 * file from a checkout of the old code (it uses only default keys and the jobs API).
 *
 *   bun bench/fairness.ts [--quick]
 */
import {
  benchProjectKey,
  createBenchWorkload,
  fmt,
  machineLoad,
  parseQuickArgs,
  runBenchmark,
  startInferdForBench,
  summarize,
  type BenchInferd,
  type BenchWorkload,
} from "./lib";

const { quick: QUICK } = parseQuickArgs(process.argv.slice(2), "usage: bun bench/fairness.ts [--quick]");

// Bun's fetch runs at most 256 requests at once per process; F's backlog goes past that.
if (!process.env.BUN_CONFIG_MAX_HTTP_REQUESTS) {
  const child = Bun.spawn([process.execPath, ...process.argv.slice(1)], {
    env: { ...process.env, BUN_CONFIG_MAX_HTTP_REQUESTS: "4096" },
    stdio: ["inherit", "inherit", "inherit"],
  });
  process.exit(await child.exited);
}

const DELAY_MS = 200;
const SLOTS = 4;
const Q_RATE = 2;
const F_RATE = 20 * Q_RATE;
const Q_REQUESTS = QUICK ? 12 : 80;
/** How long F floods before Q's trickle starts beside it (its queue builds up meanwhile). */
const FLOOD_LEAD_MS = QUICK ? 1500 : 3000;
const JOBS = 10_000;
const BODY = JSON.stringify({ messages: [{ role: "user", content: "hello there" }], max_tokens: 4 });

/** One chat request of `key`: its time to answer (ms), or undefined when it failed or was aborted. */
async function chat(w: BenchWorkload, key: string, signal?: AbortSignal): Promise<number | undefined> {
  const t0 = performance.now();
  try {
    const r = await fetch(`${w.endpoint}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: BODY,
      signal,
    });
    await r.arrayBuffer();
    return r.ok ? performance.now() - t0 : undefined;
  } catch {
    return undefined;
  }
}

/** Sends `fn` at `rate` per second (open loop: on schedule, whatever the answers) until `stop` or `count`. */
async function openLoop<T>(
  rate: number,
  fn: () => Promise<T>,
  opts: { count?: number; stop?: AbortSignal },
): Promise<T[]> {
  const started: Promise<T>[] = [];
  const t0 = performance.now();
  for (let i = 0; opts.count === undefined || i < opts.count; i++) {
    const due = t0 + (i * 1000) / rate;
    const wait = due - performance.now();
    if (wait > 0) await Bun.sleep(wait); // the schedule of an open-loop load, not a wait for a condition
    if (opts.stop?.aborted) break;
    started.push(fn());
  }
  return Promise.all(started);
}

/** Submits `n` chat jobs of `key` in batches of 1000. */
async function submitJobs(w: BenchWorkload, key: string, n: number): Promise<void> {
  const envelope = JSON.stringify({ kind: "chat", body: JSON.parse(BODY) });
  for (let done = 0; done < n; done += 1000) {
    const size = Math.min(1000, n - done);
    const r = await fetch(`${w.endpoint}/jobs:batch`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: `[${Array(size).fill(envelope).join(",")}]`,
    });
    if (r.status !== 202) throw new Error(`jobs:batch: HTTP ${r.status} ${(await r.text()).slice(0, 200)}`);
    await r.arrayBuffer();
  }
}

/** Jobs completed so far (from /metrics). */
async function jobsCompleted(inferd: BenchInferd): Promise<number> {
  const text = await (
    await fetch(`${inferd.url}/metrics`, { headers: { authorization: `Bearer ${inferd.adminToken}` } })
  ).text();
  return Number(/^inferd_jobs\{status="completed"\} (\d+)/m.exec(text)?.[1] ?? 0);
}

/** Q's waits: each time to answer minus the runtime's fixed delay; p50/p99 and how many failed. */
function waits(times: (number | undefined)[]) {
  const ok = times.filter((t): t is number => t !== undefined);
  return {
    wait: summarize(ok.map((t) => Math.max(0, t - DELAY_MS))),
    total: summarize(ok),
    failed: times.length - ok.length,
  };
}

process.exit(
  await runBenchmark(QUICK ? 240_000 : 420_000, async (cleanup) => {
    console.log(
      `fairness: 1 replica × ${SLOTS} slots, ${DELAY_MS} ms per request; Q ${Q_RATE} req/s, F ${F_RATE} req/s + ${JOBS} jobs (${machineLoad()})`,
    );
    const inferd = await startInferdForBench({ FAKE_DELAY_MS: String(DELAY_MS) });
    cleanup.add("inferd", () => inferd.stop());
    const w = await createBenchWorkload(inferd, { model: "fair-model", concurrency: SLOTS });
    const q = w.liveKey;
    const f = await benchProjectKey(inferd);
    await openLoop(10, () => chat(w, q), { count: 8 }); // warm up

    const alone = waits(await openLoop(Q_RATE, () => chat(w, q), { count: Q_REQUESTS }));

    const stopFlood = new AbortController();
    let fDone = 0;
    const flood = openLoop(F_RATE, async () => ((await chat(w, f, stopFlood.signal)) !== undefined ? fDone++ : 0), {
      stop: stopFlood.signal,
    });
    await submitJobs(w, f, JOBS);
    await Bun.sleep(FLOOD_LEAD_MS); // F's queue builds up before Q's trickle starts beside it
    const [jobs0, f0, t0] = [await jobsCompleted(inferd), fDone, performance.now()];
    const beside = waits(await openLoop(Q_RATE, () => chat(w, q), { count: Q_REQUESTS }));
    const [jobs1, f1, seconds] = [await jobsCompleted(inferd), fDone, (performance.now() - t0) / 1000];
    stopFlood.abort();
    await flood;

    const line = (what: string, s: ReturnType<typeof waits>["wait"]) =>
      `${what}: p50 ${fmt(s.p50, 0)} ms, p99 ${fmt(s.p99, 0)} ms`;
    console.log(line("Q wait alone", alone.wait));
    console.log(
      `${line("Q wait beside the flood", beside.wait)} (p99 ${fmt(beside.wait.p99 / Math.max(1, alone.wait.p99), 1)} x alone; a free slot is at most ${DELAY_MS} ms away)`,
    );
    console.log(
      `${line("Q time to answer alone", alone.total)}; beside the flood: p50 ${fmt(beside.total.p50, 0)} ms, p99 ${fmt(beside.total.p99, 0)} ms (p99 ${fmt(beside.total.p99 / alone.total.p99, 2)} x alone; aim ≤ 2)`,
    );
    console.log(
      `F completed ${fmt((f1 - f0) / seconds, 1)} requests/s beside Q (capacity ${(SLOTS * 1000) / DELAY_MS}/s); jobs completed during the sync flood: ${jobs1 - jobs0} in ${fmt(seconds, 1)} s`,
    );
    if (alone.failed + beside.failed)
      console.log(`Q requests that failed: ${alone.failed} alone, ${beside.failed} beside the flood`);
  }),
);
