import type { Db } from "../db";
import { AppError } from "../errors";
import { dispatchWith, firstByte, withAffinity } from "../dataplane/forward";
import type { Metering } from "../usage/meter";
import { log } from "../log";
import type { Fleet } from "../workers/fleet";
import { getWorkloadById } from "../workloads/service";
import { KINDS } from "./kinds";
import { buildJobData, type JobData } from "./result";
import { claimJobs, finishJob, recoverRunningJobs, requeueJob, workloadsWithQueuedJobs } from "./service";
import { modelAliasesOf } from "../dataplane/target";
import type { Tracing } from "../tracing/timeline";
import { plural } from "../words";
import { realClock, SerialRunner, type Clock } from "../../agent/serial";

type JobRow = Awaited<ReturnType<typeof claimJobs>>[number];

/** The first pause before a job whose replica was lost runs again (it grows with each run). */
const RERUN_BACKOFF_MS = 500;

/** How long after one claim pass the runner looks for queued jobs again even when nothing woke it. */
const TICK_MS = 1000;

/**
 * How often the runner reads which workloads have queued jobs, besides being told: a job put back
 * in the queue by another host (or a wake-up lost with a dropped connection) is found within this
 * (and the pass after it).
 */
const RESCAN_MS = 5000;

/** What the runner needs of the fleet: the queues and slots of the workloads' ready replicas. */
export type JobFleet = Pick<Fleet, "dispatcher">;

/**
 * Runs queued jobs through the same queue and slots as synchronous requests (behind them). For
 * each workload it keeps as many jobs in flight as its ready replicas have slots (at least one, so
 * a job waits for a starting runtime); the rest stay queued in SQLite. A job whose replica dies
 * is run again, up to `maxRuns`; one the runtime refuses is finished as failed.
 */
export class JobRunner {
  private running = new Map<string, number>();
  /** Workloads that may have queued jobs: set on submit and requeue, cleared when a claim comes up short. */
  private pending = new Set<string>();
  private inflight = new Set<Promise<void>>();
  private abort = new AbortController();
  private stopped = false;
  /** Claim passes, one at a time (a wake during one asks for another after it), each a second after the last. */
  private readonly claims: SerialRunner;
  /** When the runner last read which workloads have queued jobs (see RESCAN_MS). */
  private scannedAt = 0;
  /** Workloads woken while a claim for them was under way: they stay pending even if it came up short. */
  private rewoken = new Set<string>();

  constructor(
    private db: Db,
    private fleet: JobFleet,
    private metering: Metering,
    private onFinished: () => void,
    private maxRuns = 3,
    /** The host that claims and runs the jobs (cluster mode: a dead host's jobs go back to the queue). */
    private hostId: string | null = null,
    /** Where each job run's timeline starts (the inspector's record, a trace when tracing is on). */
    private tracing?: Tracing,
    private clock: Clock = realClock,
  ) {
    this.claims = new SerialRunner(() => this.claim(), {
      every: TICK_MS,
      clock,
      onError: (e) => log.warn("could not take queued jobs", e),
    });
  }

  /** Puts jobs a crash left running back in the queue, then starts taking jobs. */
  async start(): Promise<void> {
    const n = await recoverRunningJobs(this.db, this.hostId);
    if (n > 0) log.info(`${plural(n, "job")} interrupted by a restart will run again`);
    await this.rescan();
    this.claims.start();
    this.claims.wake();
  }

  /** Notes every workload that has queued jobs now (see RESCAN_MS). */
  private async rescan(): Promise<void> {
    this.scannedAt = this.clock.now();
    try {
      for (const w of await workloadsWithQueuedJobs(this.db)) this.pending.add(w);
    } catch (e) {
      log.debug(`could not look for queued jobs: ${(e as Error).message}`);
    }
  }

  /** Looks for work soon (coalesced); `workloadId` names a workload that just got a job. */
  wake(workloadId?: string): void {
    if (workloadId) {
      this.pending.add(workloadId);
      this.rewoken.add(workloadId);
    }
    this.claims.wake();
  }

  /** One claim pass: jobs for every workload that may have some, as many as its replicas have room for. */
  private async claim(): Promise<void> {
    if (this.clock.now() - this.scannedAt >= RESCAN_MS) await this.rescan();
    for (const workloadId of [...this.pending]) {
      if (this.stopped) return;
      const slots = this.fleet.dispatcher.targetsOf(workloadId).reduce((n, t) => n + t.capacity, 0);
      const room = Math.max(1, slots) - (this.running.get(workloadId) ?? 0);
      if (room <= 0) continue;
      this.rewoken.delete(workloadId);
      const claimed = await claimJobs(this.db, workloadId, room, this.hostId);
      if (claimed.length < room && !this.rewoken.has(workloadId)) this.pending.delete(workloadId);
      for (const job of claimed) this.launch(job);
    }
  }

