#!/usr/bin/env bun
/**
 * Async jobs, in one run against one `inferd serve` child with a fake vLLM runtime (5 ms per request):
 *  (a) how many jobs inferd accepts per second (a 202 means the job is committed to SQLite) at
 *      concurrency 1 and 32, next to the floor: a plain bun:sqlite insert+commit loop of the same
 *      row (WAL, synchronous=NORMAL), one row per commit and 32 rows per commit. Twice: with the jobs
 *      running as they arrive (then concurrency 1 once more, with more jobs stored), and "parked"
 *      (the workload is pinned to a worker that never comes online, so jobs only pile up); then the
 *      batch route (`jobs:batch`, JSON arrays and NDJSON) on the parked workload. The aims (issue
 *      13): parked at concurrency 32 ≥ 10k jobs/s, ≥ 50 % of the one-row-per-commit floor, p99 ≤ 10 ms;
 *  (b) submit-to-webhook latency with 10 destinations: 10 real HTTPS receivers on loopback, jobs
 *      submitted at a steady rate (a light one, then a heavy one), each receiver's arrival time
 *      matched to the job by X-Service-Job-Id. Retries are shortened to 1 s so a timed-out delivery
 *      shows as a late arrival (and a duplicate) instead of stalling the run for a minute.
 * Prints tables; the exit code is 0 unless something failed (2 when stopped by the time limit).
 *
 *   bun bench/jobs.ts [--quick] [--only a|b] [--jobs N] [--rate JOBS_PER_S] [--cpu-prof-dir DIR] [--store sqlite|postgres | --database-url postgres://…]
 *
 * `--only a` / `--only b` runs one part; `--jobs` and `--rate` set (b)'s job count and its one rate;
 * `--cpu-prof-dir` runs inferd under `bun --cpu-prof` and leaves its profile in DIR.
 * `--store postgres` runs inferd in PostgreSQL mode (cluster mode's store, group commit as one
 * multi-row INSERT per batch) on a server started for the run with default, durable settings
 * (`bench/pg.ts`); `--database-url` uses that server instead (a new database in it). The floor of
 * (a) is then a plain Bun `SQL` loop inserting the same job row into the same database (one row
 * per commit, 32 rows per commit as one multi-row INSERT, and one row per commit from 32
 * connections at once), and the aim line of issue 21 is printed: intake at concurrency 32 ≥ 5,000
 * jobs/s, beside the single-row commit floor.
 */
import { Database } from "bun:sqlite";
import { SQL } from "bun";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startReceiver, type Receiver } from "../test/fixtures/receiver";
import { makeTestPki } from "../test/fixtures/tls";
import {
  Cleanups,
  closedLoop,
  createBenchWorkload,
  fmt,
  machineLoad,
  printTable,
  runBenchmark,
  startInferdForBench,
  summarize,
  withCpu,
  type BenchInferd,
  type BenchWorkload,
  type Cell,
  type LoadResult,
} from "./lib";
import { startBenchPostgres, STORE_USAGE, takeStoreArgs, type BenchPostgres } from "./pg";

const USAGE = `usage: bun bench/jobs.ts [--quick] [--only a|b] [--jobs N] [--rate JOBS_PER_S] [--cpu-prof-dir DIR] ${STORE_USAGE}`;

/** The command line; anything unknown is a usage error (exit 2). */
function parseArgs(argv: string[]): {
  quick: boolean;
  only?: "a" | "b";
  jobs?: number;
  rate?: number;
  profileDir?: string;
} {
  const out: { quick: boolean; only?: "a" | "b"; jobs?: number; rate?: number; profileDir?: string } = { quick: false };
  const positive = (v: string | undefined) => (v !== undefined && Number(v) > 0 ? Number(v) : undefined);
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--quick") out.quick = true;
    else if (argv[i] === "--only" && (argv[i + 1] === "a" || argv[i + 1] === "b")) out.only = argv[++i] as "a" | "b";
    else if (argv[i] === "--jobs" && positive(argv[i + 1])) out.jobs = Math.round(positive(argv[++i])!);
    else if (argv[i] === "--rate" && positive(argv[i + 1])) out.rate = positive(argv[++i]);
    else if (argv[i] === "--cpu-prof-dir" && argv[i + 1]) out.profileDir = argv[++i];
    else {
      console.error(`bad argument "${argv[i]}"\n${USAGE}`);
      process.exit(2);
    }
  }
  return out;
}

const { choice: STORE, rest: ARGV } = takeStoreArgs(process.argv.slice(2));
const ARGS = parseArgs(ARGV);

