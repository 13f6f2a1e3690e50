/**
 * Shared helpers for inferd's benchmarks: statistics, a closed-loop load generator, table printing,
 * a hard time limit, and an `inferd serve` child (local agent, fake GPUs and runtimes) with a
 * ready vLLM-style workload. Nothing runs on import.
 *
 * Bun's `fetch` runs at most 256 requests at once per process (BUN_CONFIG_MAX_HTTP_REQUESTS raises
 * it); `closedLoop` warns when asked for more workers than that.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fixtureEnv } from "../test/fixtures";

/** The repository root. */
export const REPO_ROOT = join(import.meta.dir, "..");

/**
 * The `p`-th percentile (0–100, nearest rank) of `samples`; NaN when there are none.
 * @example percentile([5, 1, 3, 2, 4], 50) // → 3
 */
export function percentile(samples: readonly number[], p: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  const rank = Math.ceil((Math.min(Math.max(p, 0), 100) / 100) * sorted.length);
  return sorted[Math.max(0, rank - 1)];
}

/** Count, mean and the usual percentiles of a set of samples. */
export interface Summary {
  n: number;
  mean: number;
  min: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/**
 * Summarizes samples (NaN fields when empty).
 * @example summarize([1, 2, 3]).p50 // → 2
 */
export function summarize(samples: readonly number[]): Summary {
  const n = samples.length;
  const mean = n ? samples.reduce((a, b) => a + b, 0) / n : NaN;
  const at = (p: number) => percentile(samples, p);
  return { n, mean, min: at(0), p50: at(50), p90: at(90), p99: at(99), max: at(100) };
}

/** Linux reports process CPU times in units of 1/100 s (USER_HZ). */
const USER_HZ = 100;

/**
 * CPU time (user + system, all threads, ms) process `pid` has used so far, from /proc/<pid>/stat;
 * undefined where /proc is missing or the process is gone. Resolution: 10 ms.
 */
export function cpuMsOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / USER_HZ; // utime, stime (fields 14, 15)
  } catch {
    return undefined;
  }
}

/**
 * Runs `fn` and reports the CPU time (ms) each named process used meanwhile, plus `client`: this
 * process (from `process.cpuUsage`). A process whose CPU cannot be read reports NaN.
 * @example const { result, cpuMs } = await withCpu({ inferd: inferd.pid }, () => closedLoop(…)); cpuMs.inferd / result.completed
 */
export async function withCpu<T>(
  pids: Record<string, number | undefined>,
  fn: () => Promise<T>,
): Promise<{ result: T; cpuMs: Record<string, number> }> {
  const read = () =>
    Object.fromEntries(Object.entries(pids).map(([name, pid]) => [name, pid === undefined ? undefined : cpuMsOf(pid)]));
  const before = read();
  const client = process.cpuUsage();
  const result = await fn();
  const used = process.cpuUsage(client);
  const after = read();
  const cpuMs: Record<string, number> = { client: (used.user + used.system) / 1000 };
  for (const name of Object.keys(pids))
    cpuMs[name] = before[name] !== undefined && after[name] !== undefined ? after[name]! - before[name]! : NaN;
  return { result, cpuMs };
}

/** What `closedLoop` runs: `concurrency` workers, each sending its next request when the last ends. */
export interface LoadOptions {
  concurrency: number;
  /** Stop starting requests after this long (ms). At least one of `durationMs` and `requests` is needed. */
  durationMs?: number;
  /** Stop after this many requests in all. */
  requests?: number;
  /** Give up early after this many failed requests (default 10). */
  maxErrors?: number;
  /** One request; resolves when it is fully done, throws when it failed. */
  fn: (worker: number, seq: number) => Promise<void>;
}

/** The outcome of a `closedLoop` run; `latencies` are of successful requests, in ms. */
export interface LoadResult {
  concurrency: number;
  completed: number;
  errors: number;
  firstError?: string;
  elapsedMs: number;
  /** Successful requests per second over the whole run (until the last one finished). */
  rps: number;
  latencies: number[];
}

