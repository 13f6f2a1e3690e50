/**
 * Cloud GPU workers: a worker whose machine is a pod inferd asked a provider for (./providers.ts),
 * running inferd's agent, which joins with the worker's one-time token. Its life follows the
 * contract: created → joining → online; deleted → terminating → removed once the provider confirms
 * the pod is gone (its billing closes), else kept as "termination pending (pod …)" with the reason,
 * tried again with back-off until the provider confirms. Each pod's price and billed time are kept
 * (`cloud_pods`), after the worker is gone too.
 */
import { and, asc, eq, lte } from "drizzle-orm";
import { SerialRunner, realClock, type Clock } from "../../agent/serial";
import type { Db } from "../db";
import { cloudPods } from "../db/schema";
import { AppError, conflict, notFound, validation } from "../errors";
import { log } from "../log";
import { nowIso } from "../ids";
import { audit } from "../audit/service";
import { createRemoteWorker, deleteRemoteWorker } from "../workers/remote";
import { getWorker, workerView, type WorkerView } from "../workers/service";
import { ProviderFailed, type CloudProvider } from "./providers";

/** GPUs a cloud pod may have (the contract's "GPUs per node (cloud GPU)"). */
export const CLOUD_GPU_COUNTS = [1, 2, 4, 8];

/** A cloud pod as the API shows it: where it runs, what it costs and how long it has been billed. */
export interface PodView {
  worker_id: string;
  worker_name: string;
  provider: "runpod" | "kubernetes";
  pod_id: string;
  gpu_type: string;
  gpus: number;
  /** Dollars per hour, as the provider priced it (null: not told). */
  cost_per_hour: number | null;
  state: "running" | "terminating" | "termination_pending" | "terminated";
  /** "termination pending (pod …)" while the provider has not confirmed its end. */
  label: string | null;
  reason: string | null;
  attempts: number;
  next_attempt_at: string | null;
  created_at: string;
  ended_at: string | null;
  /** Seconds billed: from creation to the confirmed end (or now, while it lasts). */
  billed_seconds: number;
  /** `billed_seconds` at `cost_per_hour` (null when the price is unknown). */
  billed_cost: number | null;
}

type PodRow = typeof cloudPods.$inferSelect;

/** A pod row as the API shows it, billed up to `now`. */
export function podView(r: PodRow, now = Date.now()): PodView {
  const end = r.endedAt ? Date.parse(r.endedAt) : now;
  const billed = Math.max(0, Math.round((end - Date.parse(r.createdAt)) / 1000));
  const perHour = r.costMicrosPerHour === null ? null : r.costMicrosPerHour / 1e6;
  return {
    worker_id: r.workerId,
    worker_name: r.workerName,
    provider: r.provider,
    pod_id: r.podId,
    gpu_type: r.gpuType,
    gpus: r.gpus,
    cost_per_hour: perHour,
    state: r.state,
    label: r.state === "termination_pending" ? `termination pending (pod ${r.podId})` : null,
    reason: r.reason,
    attempts: r.attempts,
    next_attempt_at: r.nextAttemptAt,
    created_at: r.createdAt,
    ended_at: r.endedAt,
    billed_seconds: billed,
    billed_cost: perHour === null ? null : Math.round((billed / 3600) * perHour * 1e4) / 1e4,
  };
}

/** A cloud pod's billed time on one UTC day (the usage export's `cloud` rows). */
export interface CloudDay {
  day: string;
  worker_id: string;
  worker_name: string;
  provider: string;
  pod_id: string;
  gpus: number;
  billed_seconds: number;
  billed_cost: number | null;
}

/**
 * Each pod's billed time split by UTC day over `from`..`to` (YYYY-MM-DD, both included), up to
 * `now` for a pod still billed.
 */
export function billedDays(rows: PodRow[], from: string, to: string, now: number): CloudDay[] {
  const out: CloudDay[] = [];
  const start = Date.parse(`${from}T00:00:00Z`);
  const stop = Date.parse(`${to}T00:00:00Z`) + 86_400_000;
  for (const r of rows) {
    const begin = Math.max(Date.parse(r.createdAt), start);
    const end = Math.min(r.endedAt ? Date.parse(r.endedAt) : now, stop);
    for (let d = begin - (begin % 86_400_000); d < end; d += 86_400_000) {
      const span = Math.min(end, d + 86_400_000) - Math.max(begin, d);
      // A pod that lived on this day shows, under a second too (its row says 0 s).
      if (span <= 0) continue;
      const seconds = Math.round(span / 1000);
      const perHour = r.costMicrosPerHour === null ? null : r.costMicrosPerHour / 1e6;
      out.push({
        day: new Date(d).toISOString().slice(0, 10),
        worker_id: r.workerId,
        worker_name: r.workerName,
        provider: r.provider,
        pod_id: r.podId,
        gpus: r.gpus,
        billed_seconds: seconds,
        billed_cost: perHour === null ? null : Math.round((seconds / 3600) * perHour * 1e4) / 1e4,
      });
    }
  }
  return out.sort((a, b) => a.day.localeCompare(b.day) || a.worker_name.localeCompare(b.worker_name));
}