/** The fake runtime's answer delay (ms) and the workload's slots. */
const DELAY_MS = 5;
const SLOTS = 1000;
const DESTINATIONS = 10;
/** Rows per transaction of the batched SQLite floor. */
const FLOOR_BATCH = 32;
/** Delays before delivery attempts 2–6 in this run (the default starts at 1 min). */
const RETRY_SCHEDULE = "1s,1s,1s,1s,1s";
/** How long after the last submission every delivery must have arrived. */
const DELIVERY_WAIT_MS = 60_000;
/** A submission that takes longer than this counts as failed (a stall ends the run instead of hanging it). */
const REQUEST_TIMEOUT_MS = 20_000;
const HARD_LIMIT_MS = 5 * 60_000;

const PLAN = ARGS.quick
  ? {
      submitMs: 1500,
      floorMs: 500,
      warmupJobs: 50,
      hookJobs: ARGS.jobs ?? 50,
      rates: ARGS.rate ? [ARGS.rate] : [10, 40],
    }
  : {
      submitMs: 5000,
      floorMs: 2000,
      warmupJobs: 200,
      hookJobs: ARGS.jobs ?? 200,
      rates: ARGS.rate ? [ARGS.rate] : [10, 40],
    };

/** About 250 bytes of input: each job's row is the same size, inferd's and the floor's. */
const INPUT = "The quick brown fox jumps over the lazy dog. ".repeat(5).trim();
const jobInput = (seq: number) => `${INPUT} #${String(seq).padStart(7, "0")}`;
const jobContext = (seq: number) => `{"bench":"jobs","seq":${seq}}`;
const envelope = (seq: number) =>
  `{"kind":"embeddings","body":${JSON.stringify({ input: jobInput(seq) })},"context":${jobContext(seq)}}`;

/** Where jobs are submitted, and how many this run has submitted there so far (all still stored). */
interface JobTarget {
  workloadId: string;
  endpoint: string;
  liveKey: string;
  submitted: number;
}