/**
 * A closed-loop load generator: `concurrency` workers send requests back to back until the duration
 * or request count is reached (requests already started finish and count).
 * @example const r = await closedLoop({ concurrency: 8, durationMs: 2000, fn: () => hit(url) }); r.rps
 */
export async function closedLoop(opts: LoadOptions): Promise<LoadResult> {
  if (opts.durationMs === undefined && opts.requests === undefined)
    throw new Error("closedLoop needs durationMs or requests");
  if (opts.concurrency > 256 && !process.env.BUN_CONFIG_MAX_HTTP_REQUESTS) {
    console.warn(
      `warning: ${opts.concurrency} workers but Bun's fetch runs at most 256 requests at once (set BUN_CONFIG_MAX_HTTP_REQUESTS)`,
    );
  }
  const maxErrors = opts.maxErrors ?? 10;
  const latencies: number[] = [];
  let started = 0;
  let errors = 0;
  let firstError: string | undefined;
  const t0 = performance.now();
  const stopAt = opts.durationMs === undefined ? Infinity : t0 + opts.durationMs;
  const more = () => started < (opts.requests ?? Infinity) && performance.now() < stopAt && errors < maxErrors;
  const worker = async (w: number) => {
    while (more()) {
      const seq = started++;
      const t = performance.now();
      try {
        await opts.fn(w, seq);
        latencies.push(performance.now() - t);
      } catch (e) {
        errors++;
        firstError ??= e instanceof Error ? e.message : String(e);
      }
    }
  };
  await Promise.all(Array.from({ length: opts.concurrency }, (_, w) => worker(w)));
  const elapsedMs = performance.now() - t0;
  return {
    concurrency: opts.concurrency,
    completed: latencies.length,
    errors,
    firstError,
    elapsedMs,
    rps: latencies.length / (elapsedMs / 1000),
    latencies,
  };
}

/**
 * The machine's load average (1 and 5 min) against its CPU count, to print next to the figures: a
 * load above the CPU count means other work was competing with the benchmark.
 * @example console.log(machineLoad()) // → "load average 0.42 / 0.30 on 8 CPUs"
 */
export function machineLoad(): string {
  const [one, five] = loadavg();
  return `load average ${one.toFixed(2)} / ${five.toFixed(2)} (1 / 5 min) on ${availableParallelism()} CPUs`;
}

/** A table cell: numbers are right-aligned, text left-aligned. */
export type Cell = string | number;

/**
 * Lays out rows under a header as aligned plain-text columns, with a rule under the header.
 * @example formatTable(["what", "ms"], [["direct", 20.4]]) // → "what      ms\n------  ----\ndirect  20.4"
 */
export function formatTable(header: string[], rows: Cell[][]): string {
  const text = (c: Cell) => String(c);
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => text(r[i] ?? "").length)));
  const numeric = header.map(
    (_, i) =>
      rows.length > 0 &&
      rows.every((r) => typeof r[i] === "number" || /^([-+]?[\d.]+(%|x| ms)?)?$/.test(text(r[i] ?? ""))),
  );
  const line = (cells: Cell[]) =>
    cells
      .map((c, i) => (numeric[i] ? text(c).padStart(widths[i]) : text(c).padEnd(widths[i])))
      .join("  ")
      .trimEnd();
  return [line(header), widths.map((w) => "-".repeat(w)).join("  "), ...rows.map(line)].join("\n");
}

/** Prints `formatTable(header, rows)`, with an optional title line above it. */
export function printTable(header: string[], rows: Cell[][], title?: string): void {
  if (title) console.log(`\n${title}`);
  console.log(formatTable(header, rows));
}

/**
 * A number with `digits` decimals (default 2), or "n/a" for NaN.
 * @example fmt(1.2345) // → "1.23"
 */
export const fmt = (x: number, digits = 2) => (Number.isFinite(x) ? x.toFixed(digits) : "n/a");