/** What a cloud worker is asked for. */
export interface CloudWorkerRequest {
  name: string;
  provider: "runpod" | "kubernetes";
  gpu_type: string;
  gpus: number;
}

/** Options of the cloud workers: the configured providers and how pods join and end. */
export interface CloudOptions {
  /** The providers the operator configured (read when used: settings may change). */
  providers(): Partial<Record<"runpod" | "kubernetes", CloudProvider>>;
  image(): string;
  /** The URL pods join this host's agent endpoint at. */
  joinUrl(): string;
  fingerprint(): string;
  /** How long a delete waits for the provider to confirm the pod is gone. */
  confirmMs(): number;
  /** The first wait before a termination not confirmed is tried again (doubling, at most 30 min). */
  retryMs(): number;
  /** Told when a worker is removed (its agent link dropped, placement run again). */
  onRemoved(workerId: string): Promise<void>;
  clock?: Clock;
}

/** The most a failed termination waits before its next try. */
const MAX_RETRY_MS = 30 * 60_000;

/** Cloud GPU workers: created through a provider, removed only once it confirms their pod is gone. */
export class CloudWorkers {
  private readonly clock: Clock;
  /** Retries of terminations the provider did not confirm, as they fall due. */
  private readonly retries: SerialRunner;

  constructor(
    private readonly db: Db,
    private readonly opts: CloudOptions,
  ) {
    this.clock = opts.clock ?? realClock;
    this.retries = new SerialRunner(() => this.retryDue(), {
      every: 5_000,
      clock: this.clock,
      onError: (e) => log.warn("retrying cloud pod terminations failed", e),
    });
  }

  start(): void {
    this.retries.start();
  }

  stop(): Promise<void> {
    return this.retries.stop();
  }

  private provider(name: "runpod" | "kubernetes"): CloudProvider {
    const p = this.opts.providers()[name];
    if (!p)
      throw conflict(
        name === "runpod"
          ? "RunPod is not set up: start inferd with --runpod-api-key (INFERD_RUNPOD_API_KEY)"
          : "Kubernetes is not set up: start inferd with --kube-api-url and --kube-token",
        "cloud_provider_not_configured",
      );
    return p;
  }

  /**
   * Creates a worker and its pod: the pod runs the agent with the worker's one-time token. A pod
   * the provider refuses leaves no worker behind (502 with the provider's words).
   */
  async create(req: CloudWorkerRequest): Promise<{ worker: WorkerView; pod: PodView }> {
    if (!CLOUD_GPU_COUNTS.includes(req.gpus))
      throw validation("gpus", "must be 1, 2, 4 or 8 (GPUs of one model per pod)");
    const provider = this.provider(req.provider);
    const { worker, token } = await createRemoteWorker(this.db, req.name, this.opts.fingerprint());
    let made: { podId: string; costPerHour: number | null };
    try {
      made = await provider.create({
        name: req.name,
        gpuType: req.gpu_type,
        gpus: req.gpus,
        image: this.opts.image(),
        args: ["inferd", "agent", "join", this.opts.joinUrl(), "--token", token],
        env: { INFERD_WORKER_NAME: req.name },
      });
    } catch (e) {
      await deleteRemoteWorker(this.db, worker.id);
      if (e instanceof ProviderFailed) throw new AppError(502, "cloud_provider_failed", e.message, {}, "provider");
      throw e;
    }
    const row: PodRow = {
      workerId: worker.id,
      workerName: req.name,
      provider: req.provider,
      podId: made.podId,
      gpuType: req.gpu_type,
      gpus: req.gpus,
      costMicrosPerHour: made.costPerHour === null ? null : Math.round(made.costPerHour * 1e6),
      state: "running",
      reason: null,
      attempts: 0,
      nextAttemptAt: null,
      createdAt: nowIso(),
      endedAt: null,
    };
    await this.db.insert(cloudPods).values(row);
    await audit(
      this.db,
      "worker.cloud_create",
      { type: "worker", id: worker.id, label: req.name },
      {
        provider: req.provider,
        pod_id: made.podId,
        gpu_type: req.gpu_type,
        gpus: req.gpus,
      },
    );
    return { worker, pod: podView(row, this.clock.now()) };
  }