/** Submits one embeddings job; returns its id, throws unless 202 with a job_id. */
async function submitJob(t: JobTarget): Promise<string> {
  const seq = t.submitted++;
  const headers = { authorization: `Bearer ${t.liveKey}`, "content-type": "application/json" };
  const r = await fetch(`${t.endpoint}/jobs`, {
    method: "POST",
    headers,
    body: envelope(seq),
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  const text = await r.text();
  if (r.status !== 202) throw new Error(`submit: HTTP ${r.status} ${text.slice(0, 200)}`);
  const id = (JSON.parse(text) as { job_id?: string }).job_id;
  if (!id) throw new Error(`submit: 202 without a job_id: ${text.slice(0, 200)}`);
  return id;
}

/** Batches sent to the batch route in (a): envelopes per request, concurrency, body format. */
const BATCH_RUNS: { size: number; concurrency: number; format: "json" | "ndjson" }[] = [
  { size: 100, concurrency: 4, format: "json" },
  { size: 100, concurrency: 4, format: "ndjson" },
  { size: 1000, concurrency: 2, format: "json" },
];

/** Submits `size` embeddings jobs in one `jobs:batch` request; throws unless 202 with as many ids. */
async function submitBatch(t: JobTarget, size: number, format: "json" | "ndjson"): Promise<void> {
  const envelopes = Array.from({ length: size }, () => envelope(t.submitted++));
  const body = format === "json" ? `[${envelopes.join(",")}]` : `${envelopes.join("\n")}\n`;
  const headers = {
    authorization: `Bearer ${t.liveKey}`,
    "content-type": format === "json" ? "application/json" : "application/x-ndjson",
  };
  const r = await fetch(`${t.endpoint}/jobs:batch`, {
    method: "POST",
    headers,
    body,
    signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
  });
  const text = await r.text();
  if (r.status !== 202) throw new Error(`batch: HTTP ${r.status} ${text.slice(0, 200)}`);
  const ids =
    format === "json" ? ((JSON.parse(text) as { job_ids?: string[] }).job_ids ?? []) : text.trim().split("\n");
  if (ids.length !== size) throw new Error(`batch: ${ids.length} ids for ${size} envelopes`);
}

/** Waits until a workload has no queued or running job; returns how long that took (ms). */
async function drain(inferd: BenchInferd, workloadId: string, timeoutMs = 120_000): Promise<number> {
  const t0 = performance.now();
  for (;;) {
    const [queued, running] = await Promise.all(
      ["queued", "running"].map((s) =>
        inferd.admin<unknown[]>(`/admin/workloads/${workloadId}/jobs?status=${s}&limit=1`),
      ),
    );
    if (queued.length === 0 && running.length === 0) return performance.now() - t0;
    if (performance.now() - t0 > timeoutMs)
      throw new Error(`jobs of ${workloadId} still queued or running after ${timeoutMs} ms`);
    await Bun.sleep(50);
  }
}

/** A submit run: the load, jobs per request, how many jobs the workload had stored before, CPU of inferd and of this client, and the run-off time of the backlog. */
type SubmitRun = LoadResult & {
  mode: string;
  perRequest: number;
  storedBefore: number;
  inferdCpuMs: number;
  clientCpuMs: number;
  drainMs?: number;
  pg?: PgDelta;
};

/** In a `--store postgres` run: its server, and one connection that reads the server's counters. */
let PG: { server: BenchPostgres; probe: SQL } | undefined;

/** What the PostgreSQL server did during a run: its CPU time, transactions that wrote (xids assigned) and WAL written. */
interface PgDelta {
  cpuMs: number;
  xids: number;
  walBytes: number;
}

/** The server's counters now (undefined in SQLite mode). Reading them assigns no xid and writes no WAL. */
async function pgCounters(): Promise<PgDelta | undefined> {
  if (!PG) return undefined;
  const [r] =
    await PG.probe`SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint AS xid, (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint AS wal`;
  return { cpuMs: PG.server.cpuMs(), xids: Number(r.xid), walBytes: Number(r.wal) };
}

/** `withCpu` for inferd and this client, plus the PostgreSQL server's share in PostgreSQL mode. */
async function measured(
  inferd: BenchInferd,
  fn: () => Promise<LoadResult>,
): Promise<{ result: LoadResult; cpuMs: Record<string, number>; pg?: PgDelta }> {
  const before = await pgCounters();
  const { result, cpuMs } = await withCpu({ inferd: inferd.pid }, fn);
  const after = await pgCounters();
  const pg =
    before && after
      ? {
          cpuMs: after.cpuMs - before.cpuMs,
          xids: after.xids - before.xids,
          walBytes: after.walBytes - before.walBytes,
        }
      : undefined;
  return { result, cpuMs, pg };
}

/** Closed-loop submission at each concurrency in turn; with `drainAfter`, the backlog is run off after each. */
async function submitRuns(
  inferd: BenchInferd,
  t: JobTarget,
  mode: string,
  concurrencies: number[],
  drainAfter: boolean,
): Promise<SubmitRun[]> {
  const runs: SubmitRun[] = [];
  for (const concurrency of concurrencies) {
    console.log(`  ${mode}: concurrency ${concurrency} for ${PLAN.submitMs} ms (${t.submitted} jobs stored)`);
    const storedBefore = t.submitted;
    const { result, cpuMs, pg } = await measured(inferd, () =>
      closedLoop({ concurrency, durationMs: PLAN.submitMs, fn: async () => void (await submitJob(t)) }),
    );
    if (result.errors > 0)
      throw new Error(`${mode} at concurrency ${concurrency}: ${result.errors} failed, first: ${result.firstError}`);
    runs.push({
      ...result,
      mode,
      perRequest: 1,
      storedBefore,
      inferdCpuMs: cpuMs.inferd,
      clientCpuMs: cpuMs.client,
      pg,
      drainMs: drainAfter ? await drain(inferd, t.workloadId) : undefined,
    });
  }
  return runs;
}

/** Closed-loop batch submissions (BATCH_RUNS) to the parked workload. */
async function batchRuns(inferd: BenchInferd, t: JobTarget): Promise<SubmitRun[]> {
  const runs: SubmitRun[] = [];
  for (const b of BATCH_RUNS) {
    console.log(
      `  jobs:batch ${b.format}: ${b.size} per request at concurrency ${b.concurrency} for ${PLAN.submitMs} ms (${t.submitted} jobs stored)`,
    );
    const storedBefore = t.submitted;
    const { result, cpuMs, pg } = await measured(inferd, () =>
      closedLoop({ concurrency: b.concurrency, durationMs: PLAN.submitMs, fn: () => submitBatch(t, b.size, b.format) }),
    );
    if (result.errors > 0)
      throw new Error(`batch ${b.format} ×${b.size}: ${result.errors} failed, first: ${result.firstError}`);
    runs.push({
      ...result,
      mode: `jobs:batch ${b.format} ×${b.size}`,
      perRequest: b.size,
      storedBefore,
      inferdCpuMs: cpuMs.inferd,
      clientCpuMs: cpuMs.client,
      pg,
    });
  }
  return runs;
}

/**
 * (a) Jobs running as they arrive (concurrency 1, 32, then 1 again with more stored), then parked:
 * a workload pinned to a worker that never joins, so every job stays queued. The parked workload
 * and its worker are deleted afterwards, so their backlog does not weigh on (b).
 */
async function measureSubmit(inferd: BenchInferd, running: JobTarget): Promise<SubmitRun[]> {
  console.log(`  warmup: ${PLAN.warmupJobs} jobs`);
  await closedLoop({ concurrency: 8, requests: PLAN.warmupJobs, fn: async () => void (await submitJob(running)) });
  await drain(inferd, running.workloadId);
  const runs = await submitRuns(inferd, running, "jobs run", [1, 32, 1], true);
  const worker = await inferd.admin("/admin/workers", { body: { name: "bench-never-joins" } });
  const wl = await inferd.admin("/admin/projects/bench/workloads", {
    body: {
      name: "jobs-parked",
      backend: "vllm",
      model_name: "jobs-model",
      worker_id: worker.id,
      config: { command: "vllm serve jobs-model" },
    },
  });
  const parked: JobTarget = {
    workloadId: wl.id,
    endpoint: `${inferd.url}/endpoint/bench/${wl.slug}`,
    liveKey: running.liveKey,
    submitted: 0,
  };
  runs.push(...(await submitRuns(inferd, parked, "jobs parked", [1, 32], false)));
  runs.push(...(await batchRuns(inferd, parked)));
  await inferd.admin(`/admin/workloads/${wl.id}`, { method: "DELETE" });
  await inferd.admin(`/admin/workers/${worker.id}`, { method: "DELETE" });
  return runs;
}

/** What a floor loop measured: rows per commit, connections committing at once, rows/s and ms per commit. */
interface Floor {
  batch: number;
  connections: number;
  rows: number;
  rowsPerS: number;
  commitMs: number[];
}

/** The floor: one row (or `batch` rows) per transaction into a jobs-shaped table (inferd's three indexes); rows/s and per-commit ms. */
function sqliteFloor(dir: string, batch: number, durationMs: number): Floor {
  const db = new Database(join(dir, `floor-${batch}.db`), { create: true, strict: true });
  try {
    db.exec("PRAGMA busy_timeout = 5000");
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("PRAGMA synchronous = NORMAL");
    db.exec(`CREATE TABLE jobs (id text PRIMARY KEY NOT NULL, workload_id text NOT NULL, key_id text, kind text NOT NULL, body blob NOT NULL,
      content_type text NOT NULL, context text, status text NOT NULL, data text, runs integer DEFAULT 0 NOT NULL, created_at text NOT NULL,
      started_at text, finished_at text)`);
    db.exec("CREATE INDEX jobs_status ON jobs (status, created_at)");
    db.exec("CREATE INDEX jobs_workload ON jobs (workload_id, created_at)");
    db.exec("CREATE INDEX jobs_workload_status ON jobs (workload_id, status, created_at)");
    const insert = db.prepare(
      "INSERT INTO jobs (id, workload_id, key_id, kind, body, content_type, context, status, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'queued', ?)",
    );
    // Ids as inferd makes them (UUIDv7, time-ordered), so the floor writes the same index pages.
    const row = (seq: number) =>
      insert.run(
        Bun.randomUUIDv7(),
        "wl_floor",
        "key_floor",
        "embeddings",
        Buffer.from(JSON.stringify({ input: jobInput(seq) })),
        "application/json",
        jobContext(seq),
        new Date().toISOString(),
      );
    const many = db.transaction((from: number) => {
      for (let i = 0; i < batch; i++) row(from + i);
    });
    const commitMs: number[] = [];
    let rows = 0;
    const t0 = performance.now();
    while (performance.now() - t0 < durationMs) {
      const t = performance.now();
      if (batch === 1) row(rows);
      else many(rows);
      commitMs.push(performance.now() - t);
      rows += batch;
    }
    return { batch, connections: 1, rows, rowsPerS: rows / ((performance.now() - t0) / 1000), commitMs };
  } finally {
    db.close();
  }
}

/**
 * The PostgreSQL floor, in inferd's own database: a table shaped like its `jobs` (same columns and
 * three indexes, no foreign key) and a plain Bun `SQL` loop inserting the same job row as inferd
 * does (`INSERT INTO … ${sql(rows)}`, autocommit: one statement is one commit) — `batch` rows per
 * statement, from `connections` connections at once. The table is dropped afterwards.
 */
async function pgFloor(url: string, batch: number, connections: number, durationMs: number): Promise<Floor> {
  const sql = new SQL({ url, max: connections });
  try {
    await sql.unsafe("DROP TABLE IF EXISTS bench_floor_jobs");
    await sql.unsafe(`CREATE TABLE bench_floor_jobs (id text PRIMARY KEY NOT NULL, workload_id text NOT NULL, key_id text, kind text NOT NULL, body bytea NOT NULL,
      content_type text NOT NULL, context text, status text NOT NULL, data text, runs bigint DEFAULT 0 NOT NULL, created_at text NOT NULL,
      started_at text, finished_at text, claimed_by text)`);
    await sql.unsafe("CREATE INDEX bench_floor_jobs_status ON bench_floor_jobs (status, created_at)");
    await sql.unsafe("CREATE INDEX bench_floor_jobs_workload ON bench_floor_jobs (workload_id, created_at)");
    await sql.unsafe(
      "CREATE INDEX bench_floor_jobs_workload_status ON bench_floor_jobs (workload_id, status, created_at)",
    );
    // Open every connection before timing (each one answers a query of its own at the same time).
    await Promise.all(Array.from({ length: connections }, () => sql`SELECT pg_sleep(0.01)`));
    let seq = 0;
    const row = () => ({
      id: Bun.randomUUIDv7(),
      workload_id: "wl_floor",
      key_id: "key_floor",
      kind: "embeddings",
      body: Buffer.from(JSON.stringify({ input: jobInput(seq) })),
      content_type: "application/json",
      context: jobContext(seq++),
      status: "queued",
      runs: 0,
      created_at: new Date().toISOString(),
    });
    const commitMs: number[] = [];
    let rows = 0;
    const t0 = performance.now();
    const worker = async () => {
      while (performance.now() - t0 < durationMs) {
        const values = Array.from({ length: batch }, row);
        const t = performance.now();
        await sql`INSERT INTO bench_floor_jobs ${sql(values)}`;
        commitMs.push(performance.now() - t);
        rows += batch;
      }
    };
    await Promise.all(Array.from({ length: connections }, worker));
    return { batch, connections, rows, rowsPerS: rows / ((performance.now() - t0) / 1000), commitMs };
  } finally {
    await sql.unsafe("DROP TABLE IF EXISTS bench_floor_jobs").catch(() => {});
    await sql.close();
  }
}

/** 10 HTTPS receivers (one test CA) and the CA file inferd must trust. */
async function startReceivers(dir: string, cleanup: Cleanups): Promise<{ receivers: Receiver[]; caFile: string }> {
  const pki = makeTestPki(join(dir, "pki"), ["localhost"]);
  const receivers: Receiver[] = [];
  for (let i = 0; i < DESTINATIONS; i++) {
    const r = await startReceiver({ pki });
    cleanup.add(`receiver ${r.port}`, () => r.close());
    receivers.push(r);
  }
  return { receivers, caFile: pki.caFile };
}

/** What one (b) run measured, in ms from each job's submission unless named otherwise. */
interface HookRun {
  jobs: number;
  rate: number;
  submitPerS: number;
  ackMs: number[];
  firstMs: number[];
  allMs: number[];
  eachMs: number[];
  queueMs: number[];
  runMs: number[];
  duplicates: number;
  deliveriesPerS: number;
  inferdCpuMs: number;
}

/** Arrivals since `offsets` (what each receiver had before) of the jobs in `wanted`: first `at` per receiver, duplicates, and each job's metrics. */
function arrivals(receivers: Receiver[], offsets: number[], wanted: Map<string, number>) {
  const byJob = new Map<string, number[]>();
  const metrics = new Map<string, { queue_ms: number; run_ms: number }>();
  let duplicates = 0;
  let delivered = 0;
  receivers.forEach((r, i) => {
    const seen = new Set<string>();
    for (const req of r.requests().slice(offsets[i])) {
      const id = req.headers["x-service-job-id"];
      if (!id || !wanted.has(id)) continue;
      if (seen.has(id)) {
        duplicates++;
        continue;
      }
      seen.add(id);
      delivered++;
      (byJob.get(id) ?? byJob.set(id, []).get(id)!).push(req.at);
      if (!metrics.has(id))
        metrics.set(
          id,
          (JSON.parse(req.rawBody) as { data: { metrics: { queue_ms: number; run_ms: number } } }).data.metrics,
        );
    }
  });
  return { byJob, metrics, duplicates, delivered };
}

/** Submits `count` jobs at `rate` per second (open loop); returns each job's submit time (epoch ms) and the 202 latencies. */
async function submitAtRate(
  t: JobTarget,
  count: number,
  rate: number,
): Promise<{ sent: Map<string, number>; ackMs: number[]; spanMs: number }> {
  const sent = new Map<string, number>();
  const ackMs: number[] = [];
  const pending: Promise<void>[] = [];
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    const wait = t0 + (i * 1000) / rate - performance.now();
    if (wait > 0) await Bun.sleep(wait);
    pending.push(
      (async () => {
        const at = Date.now();
        const start = performance.now();
        const id = await submitJob(t);
        ackMs.push(performance.now() - start);
        sent.set(id, at);
      })(),
    );
  }
  const failed = (await Promise.allSettled(pending)).filter((s): s is PromiseRejectedResult => s.status === "rejected");
  if (failed.length) throw new Error(`${failed.length} of ${count} submissions failed, first: ${failed[0].reason}`);
  return { sent, ackMs, spanMs: performance.now() - t0 };
}

/** Explains missing deliveries: the delivery states inferd shows for a few jobs that did not arrive everywhere. */
async function missingReport(t: JobTarget, missing: string[]): Promise<string> {
  const lines: string[] = [];
  for (const id of missing.slice(0, 3)) {
    const r = await fetch(`${t.endpoint}/jobs/${id}`, { headers: { authorization: `Bearer ${t.liveKey}` } });
    const job = (await r.json()) as {
      status?: string;
      deliveries?: { state: string; attempts: number; last_error: string | null }[];
    };
    const states = (job.deliveries ?? [])
      .map((d) => `${d.state}/${d.attempts}${d.last_error ? ` (${d.last_error})` : ""}`)
      .join(", ");
    lines.push(`  job ${id}: ${job.status}; deliveries: ${states || "none"}`);
  }
  return lines.join("\n");
}

/** Adds the destinations and waits for a few warm-up jobs to reach all of them. */
async function addDestinations(inferd: BenchInferd, t: JobTarget, receivers: Receiver[]): Promise<void> {
  for (const [i, r] of receivers.entries())
    await inferd.admin(`/admin/workloads/${t.workloadId}/webhooks`, { body: { url: r.url(`/hooks/${i}`) } });
  console.log(`  warmup: 5 jobs × ${DESTINATIONS} destinations`);
  for (let i = 0; i < 5; i++) await submitJob(t);
  for (const r of receivers) await r.waitForRequests(5, 30_000);
  await Bun.sleep(200);
}

/** (b) One run: `count` jobs at `rate`/s, then waits until every destination got every job. */
async function measureHooks(
  inferd: BenchInferd,
  t: JobTarget,
  receivers: Receiver[],
  count: number,
  rate: number,
): Promise<HookRun> {
  console.log(`  ${count} jobs at ${rate}/s to ${DESTINATIONS} destinations`);
  const offsets = receivers.map((r) => r.requests().length);
  const { result, cpuMs } = await withCpu({ inferd: inferd.pid }, async () => {
    const submitted = await submitAtRate(t, count, rate);
    const deadline = Date.now() + DELIVERY_WAIT_MS;
    let got = arrivals(receivers, offsets, submitted.sent);
    while (got.delivered < count * DESTINATIONS && Date.now() < deadline) {
      await Bun.sleep(50);
      got = arrivals(receivers, offsets, submitted.sent);
    }
    return { ...submitted, got };
  });
  const { sent, ackMs, spanMs, got } = result;
  if (got.delivered < count * DESTINATIONS) {
    const missing = [...sent.keys()].filter((id) => (got.byJob.get(id)?.length ?? 0) < DESTINATIONS);
    throw new Error(
      `only ${got.delivered} of ${count * DESTINATIONS} deliveries arrived within ${DELIVERY_WAIT_MS / 1000} s of the last submission (${missing.length} jobs short):\n${await missingReport(t, missing)}`,
    );
  }
  const jobs = [...sent.entries()];
  const firstSubmit = Math.min(...sent.values());
  const lastArrival = Math.max(...[...got.byJob.values()].flat());
  return {
    jobs: count,
    rate,
    submitPerS: count / (spanMs / 1000),
    ackMs,
    firstMs: jobs.map(([id, at]) => Math.min(...got.byJob.get(id)!) - at),
    allMs: jobs.map(([id, at]) => Math.max(...got.byJob.get(id)!) - at),
    eachMs: jobs.flatMap(([id, at]) => got.byJob.get(id)!.map((x) => x - at)),
    queueMs: [...got.metrics.values()].map((m) => m.queue_ms),
    runMs: [...got.metrics.values()].map((m) => m.run_ms),
    duplicates: got.duplicates,
    deliveriesPerS: got.delivered / ((lastArrival - firstSubmit) / 1000),
    inferdCpuMs: cpuMs.inferd,
  };
}

/** The aims of issue 13 for parked intake at concurrency 32. */
const AIMS = { jobsPerS: 10_000, floorShare: 0.5, p99Ms: 10 };
/** The aim of issue 21: intake at concurrency 32 in PostgreSQL mode. */
const PG_AIM_JOBS_PER_S = 5_000;

/** Prints (a) next to the floor, then the parked concurrency-32 run against the aims (issue 13's on SQLite, issue 21's on PostgreSQL). */
function reportSubmit(submit: SubmitRun[], floors: Floor[]): void {
  const jobsPerS = (r: SubmitRun) => (r.completed * r.perRequest) / (r.elapsedMs / 1000);
  const perJob = (cpuMs: number, r: SubmitRun) => fmt((cpuMs * 1000) / (r.completed * r.perRequest), 0);
  const onPg = PG !== undefined;
  const pgCells = (r: SubmitRun): Cell[] => {
    if (!r.pg) return ["", "", ""];
    const jobs = r.completed * r.perRequest;
    return [
      Number.isFinite(r.pg.cpuMs) ? perJob(r.pg.cpuMs, r) : "n/a",
      fmt(r.pg.xids / jobs, 3),
      fmt(r.pg.walBytes / jobs, 0),
    ];
  };
  const rows: Cell[][] = submit.map((r) => {
    const s = summarize(r.latencies);
    const cells: Cell[] = [
      r.mode,
      r.concurrency,
      r.storedBefore,
      r.completed * r.perRequest,
      fmt(jobsPerS(r), 0),
      fmt(s.p50),
      fmt(s.p99),
      perJob(r.inferdCpuMs, r),
      perJob(r.clientCpuMs, r),
      r.drainMs === undefined ? "" : fmt(r.drainMs / 1000, 1),
    ];
    return onPg ? [...cells, ...pgCells(r)] : cells;
  });
  for (const f of floors) {
    const s = summarize(f.commitMs);
    const label = onPg
      ? `PostgreSQL floor, ${f.batch} row${f.batch > 1 ? "s" : ""}/commit${f.batch > 1 ? " (one INSERT)" : ""}`
      : `bun:sqlite floor, ${f.batch} row${f.batch > 1 ? "s" : ""}/commit`;
    const cells: Cell[] = [
      label,
      f.connections,
      "",
      f.rows,
      fmt(f.rowsPerS, 0),
      fmt(s.p50, 3),
      fmt(s.p99, 3),
      "",
      "",
      "",
    ];
    rows.push(onPg ? [...cells, "", "", ""] : cells);
  }
  const header = [
    "what",
    "c",
    "stored before",
    "jobs",
    "jobs/s",
    "p50 ms",
    "p99 ms",
    "inferd CPU µs/job",
    "client CPU µs/job",
    "backlog run off s",
  ];
  if (onPg) {
    const st = PG!.server.settings;
    printTable(
      [...header, "postgres CPU µs/job", "write xacts/job", "WAL bytes/job"],
      rows,
      `(a) Jobs accepted (202 = committed to PostgreSQL; fsync=${st.fsync}, synchronous_commit=${st.synchronous_commit}) vs a plain Bun SQL insert loop of the same row in the same database (autocommit: one statement, one commit; its ms are per commit, c its connections; a batch's ms are per request)`,
    );
  } else {
    printTable(
      header,
      rows,
      "(a) Jobs accepted (202 = committed to SQLite) vs a plain insert+commit loop (WAL, synchronous=NORMAL; its ms are per commit; a batch's ms are per request)",
    );
  }
  const floor1 = floors.find((f) => f.batch === 1 && f.connections === 1)!.rowsPerS;
  const share = (r: SubmitRun) =>
    `${fmt((100 * jobsPerS(r)) / floor1, 1)}% of the one-row-per-commit floor (${fmt(floor1, 0)} rows/s)`;
  const parked = submit.find((r) => r.mode === "jobs parked" && r.concurrency === 32);
  const met = (ok: boolean) => (ok ? "met" : "not met");
  if (parked && !onPg) {
    const rate = jobsPerS(parked);
    const p99 = summarize(parked.latencies).p99;
    console.log(
      `parked, concurrency 32: ${fmt(rate, 0)} jobs/s (aim ${AIMS.jobsPerS}: ${met(rate >= AIMS.jobsPerS)}), ${share(parked)} (aim ${AIMS.floorShare * 100}%: ${met(rate >= AIMS.floorShare * floor1)}), p99 ${fmt(p99)} ms (aim ${AIMS.p99Ms} ms: ${met(p99 <= AIMS.p99Ms)})`,
    );
  }
  if (parked && onPg) {
    const rate = jobsPerS(parked);
    const others = floors
      .filter((f) => !(f.batch === 1 && f.connections === 1))
      .map(
        (f) =>
          `${f.batch} row${f.batch > 1 ? "s" : ""}/commit from ${f.connections} connection${f.connections > 1 ? "s" : ""} ${fmt(f.rowsPerS, 0)} rows/s`,
      );
    console.log(
      `postgres intake: ${fmt(rate, 0)} jobs/s at 32 at a time (aim ≥ ${PG_AIM_JOBS_PER_S}/s: ${met(rate >= PG_AIM_JOBS_PER_S)}); single-row commit floor ${fmt(floor1, 0)} rows/s (${others.join("; ")})`,
    );
    const running = submit.find((r) => r.mode === "jobs run" && r.concurrency === 32);
    const p99 = summarize(parked.latencies).p99;
    if (running)
      console.log(
        `  parked p99 ${fmt(p99)} ms, ${fmt(parked.pg!.xids / parked.completed, 3)} write transactions per job; with the jobs running as they arrive: ${fmt(jobsPerS(running), 0)} jobs/s at 32 at a time`,
      );
  }
  const best = submit.reduce((a, b) => (jobsPerS(b) > jobsPerS(a) ? b : a));
  console.log(
    `best: ${best.mode} at concurrency ${best.concurrency}, ${fmt(jobsPerS(best), 0)} jobs/s = ${share(best)}`,
  );
}

/** Prints one (b) run. */
function reportHooks(h: HookRun): void {
  const line = (label: string, xs: number[]) => {
    const s = summarize(xs);
    return [label, s.n, fmt(s.p50, 1), fmt(s.p90, 1), fmt(s.p99, 1), fmt(s.max, 1)];
  };
  printTable(
    ["from submit to …", "n", "p50 ms", "p90 ms", "p99 ms", "max ms"],
    [
      line("202 Accepted", h.ackMs),
      line("job started (inferd's queue_ms)", h.queueMs),
      line("job ran (inferd's run_ms, not from submit)", h.runMs),
      line("first destination got it", h.firstMs),
      line("all 10 destinations got it", h.allMs),
      line("each delivery", h.eachMs),
    ],
    `(b) Submit to webhook: ${h.jobs} jobs at ${fmt(h.submitPerS, 1)}/s (asked ${h.rate}/s), ${DESTINATIONS} HTTPS destinations, runtime delay ${DELAY_MS} ms`,
  );
  const offered = h.submitPerS * DESTINATIONS;
  console.log(
    `deliveries/s ${fmt(h.deliveriesPerS, 0)} (offered ${fmt(offered, 0)}; first submission to last arrival), duplicates ${h.duplicates}, inferd CPU ${fmt((h.inferdCpuMs * 1000) / (h.jobs * DESTINATIONS), 0)} µs per delivery (its share of the job included)`,
  );
}

process.exit(
  await runBenchmark(HARD_LIMIT_MS, async (cleanup) => {
    const reports: (() => void)[] = [];
    console.log(
      `jobs benchmark${ARGS.quick ? " (quick)" : ""}: runtime delay ${DELAY_MS} ms, ${SLOTS} slots, webhook retries after ${RETRY_SCHEDULE}; ${machineLoad()}`,
    );
    const dir = mkdtempSync(join(tmpdir(), "inferd-bench-jobs-"));
    cleanup.add("temp dir", () => rmSync(dir, { recursive: true, force: true }));
    const { receivers, caFile } = await startReceivers(dir, cleanup);
    const bunFlags = ARGS.profileDir ? ["--cpu-prof", "--cpu-prof-dir", ARGS.profileDir] : [];
    if (ARGS.profileDir)
      console.log(`inferd runs under the CPU profiler (slower); its profile goes to ${ARGS.profileDir}`);
    const env: Record<string, string> = {
      FAKE_DELAY_MS: String(DELAY_MS),
      INFERD_ALLOW_PRIVATE_WEBHOOKS: "1",
      INFERD_WEBHOOK_CA_FILE: caFile,
      INFERD_WEBHOOK_RETRY_SCHEDULE: RETRY_SCHEDULE,
    };
    if (STORE.store === "postgres") {
      const server = await startBenchPostgres({ databaseUrl: STORE.databaseUrl });
      cleanup.add("postgres", () => server.stop());
      const probe = new SQL({ url: server.url, max: 1 });
      cleanup.add("postgres probe", () => probe.close());
      PG = { server, probe };
      console.log(`store: ${server.describe()}`);
      env.INFERD_DATABASE_URL = server.url;
    }
    const inferd = await startInferdForBench(env, { bunFlags });
    cleanup.add("inferd", () => inferd.stop());
    const target = (wl: BenchWorkload): JobTarget => ({
      workloadId: wl.workloadId,
      endpoint: wl.endpoint,
      liveKey: wl.liveKey,
      submitted: 0,
    });
    const submitWl = target(
      await createBenchWorkload(inferd, { model: "jobs-model", name: "jobs-submit", concurrency: SLOTS }),
    );
    const hookWl = target(
      await createBenchWorkload(inferd, { model: "jobs-model", name: "jobs-hooks", concurrency: SLOTS }),
    );
    console.log(
      `inferd ${inferd.url} (pid ${inferd.pid}); ${DESTINATIONS} receivers on ports ${receivers.map((r) => r.port).join(", ")}`,
    );
    if (ARGS.only !== "b") {
      console.log("(a) submission throughput");
      const submit = await measureSubmit(inferd, submitWl);
      let floors: Floor[];
      if (PG) {
        console.log(
          `  PostgreSQL floor: ${PLAN.floorMs} ms each at 1 and ${FLOOR_BATCH} rows per commit, then 1 row per commit from ${FLOOR_BATCH} connections`,
        );
        floors = [];
        for (const [batch, connections] of [
          [1, 1],
          [FLOOR_BATCH, 1],
          [1, FLOOR_BATCH],
        ])
          floors.push(await pgFloor(PG.server.url, batch, connections, PLAN.floorMs));
      } else {
        console.log(`  SQLite floor: ${PLAN.floorMs} ms each at 1 and ${FLOOR_BATCH} rows per commit`);
        floors = [1, FLOOR_BATCH].map((batch) => sqliteFloor(dir, batch, PLAN.floorMs));
      }
      reports.push(() => reportSubmit(submit, floors));
    }
    if (ARGS.only !== "a") {
      console.log("(b) submit to webhook");
      await addDestinations(inferd, hookWl, receivers);
      for (const rate of PLAN.rates) {
        const h = await measureHooks(inferd, hookWl, receivers, PLAN.hookJobs, rate);
        reports.push(() => reportHooks(h));
      }
    }
    console.log(`done; ${machineLoad()}`);
    for (const r of reports) r();
  }),
);