  private launch(job: JobRow): void {
    this.running.set(job.workloadId, (this.running.get(job.workloadId) ?? 0) + 1);
    const p = this.run(job)
      .catch((e) => log.error(`job ${job.id} failed unexpectedly`, e))
      .finally(() => {
        this.running.set(job.workloadId, (this.running.get(job.workloadId) ?? 1) - 1);
        this.inflight.delete(p);
        this.wake();
      });
    this.inflight.add(p);
  }

  private async run(job: JobRow): Promise<void> {
    const w = await getWorkloadById(this.db, job.workloadId);
    if (!w) return;
    const spec = KINDS[job.kind];
    const started = this.clock.now();
    const queueMs = started - Date.parse(job.createdAt);
    const tl = this.tracing?.beginJob(job.id, job.kind, queueMs, job.traceparent);
    if (tl) tl.model = w.model_name;
    const meter = this.metering.begin(w, job.keyId, "job", undefined, undefined, tl);
    const json =
      job.contentType === "application/json"
        ? (JSON.parse(Buffer.from(job.body).toString("utf8")) as Record<string, unknown>)
        : undefined;
    const req = {
      path: `/v1/${spec.route}`,
      method: "POST",
      headers: { "content-type": job.contentType, accept: "*/*", "x-request-id": job.requestId ?? job.id },
      body: json ? null : new Uint8Array(job.body),
      json,
      // An upload's `model` field may say default, the slug or the model name, as on the data plane.
      modelAliases: json ? undefined : modelAliasesOf(w),
    };
    let data: JobData;
    try {
      const got = await dispatchWith(
        this.fleet.dispatcher,
        w.id,
        this.abort.signal,
        (t, s) => t.send(req, s),
        withAffinity(this.fleet.dispatcher, w, json, { kind: "job", keyId: job.keyId ?? undefined }),
        tl,
      );
      meter.queueMs = got.waitedMs;
      firstByte(meter);
      let bytes: Uint8Array;
      try {
        bytes = new Uint8Array(await got.upstream.arrayBuffer());
      } finally {
        got.slot.release();
      }
      data = buildJobData(
        job.id,
        job.kind,
        got.upstream.status,
        got.upstream.headers.get("content-type") ?? "",
        bytes,
        { queue_ms: queueMs, run_ms: this.clock.now() - started, runs: job.runs },
        w.model_name,
      );
    } catch (e) {
      if (this.stopped) return; // left running: the next start runs it again
      const err = e instanceof AppError ? e : new AppError(502, "upstream_unavailable", String(e));
      if ((err.status === 502 || err.code === "worker_lost") && job.runs < this.maxRuns) {
        log.warn(`job ${job.id}: ${err.message}; it will run again`);
        // A runtime that just died is restarted and reported within moments: run the job again
        // after a short, growing pause rather than at once on a replica not yet known to be down.
        await this.pause(RERUN_BACKOFF_MS * job.runs);
        if (this.stopped) return;
        await requeueJob(this.db, job.id);
        this.pending.add(job.workloadId);
        return;
      }
      data = {
        job_id: job.id,
        status: "error",
        metrics: { queue_ms: queueMs, run_ms: this.clock.now() - started, runs: job.runs },
        error: { http_status: err.status, code: err.code, message: err.message },
      };
    }
    await finishJob(this.db, job, data.status === "ok", data);
    const u = data.usage;
    meter.record({ inputTokens: u?.input_tokens ?? 0, outputTokens: u?.output_tokens ?? 0 }, data.status === "ok");
    this.onFinished();
  }

  /** Waits `ms`, or less when the runner stops meanwhile. */
  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = this.clock.setTimeout(resolve, ms);
      this.abort.signal.addEventListener("abort", () => (this.clock.clearTimeout(t), resolve()), { once: true });
    });
  }

  /** Stops taking jobs; jobs in flight are abandoned and put back in the queue (another host, or the next start, runs them). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.abort.abort();
    await this.claims.stop();
    await Promise.allSettled([...this.inflight]);
    // Handed back at once: in a cluster another host runs them now rather than after this one's restart.
    await recoverRunningJobs(this.db, this.hostId).catch((e) =>
      log.warn("could not hand back this host's running jobs", e),
    );
  }
}