  /** Every pod inferd created, newest last, billed up to now. */
  async pods(): Promise<PodView[]> {
    const rows = await this.db.select().from(cloudPods).orderBy(asc(cloudPods.createdAt));
    return rows.map((r) => podView(r, this.clock.now()));
  }

  /** Each pod's billed time per UTC day over `from`..`to`. */
  async billedByDay(from: string, to: string): Promise<CloudDay[]> {
    return billedDays(await this.db.select().from(cloudPods), from, to, this.clock.now());
  }

  /** The pod of a worker that still stands, if it is a cloud worker. */
  async podOf(workerId: string): Promise<PodView | undefined> {
    const [r] = await this.db.select().from(cloudPods).where(eq(cloudPods.workerId, workerId));
    return r && r.state !== "terminated" ? podView(r, this.clock.now()) : undefined;
  }

  /**
   * Deletes a cloud worker: terminates its pod and waits for the provider to confirm it is gone;
   * then the worker is removed and its billing closed. Unconfirmed, the worker is kept as
   * "termination pending (pod …)" and a 502 `termination_pending` says why; inferd tries again.
   * Undefined when `workerId` is not a cloud worker.
   */
  async remove(workerId: string): Promise<WorkerView | undefined> {
    const [r] = await this.db.select().from(cloudPods).where(eq(cloudPods.workerId, workerId));
    if (!r || r.state === "terminated") return undefined;
    await this.db.update(cloudPods).set({ state: "terminating" }).where(eq(cloudPods.workerId, workerId));
    const ended = await this.end(r);
    if ("removed" in ended) return ended.removed;
    throw new AppError(
      502,
      "termination_pending",
      `termination pending (pod ${r.podId}): ${ended.why}; the worker is kept and the pod may still be billed; inferd tries again at ${ended.next}`,
      {},
      undefined,
      { pod_id: r.podId, next_attempt_at: ended.next },
    );
  }

  /** One try at ending a pod: terminate, then wait for the provider to confirm it is gone. */
  private async end(r: PodRow): Promise<{ removed: WorkerView } | { why: string; next: string }> {
    const provider = this.opts.providers()[r.provider];
    let why: string;
    if (!provider) why = `${r.provider} is no longer set up on this host`;
    else {
      try {
        await provider.terminate(r.podId);
        why = await this.confirmGone(provider, r.podId);
      } catch (e) {
        if (!(e instanceof ProviderFailed)) throw e;
        why = e.message;
      }
    }
    if (!why) return { removed: await this.closed(r) };
    const attempts = r.attempts + 1;
    const wait = Math.min(this.opts.retryMs() * 2 ** (attempts - 1), MAX_RETRY_MS);
    const next = new Date(this.clock.now() + wait).toISOString();
    await this.db
      .update(cloudPods)
      .set({ state: "termination_pending", reason: why, attempts, nextAttemptAt: next })
      .where(eq(cloudPods.workerId, r.workerId));
    this.retries.after(wait);
    log.warn(`cloud worker ${r.workerName}: termination pending (pod ${r.podId}): ${why}`);
    return { why, next };
  }

  /** "" once the provider says the pod is gone, else why not (within the confirmation wait). */
  private async confirmGone(provider: CloudProvider, podId: string): Promise<string> {
    const deadline = this.clock.now() + this.opts.confirmMs();
    for (;;) {
      const state = await provider.state(podId);
      if (state === "gone") return "";
      if (this.clock.now() >= deadline)
        return `the provider still reports the pod ${state} ${Math.round(this.opts.confirmMs() / 1000)} s after it was asked to terminate it`;
      await Bun.sleep(Math.min(500, this.opts.confirmMs()));
    }
  }

  /** The provider confirmed the pod is gone: its billing closes and the worker goes. */
  private async closed(r: PodRow): Promise<WorkerView> {
    await this.db
      .update(cloudPods)
      .set({ state: "terminated", reason: null, nextAttemptAt: null, endedAt: nowIso() })
      .where(eq(cloudPods.workerId, r.workerId));
    let removed: WorkerView;
    try {
      removed = await deleteRemoteWorker(this.db, r.workerId);
    } catch {
      removed = workerView(
        await getWorker(this.db, r.workerId).catch(() => {
          throw notFound(`worker "${r.workerId}"`);
        }),
      );
    }
    await this.opts.onRemoved(r.workerId);
    return removed;
  }

  /** Tries again every termination whose time has come. */
  private async retryDue(): Promise<void> {
    const due = await this.db
      .select()
      .from(cloudPods)
      .where(
        and(
          eq(cloudPods.state, "termination_pending"),
          lte(cloudPods.nextAttemptAt, new Date(this.clock.now()).toISOString()),
        ),
      );
    for (const r of due) await this.end(r);
  }
}