/**
 * Arms a hard time limit: after `ms`, prints why, runs `cleanup` (given up to 20 s) and exits with
 * code 2. SIGINT/SIGTERM do the same at once. `fired` tells the run that it is being stopped (its
 * own errors are then expected). Call `clear()` when the run ends normally.
 * @example const limit = hardLimit(300_000, () => inferd.stop()); try { … } finally { limit.clear(); }
 */
export function hardLimit(ms: number, cleanup: () => Promise<unknown>): { clear(): void; readonly fired: boolean } {
  let fired = false;
  const bail = (why: string) => {
    if (fired) return;
    fired = true;
    console.error(`\n${why}: stopping everything`);
    const forced = setTimeout(() => process.exit(2), 20_000);
    void cleanup()
      .catch((e) => console.error("cleanup failed:", e))
      .finally(() => {
        clearTimeout(forced);
        process.exit(2);
      });
  };
  const timer = setTimeout(() => bail(`hard time limit of ${Math.round(ms / 1000)} s reached`), ms);
  const onInt = () => bail("interrupted (SIGINT)");
  const onTerm = () => bail("terminated (SIGTERM)");
  process.on("SIGINT", onInt);
  process.on("SIGTERM", onTerm);
  return {
    clear: () => {
      clearTimeout(timer);
      process.off("SIGINT", onInt);
      process.off("SIGTERM", onTerm);
    },
    get fired() {
      return fired;
    },
  };
}

/** How much of a child's output `BenchInferd.output()` keeps. */
const OUTPUT_TAIL_BYTES = 64 * 1024;

/** A non-2xx answer of the admin API, with its status. */
export class AdminError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** A running `inferd serve` child started by `startInferdForBench`. */
export interface BenchInferd {
  url: string;
  adminToken: string;
  dataDir: string;
  pid: number;
  /** The end of what it printed (stdout and stderr interleaved). */
  output(): string;
  /** Calls the admin API with the admin token; returns the parsed JSON, throws `AdminError` on non-2xx. */
  admin<T = any>(path: string, init?: { method?: string; body?: unknown }): Promise<T>;
  /** Also ends this process group at `stop()` if it outlives inferd (a runtime inferd launched). */
  track(pid: number): void;
  /** SIGTERM (SIGKILL after 15 s), then any tracked runtime left, then removes the data dir. Idempotent. */
  stop(): Promise<void>;
}

/** Options of `startInferdForBench`. */
export interface BenchInferdOptions {
  /** Flags for bun before the script, e.g. `["--cpu-prof", "--cpu-prof-dir", dir]`. */
  bunFlags?: string[];
  /** Keep the data dir after `stop()` (default: removed). */
  keepDataDir?: boolean;
  /** How long to wait for the `listening on` line (default 30 s). */
  startTimeoutMs?: number;
}

/** Resolves true when `p` settles within `ms`, false otherwise (the timer does not outlive it). */
async function within(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<false>((r) => (timer = setTimeout(() => r(false), ms)));
  const ok = await Promise.race([p.then(() => true), timeout]);
  clearTimeout(timer);
  return ok;
}

/** SIGKILLs the process group of `pid` if that process still runs one of the fixture programs; true if it did. */
function killFixtureGroup(pid: number, why = "outlived inferd"): boolean {
  let cmdline = "";
  try {
    cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
  } catch {
    return false; // gone
  }
  if (!cmdline.includes(join("test", "fixtures"))) return false;
  console.error(`runtime ${pid} ${why}; killing its process group`);
  try {
    process.kill(-pid, "SIGKILL");
  } catch {}
  return true;
}

/**
 * The runtime pids an agent (local or remote) recorded in `<dataDir>/run/<pid>.json` (one file per
 * runtime process group, removed when it exits), with their command lines; [] when there are none.
 * @example runtimePids(agent.dataDir).find((r) => r.argv.some((a) => a.includes("vllm")))?.pid
 */
export function runtimePids(dataDir: string): { pid: number; argv: string[] }[] {
  let files: string[];
  try {
    files = readdirSync(join(dataDir, "run")).filter((f) => f.endsWith(".json"));
  } catch {
    return [];
  }
  return files.flatMap((f) => {
    try {
      const { pid, argv } = JSON.parse(readFileSync(join(dataDir, "run", f), "utf8")) as {
        pid: number;
        argv?: string[];
      };
      return Number.isInteger(pid) && pid > 0 ? [{ pid, argv: argv ?? [] }] : [];
    } catch {
      return [];
    }
  });
}

/** SIGKILLs every fixture runtime process group still listed in `<dataDir>/run` (left behind by its agent). */
export function reapRuntimes(dataDir: string, why = "outlived its agent"): number {
  return runtimePids(dataDir).filter(({ pid }) => killFixtureGroup(pid, why)).length;
}

/** A child process started by `spawnWithTail`: the end of its output, and a stop that always ends it. */
export interface TailedChild {
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  pid: number;
  /** The end of what it printed (stdout and stderr interleaved). */
  output(): string;
  /** The start of its stdout (up to 64 KiB): where start-up lines such as `listening on` are. */
  stdoutHead(): string;
  /** SIGTERM, then SIGKILL after `graceMs` (default 15 s); resolves when it has exited. Idempotent. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Spawns `cmd` with piped output kept as a bounded tail, and a stop that escalates to SIGKILL.
 * @example const child = spawnWithTail([process.execPath, "src/main.ts", "agent"], { env }); … await child.stop();
 */
export function spawnWithTail(
  cmd: string[],
  opts: { env: Record<string, string>; cwd?: string; name?: string },
): TailedChild {
  const proc = Bun.spawn(cmd, {
    cwd: opts.cwd ?? REPO_ROOT,
    env: opts.env,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  let tail = "";
  let stdout = "";
  const pump = async (stream: ReadableStream<Uint8Array>, isStdout: boolean) => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) {
      const s = decoder.decode(chunk, { stream: true });
      tail = (tail + s).slice(-OUTPUT_TAIL_BYTES);
      if (isStdout && stdout.length < OUTPUT_TAIL_BYTES) stdout += s;
    }
  };
  void pump(proc.stdout, true).catch(() => {});
  void pump(proc.stderr, false).catch(() => {});
  let stopping: Promise<void> | undefined;
  const stop = (graceMs = 15_000) =>
    (stopping ??= (async () => {
      if (proc.exitCode !== null || proc.signalCode !== null) return;
      proc.kill("SIGTERM");
      if (!(await within(proc.exited, graceMs))) {
        console.error(
          `${opts.name ?? cmd.join(" ")} did not stop within ${Math.round(graceMs / 1000)} s of SIGTERM; killing it`,
        );
        proc.kill("SIGKILL");
        await proc.exited;
      }
    })());
  return { proc, pid: proc.pid, output: () => tail, stdoutHead: () => stdout, stop };
}

/**
 * Starts `bun src/main.ts serve --port 0 --data-dir <fresh tmp dir>` with the local agent on, the
 * fake runtimes first on PATH, one fake RTX 4090 and instant model loads (`FAKE_LOAD_MS=0`); `env`
 * adds or overrides variables (inherited INFERD_* and FAKE_* are dropped). The runtimes inferd
 * starts get the FAKE_* knobs (`INFERD_RUNTIME_ENV=FAKE_*`, as `fixtureEnv` sets it): without it
 * their delays were the fakes' defaults, whatever the benchmark asked. Resolves once it listens.
 * @example const inferd = await startInferdForBench({ FAKE_DELAY_MS: "20" }); try { … } finally { await inferd.stop(); }
 */
export async function startInferdForBench(
  env: Record<string, string> = {},
  opts: BenchInferdOptions = {},
): Promise<BenchInferd> {
  const dataDir = mkdtempSync(join(tmpdir(), "inferd-bench-"));
  const childEnv = fixtureEnv();
  for (const k of Object.keys(childEnv)) if (k.startsWith("INFERD_")) delete childEnv[k];
  Object.assign(
    childEnv,
    {
      INFERD_LOCAL_AGENT: "1",
      INFERD_RUNTIME_ENV: "FAKE_*",
      FAKE_GPUS: "1x NVIDIA GeForce RTX 4090:24564",
      FAKE_LOAD_MS: "0",
    },
    env,
  );
  const cmd = [
    process.execPath,
    ...(opts.bunFlags ?? []),
    join(REPO_ROOT, "src/main.ts"),
    "serve",
    "--port",
    "0",
    "--data-dir",
    dataDir,
  ];
  const child = spawnWithTail(cmd, { env: childEnv, name: "inferd" });
  const tracked = new Set<number>();
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      await child.stop(15_000);
      if (tracked.size) await Bun.sleep(200); // the runtime's own SIGTERM handling
      for (const pid of tracked) killFixtureGroup(pid);
      reapRuntimes(dataDir, "outlived inferd");
      if (!opts.keepDataDir) rmSync(dataDir, { recursive: true, force: true });
    })());
  try {
    const url = await waitForListening(child.proc, child.stdoutHead, opts.startTimeoutMs ?? 30_000);
    // A token given in `env` (hosts of one cluster share one) is neither printed nor saved.
    const adminToken =
      env.INFERD_ADMIN_TOKEN ??
      /admin token \(.*\): (ik_admin_\S+)/.exec(child.stdoutHead())?.[1] ??
      readFileSync(join(dataDir, "admin-token"), "utf8").trim();
    return {
      url,
      adminToken,
      dataDir,
      pid: child.pid,
      output: child.output,
      admin: adminCaller(url, adminToken),
      track: (pid) => tracked.add(pid),
      stop,
    };
  } catch (e) {
    await stop();
    throw new Error(`${e instanceof Error ? e.message : String(e)}\n--- inferd output ---\n${child.output()}`);
  }
}

/** Waits for the `listening on <url>` line of a starting inferd; fails if it exits or takes too long. */
export async function waitForListening(proc: Bun.Subprocess, stdout: () => string, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const m = /listening on (http:\/\/\S+)/.exec(stdout());
    if (m) return m[1];
    if (proc.exitCode !== null || proc.signalCode !== null)
      throw new Error(`inferd exited (${proc.exitCode ?? proc.signalCode}) before listening`);
    if (Date.now() > deadline) throw new Error(`inferd did not print "listening on" within ${timeoutMs} ms`);
    await Bun.sleep(20);
  }
}

/** A fetch for the admin API with the admin token: JSON in, parsed JSON out, `AdminError` on non-2xx. */
export function adminCaller(url: string, token: string): BenchInferd["admin"] {
  return async (path, init = {}) => {
    const method = init.method ?? (init.body === undefined ? "GET" : "POST");
    const headers: Record<string, string> = { authorization: `Bearer ${token}` };
    if (init.body !== undefined) headers["content-type"] = "application/json";
    const r = await fetch(url + path, {
      method,
      headers,
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
    const text = await r.text();
    if (!r.ok) throw new AdminError(r.status, `${method} ${path}: ${r.status} ${text}`);
    return text ? JSON.parse(text) : undefined;
  };
}

/** A ready workload made by `createBenchWorkload`: where to call it through inferd and directly. */
export interface BenchWorkload {
  projectSlug: string;
  workloadId: string;
  workloadSlug: string;
  assignmentId: string;
  /** An `ik_live_` key of the project. */
  liveKey: string;
  /** `<inferd>/endpoint/<project>/<workload>`; append `/v1/...`. */
  endpoint: string;
  /** The runtime's own base URL (the assignment's `base_url`): the direct target. */
  runtimeUrl: string;
  /** The runtime's pid, when its output named it. */
  runtimePid?: number;
}

/** An assignment as `GET /admin/workloads/:id` lists it. */
export interface BenchAssignment {
  id: string;
  worker_id: string;
  concurrency: number;
  state: string;
  reason?: string;
  in_flight?: number;
  base_url?: string;
}

/**
 * Creates the project `slug` unless it exists, and a new `ik_live_` key of it; returns the key's secret.
 * @example const liveKey = await benchProjectKey(inferd, "bench");
 */
export async function benchProjectKey(inferd: BenchInferd, slug = "bench"): Promise<string> {
  await inferd.admin("/admin/projects", { body: { name: slug, slug } }).catch((e) => {
    if (!(e instanceof AdminError && e.status === 409)) throw e;
  });
  const key = await inferd.admin(`/admin/projects/${slug}/keys`, {
    body: { name: `bench-${Date.now()}`, type: "live" },
  });
  return key.secret;
}

/**
 * Creates a vLLM workload (`vllm serve <model>`, the fake on PATH) in project `project`; inferd
 * places it automatically unless it is placed by hand. Returns its id and slug.
 */
export async function createVllmWorkload(
  inferd: BenchInferd,
  opts: { model: string; project?: string; name?: string },
): Promise<{ id: string; slug: string }> {
  const created = await inferd.admin(`/admin/projects/${opts.project ?? "bench"}/workloads`, {
    body: {
      name: opts.name ?? opts.model,
      backend: "vllm",
      model_name: opts.model,
      config: { command: `vllm serve ${opts.model}` },
    },
  });
  return { id: created.id, slug: created.slug };
}

/**
 * Polls `GET /admin/workloads/:id` until `ready(assignments)` holds, then returns the assignments;
 * fails at once when one is `failed`, and after `timeoutMs` (default 60 s) with the states seen.
 * @example await waitAssignments(inferd, wl.id, (as) => as.length === 2 && as.every((a) => a.state === "ready"))
 */
export async function waitAssignments(
  inferd: BenchInferd,
  workloadId: string,
  ready: (as: BenchAssignment[]) => boolean,
  timeoutMs = 60_000,
): Promise<BenchAssignment[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const as: BenchAssignment[] = (await inferd.admin(`/admin/workloads/${workloadId}`)).assignments ?? [];
    if (ready(as)) return as;
    const failed = as.find((a) => a.state === "failed");
    if (failed)
      throw new Error(
        `assignment ${failed.id} of workload ${workloadId} failed: ${failed.reason}\n--- inferd output ---\n${inferd.output()}`,
      );
    if (Date.now() > deadline) {
      const states = as.map((a) => `${a.id}@${a.worker_id}: ${a.state}`).join(", ") || "unplaced";
      throw new Error(
        `workload ${workloadId} not ready within ${timeoutMs} ms (${states})\n--- inferd output ---\n${inferd.output()}`,
      );
    }
    await Bun.sleep(50);
  }
}

/** Every assignment is ready with a runtime URL (and there is at least one). */
export const allReady = (as: BenchAssignment[]) =>
  as.length > 0 && as.every((a) => a.state === "ready" && !!a.base_url);

/**
 * A fake runtime's counters (`GET <baseUrl>/fake/stats`): `total` requests served so far, and more.
 * @example const before = (await fakeStats(a.base_url!)).total;
 */
export async function fakeStats(
  baseUrl: string,
): Promise<{ total: number; in_flight: number; max_in_flight: number; [k: string]: number }> {
  const r = await fetch(`${baseUrl}/fake/stats`);
  if (!r.ok) throw new Error(`GET ${baseUrl}/fake/stats: HTTP ${r.status}`);
  return r.json() as never;
}

/**
 * A last-in-first-out list of clean-up steps (stop a receiver, an agent, inferd…), run once by
 * `run()` even when some fail, each given `stepTimeoutMs` (default 30 s). Share one with `hardLimit`.
 * @example const cleanup = new Cleanups(); cleanup.add("inferd", () => inferd.stop()); … await cleanup.run();
 */
export class Cleanups {
  private steps: { name: string; fn: () => unknown }[] = [];
  private running?: Promise<void>;

  constructor(private stepTimeoutMs = 30_000) {}

  /** Adds a step; steps run in the reverse order of adding. */
  add(name: string, fn: () => unknown): void {
    this.steps.push({ name, fn });
  }

  /** Runs every step (once; later calls wait for the first), logging the ones that fail or hang. */
  run(): Promise<void> {
    return (this.running ??= (async () => {
      for (const step of this.steps.splice(0).reverse()) {
        try {
          if (!(await within(Promise.resolve(step.fn()), this.stepTimeoutMs)))
            console.error(`cleanup of ${step.name} took over ${this.stepTimeoutMs} ms; going on`);
        } catch (e) {
          console.error(`cleanup of ${step.name} failed:`, e instanceof Error ? e.message : e);
        }
      }
    })());
  }
}

/**
 * Through the admin API: a project (created unless it exists), a live key and a vLLM workload
 * serving `model` (`vllm serve <model>`, the fake on PATH); waits until its replica is ready, then
 * sets the replica's slots to `concurrency` (default 1000) so inferd's queue never holds requests back.
 * @example const wl = await createBenchWorkload(inferd, { model: "bench-model" }); fetch(`${wl.endpoint}/v1/models`, …)
 */
export async function createBenchWorkload(
  inferd: BenchInferd,
  opts: { model: string; project?: string; name?: string; concurrency?: number; readyTimeoutMs?: number },
): Promise<BenchWorkload> {
  const projectSlug = opts.project ?? "bench";
  const liveKey = await benchProjectKey(inferd, projectSlug);
  const created = await createVllmWorkload(inferd, { model: opts.model, project: projectSlug, name: opts.name });
  const [a] = await waitAssignments(
    inferd,
    created.id,
    (as) => as[0]?.state === "ready" && !!as[0].base_url,
    opts.readyTimeoutMs ?? 60_000,
  );
  await inferd.admin(`/admin/assignments/${a.id}`, {
    method: "PATCH",
    body: { concurrency: opts.concurrency ?? 1000 },
  });
  const logs = await inferd.admin(`/admin/workloads/${created.id}/logs?assignment=${a.id}`);
  const pid = Number(/Started server process \[(\d+)\]/.exec(logs.replicas?.[0]?.text ?? "")?.[1]);
  if (pid > 0) inferd.track(pid);
  return {
    projectSlug,
    workloadId: created.id,
    workloadSlug: created.slug,
    assignmentId: a.id,
    liveKey,
    endpoint: `${inferd.url}/endpoint/${projectSlug}/${created.slug}`,
    runtimeUrl: a.base_url!,
    runtimePid: pid > 0 ? pid : undefined,
  };
}

/**
 * The command line of a benchmark that takes `--quick` and `--cpu-prof-dir DIR`; anything else
 * prints `usage` and exits 2.
 */
export function parseQuickArgs(argv: string[], usage: string): { quick: boolean; profileDir?: string } {
  const out: { quick: boolean; profileDir?: string } = { quick: false };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--quick") out.quick = true;
    else if (argv[i] === "--cpu-prof-dir" && argv[i + 1]) out.profileDir = argv[++i];
    else {
      console.error(`unknown argument "${argv[i]}"\n${usage}`);
      process.exit(2);
    }
  }
  return out;
}

/**
 * Runs a benchmark's body under a hard time limit with its clean-up steps: exit code 0 when it
 * finished, 1 when it failed, 2 when the limit fired. Clean-up always runs.
 */
export async function runBenchmark(limitMs: number, body: (cleanup: Cleanups) => Promise<void>): Promise<number> {
  const cleanup = new Cleanups();
  const limit = hardLimit(limitMs, () => cleanup.run());
  try {
    await body(cleanup);
    return 0;
  } catch (e) {
    if (limit.fired) return 2;
    console.error(`\nbenchmark failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    return 1;
  } finally {
    await cleanup.run();
    limit.clear();
  }
}

/**
 * A small seeded PRNG (xorshift32): the same sequence every run, for traffic both sides of a
 * comparison replay. Numbers in [0, 1).
 * @example const r = seededRandom(25); r() === seededRandom(25)() // → true
 */
export function seededRandom(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 4294967296;
  };
}
