import type { Db } from "../db";
import { Dispatcher, type QueueLimits, type Target, type Upstream } from "../dispatch/queue";
import { ReplicaLora, type CallRuntime } from "../dispatch/lora";
import { engineOf } from "../../agent/engines";
import { log } from "../log";
import { getWorkloadById, type Workload } from "../workloads/service";
import { workloadUsageOf } from "../keys/service";
import type { ReplicaReport, ReplicaSpec } from "../../agent/protocol";
import { notServed, runtimePath } from "../../agent/engines/custom";
import { LogRing } from "../../agent/ring";
import { uploadBytesFor, uploadStreamFor } from "../multipart";
import { TelemetryHistory } from "./telemetry";
import type { LaunchPolicy } from "../../agent/launch-policy";
import { publicReason } from "../../agent/reason";
import { initialDesired } from "../execution/decide";
import type { RestartPolicy } from "../../agent/supervisor";
import { SerialRunner } from "../../agent/serial";
import { Histogram, LATENCY_BUCKETS } from "../usage/histogram";
import { GroupRestarts } from "./group-restarts";
import { recordEndpoint } from "./groups";
import type { ScalingView } from "../execution/schema";
import { autoAssign } from "./placing";
import { desiredFor } from "./desired";
import {
  getAssignment,
  getWorker,
  listAllAssignments,
  listAssignments,
  listAssignmentsOfWorker,
  setAssignmentState,
  type AssignmentView,
} from "./service";

/** Builds the request target of a ready replica (local: fetch its loopback URL; remote: via its agent). */
export type TargetFactory = (
  worker: { id: string; kind: "local" | "remote" },
  report: ReplicaReport,
  concurrency: number,
  workloadId: string,
) => Target;

/**
 * A JSON body as it goes to a runtime: `model` set to the name the runtime serves, then the request's
 * last change (a LoRA adapter's selection: src/dispatch/lora.ts).
 */
function runtimeJson(
  req: Pick<Upstream, "select">,
  json: Record<string, unknown>,
  served: string | undefined,
): Record<string, unknown> {
  const body = { ...json, model: served ?? json.model };
  return req.select ? req.select(body) : body;
}

/**
 * The JSON body's text for a runtime serving `served`: the client's own text when the runtime serves
 * the model it names and nothing else changes (most requests), else `runtimeJson`'s body printed.
 */
export function runtimeText(
  req: Pick<Upstream, "select" | "text">,
  json: Record<string, unknown>,
  served: string | undefined,
): string {
  if (req.text !== undefined && !req.select && (served === undefined || served === json.model)) return req.text;
  return JSON.stringify(runtimeJson(req, json, served));
}

/**
 * The LoRA side of a newly ready replica whose report lists adapters (`undefined` when its engine
 * serves none), calling the runtime through `target`.
 */
export function replicaLora(backend: string, report: ReplicaReport, target: Target): ReplicaLora | undefined {
  const engine = engineOf(backend)?.lora;
  if (!engine || !report.adapters?.length) return undefined;
  const enc = new TextEncoder();
  const call: CallRuntime = async (c, signal) => {
    const r = await target.send(
      {
        path: c.path,
        method: c.method,
        headers: { "content-type": "application/json" },
        body: c.body === undefined ? null : enc.encode(JSON.stringify(c.body)),
      },
      signal,
    );
    return { status: r.status, body: await r.text() };
  };
  return new ReplicaLora(engine, report.adapters, report.lora_slots ?? Number.POSITIVE_INFINITY, call);
}

/** A target that fetches a runtime on this machine's loopback. */
export function localTarget(
  worker: { id: string },
  report: ReplicaReport,
  concurrency: number,
  workloadId: string,
): Target {
  const base = report.base_url!;
  return {
    id: report.assignment_id,
    workloadId,
    workerId: worker.id,
    capacity: concurrency,
    inFlight: 0,
    send: (req: Upstream, signal: AbortSignal) => {
      // A custom server serves only its routes, each at its own path (agent/engines/custom.ts);
      // the other runtimes serve inferd's paths as they are.
      const path = report.paths ? runtimePath(report.paths, req.path) : req.path;
      if (path === null) return Promise.resolve(notServed());
      const served = report.served_model;
      let body = (
        req.body
          ? uploadBytesFor(req, req.body, served)
          : req.source
            ? uploadStreamFor(req, req.source.stream(), served)
            : null
      ) as BodyInit | null;
      if (req.json) body = runtimeText(req, req.json, report.served_model);
      const headers = report.api_key ? { ...req.headers, authorization: `Bearer ${report.api_key}` } : req.headers;
      return fetch(base + path, { method: req.method, headers, body, signal, duplex: "half" } as RequestInit);
    },
  };
}

/**
 * The host's view of where workloads run: places workloads on workers, tells agents what to run,
 * takes their replica reports and keeps the dispatcher's ready replicas in step with them.
 */
export class Fleet {
  readonly dispatcher: Dispatcher;
  private unplaced = new Map<string, string>();
  private reports = new Map<string, ReplicaReport>();
  /** The slots each replica's runtime last reported, kept while it is idle (its report is dropped then). */
  private slots = new Map<string, number>();
  private listeners = new Set<() => void>();
  private offline = new Set<string>();
  private verdicts = new Map<string, { always?: string; offline?: string }>();
  /** The scaler, once started: wakes on demand and shows its decisions (src/scaling). */
  scaling?: { wake(workloadId?: string): void; view(w: Workload): ScalingView };
  /** Output of every replica (and shared daemon) by assignment id, for the logs API. */
  readonly rings = new Map<string, LogRing>();
  readonly telemetry = new TelemetryHistory();
  /** Restarts multi-node groups whole when a member fails. */
  readonly groups: GroupRestarts;

  private readonly makeTarget: TargetFactory;
  private readonly policy?: LaunchPolicy;
  private readonly places: () => boolean;
  private readonly hostId: string | null;

  constructor(
    private db: Db,
    opts: {
      limits: QueueLimits;
      makeTarget?: TargetFactory;
      policy?: LaunchPolicy;
      /** Whether this host places workloads (in a cluster only the leader does; alone, always). */
      places?: () => boolean;
      /** This host: its own machine's replicas are reached in-process, every other worker's through its agent. */
      hostId?: string;
      /** Back-off and crash limit of multi-node groups (restarted whole when a member fails). */
      groupRestart?: RestartPolicy;
      /** The targets of external providers' workloads (src/providers), made again at each pass. */
      providers?: () => Promise<Target[]>;
    },
  ) {
    this.groups = new GroupRestarts(db, {
      policy: opts.groupRestart,
      onChange: () => void this.reconcile(),
      onNote: (groupId, line) => {
        void listAllAssignments(db).then((all) => {
          for (const a of all)
            if (a.group_id === groupId) this.ringFor(a.id).push(`\x1b[1;33m[inferd] ${line}\x1b[0m\r\n`);
        });
      },
    });
    this.makeTarget = opts.makeTarget ?? localTarget;
    this.providers = opts.providers;
    this.policy = opts.policy;
    this.places = opts.places ?? (() => true);
    this.hostId = opts.hostId ?? null;
    this.dispatcher = new Dispatcher(
      opts.limits,
      (id, kind) => this.unservable(id, kind),
      (id) => this.scaling?.wake(id),
      undefined,
      (id) => this.waitingBecause(id),
    );
    this.placer.start();
  }

  /** Placement passes, one at a time. */
  private readonly placer = new SerialRunner(() => this.pass(), {
    onError: (e) => log.error("placing workloads failed", e),
  });
  /** The placement in progress: placing workloads and the scaler's starts run one after the other. */
  private placing: Promise<unknown> = Promise.resolve();

  /**
   * Runs `place` once no other placement runs (workload placement here, the scaler's starts and
   * stops): two at once would each see the same free GPU and both put a replica on it.
   */
  exclusively<T>(place: () => Promise<T>): Promise<T> {
    const run = this.placing.then(place, place);
    this.placing = run.catch(() => undefined);
    return run;
  }

  /**
   * Re-places workloads and wakes every agent so it reconciles. One pass at a time: a call during
   * one asks for another after it; the promise settles when a pass that began after the call ends.
   */
  reconcile(): Promise<void> {
    return this.placer.run();
  }

  /** The targets of external providers' workloads, and the ids this fleet gave the dispatcher. */
  private readonly providers?: () => Promise<Target[]>;
  private providerIds = new Set<string>();

  /** Gives the dispatcher a target per provider workload now, and takes back those of workloads gone. */
  private async syncProviders(): Promise<void> {
    if (!this.providers) return;
    const now = await this.providers();
    const ids = new Set(now.map((t) => t.id));
    for (const t of now) this.dispatcher.upsertTarget(t);
    for (const id of this.providerIds) if (!ids.has(id)) this.dispatcher.removeTarget(id);
    this.providerIds = ids;
  }

  private async pass(): Promise<void> {
    this.verdicts.clear();
    await this.syncProviders();
    if (this.places()) this.unplaced = await this.exclusively(() => autoAssign(this.db));
    const present = new Set((await listAllAssignments(this.db)).map((a) => a.id));
    for (const [id, r] of this.reports) {
      if (!present.has(id)) {
        this.reports.delete(id);
        this.rings.delete(id);
        this.dispatcher.removeTarget(r.assignment_id);
      }
    }
    for (const id of this.slots.keys()) if (!present.has(id)) this.slots.delete(id);
    for (const cb of this.listeners) cb();
    for (const id of this.unplaced.keys()) this.dispatcher.failIfUnservable(id);
  }

  /** The output ring of an assignment's replica, made on first use. */
  ringFor(id: string): LogRing {
    let ring = this.rings.get(id);
    if (!ring) this.rings.set(id, (ring = new LogRing()));
    return ring;
  }

  /** Calls `cb` whenever what agents should run may have changed; returns an unsubscribe. */
  subscribe(cb: () => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  /** What a worker should run now. */
  desired(workerId: string): Promise<ReplicaSpec[]> {
    return desiredFor(this.db, workerId, this.policy);
  }

  /** Reports being applied, by assignment: one replica's reports are applied in the order they came. */
  private applying = new Map<string, Promise<void>>();

  /** Takes an agent's report of one replica; ignores replicas that are no longer assigned to it. */
  report(workerId: string, r: ReplicaReport): Promise<void> {
    const prev = this.applying.get(r.assignment_id) ?? Promise.resolve();
    const next = prev
      .then(() => this.apply(workerId, r))
      .catch((e) => log.warn(`could not apply a report of replica ${r.assignment_id}`, e));
    this.applying.set(r.assignment_id, next);
    void next.finally(() => this.applying.get(r.assignment_id) === next && this.applying.delete(r.assignment_id));
    return next;
  }

  private async apply(workerId: string, r: ReplicaReport): Promise<void> {
    let a;
    try {
      a = await getAssignment(this.db, r.assignment_id);
    } catch {
      return;
    }
    if (a.worker_id !== workerId) return;
    // A group member's report about an earlier start of its group (restarted since) is stale.
    if (a.group_id && r.group_generation !== undefined && r.group_generation !== a.generation) return;
    if (a.desired === "idle") {
      // Told to stop (scaled to zero, swapped out, stopped): it shows `idle` once it has.
      this.dispatcher.removeTarget(a.id);
      this.reports.delete(a.id);
      if (r.state === "stopped" || r.state === "failed" || r.state === "pending") {
        // A group given up keeps showing `failed` (with the member that failed) once its members stopped.
        await setAssignmentState(this.db, a.id, a.group_id && a.state === "failed" ? "failed" : "idle", a.reason);
        this.verdicts.delete(a.workload_id);
        this.scaling?.wake(); // its GPU memory may be what another replica waits for
      }
      return;
    }
    // The report is kept before its state is stored: the admin view reads the state from the store and
    // the base URL from the report, and must not show a ready replica without its URL in between.
    this.reports.set(a.id, r);
    if (r.slots) this.slots.set(a.id, r.slots);
    // Asleep, a replica keeps the scaler's words for why (its agent says none).
    const reason = r.reason ?? (r.state === "sleeping" ? (a.reason ?? undefined) : undefined);
    if (a.state !== r.state || (a.reason ?? undefined) !== reason) {
      await setAssignmentState(this.db, a.id, r.state, reason);
      this.verdicts.delete(a.workload_id);
      this.timeSwitch(a, r);
      // A replica asleep frees its GPU memory: what another replica may wait for.
      if (r.state === "sleeping") this.scaling?.wake();
      if (r.state === "sleeping" || r.state === "waking") this.dispatcher.asleep.add(a.workload_id);
      else if (r.state === "ready" || r.state === "failed" || r.state === "stopped")
        this.dispatcher.asleep.delete(a.workload_id);
    }
    if (a.group_id) return this.applyMember(workerId, a, r);
    const slots = a.concurrency_set ? a.concurrency : (r.slots ?? a.concurrency);
    // Only a replica told to run takes requests (one told to sleep stops taking them at once).
    if (r.state === "ready" && r.base_url && a.desired === "run") {
      const t = this.makeTarget({ id: workerId, kind: await this.kindOf(workerId) }, r, slots, a.workload_id);
      if (r.adapters?.length) {
        // The one it had keeps what its runtime holds and takes the newer list; a new one needs the engine.
        const had = this.dispatcher.targetOf(a.id)?.lora;
        had?.update(r.adapters);
        t.lora = had ?? replicaLora((await getWorkloadById(this.db, a.workload_id))?.backend ?? "", r, t);
      }
      this.dispatcher.upsertTarget(t);
    } else this.dispatcher.removeTarget(a.id);
    this.dispatcher.failIfUnservable(a.workload_id);
  }

  /**
   * A multi-node group member's report: its endpoint is stored for the other members, a change of
   * endpoint or readiness wakes the agents (members wait on each other), a failure restarts the
   * whole group, and only the leader (rank 0) takes requests.
   */
  private async applyMember(workerId: string, a: AssignmentView, r: ReplicaReport): Promise<void> {
    const worker = await getWorker(this.db, workerId);
    const moved = await recordEndpoint(this.db, a, worker.clusterAddress, r.group_port);
    if (r.state === "failed" && a.state !== "failed") await this.groups.memberFailed(a, worker.name, r.reason);
    if (a.node_rank === 0 && r.state === "ready" && r.base_url) {
      const slots = a.concurrency_set ? a.concurrency : (r.slots ?? a.concurrency);
      this.dispatcher.upsertTarget(
        this.makeTarget({ id: workerId, kind: await this.kindOf(workerId) }, r, slots, a.workload_id),
      );
    } else this.dispatcher.removeTarget(a.id);
    this.dispatcher.failIfUnservable(a.workload_id);
    if (moved || (a.state === "ready") !== (r.state === "ready")) for (const cb of this.listeners) cb();
  }

  private kinds = new Map<string, "local" | "remote">();

  /**
   * Whether a worker is this host's own machine (reached in-process) or another's, a remote agent or
   * another cluster host's machine, reached through its agent (it never changes: read once).
   */
  private async kindOf(workerId: string): Promise<"local" | "remote"> {
    let k = this.kinds.get(workerId);
    if (!k) {
      const w = await getWorker(this.db, workerId);
      k = w.kind === "local" && (w.hostId === null || w.hostId === this.hostId) ? "local" : "remote";
      this.kinds.set(workerId, k);
    }
    return k;
  }

  /** Applies a new slot count to a ready replica at once. */
  setCapacity(assignmentId: string, capacity: number): void {
    for (const t of this.dispatcher.allTargets()) {
      if (t.id === assignmentId) {
        t.capacity = capacity;
        this.dispatcher.drain(t.workloadId);
      }
    }
  }

  /** The replicas a worker runs, with their workload, state, download progress and when the state last changed. */
  async replicasOf(workerId: string) {
    const out = [];
    for (const a of await listAssignmentsOfWorker(this.db, workerId)) {
      const w = await getWorkloadById(this.db, a.workload_id);
      const progress = a.state === "downloading" ? this.reports.get(a.id)?.progress : undefined;
      out.push({
        assignment_id: a.id,
        workload_id: a.workload_id,
        project_id: w?.project_id ?? null,
        workload: w ? `${w.project_slug}/${w.slug}` : null,
        state: a.state,
        reason: a.reason,
        concurrency: a.concurrency,
        gpu_indices: a.gpu_indices,
        /** The compute backend the ready runtime reports ("CUDA", "CPU (GPU build unavailable: …)"), as the workload's view has it. */
        backend: a.state === "ready" ? this.reports.get(a.id)?.backend : undefined,
        /** The workload's engine (llamacpp, vllm, ollama…): Ollama's daemon picks its GPUs itself. */
        engine: w?.backend ?? null,
        progress,
        /** While asleep: the level, and the host RAM (MiB) it holds (its weights at level 1), as its agent said. */
        sleep_level: a.state === "sleeping" ? (this.reports.get(a.id)?.sleep_level ?? null) : null,
        host_ram_mib: a.state === "sleeping" ? (this.reports.get(a.id)?.host_ram_mib ?? null) : null,
        updated_at: a.updated_at,
      });
    }
    return out;
  }

  /** How long replicas took to become ready: a wake from sleep, or a start (`inferd_switch_seconds`). */
  readonly switches = new Histogram(
    "inferd_switch_seconds",
    "Time a replica took to take requests: kind=wake from sleep (the agent's measure), kind=start from told to run to ready.",
    LATENCY_BUCKETS,
  );
  /** When each replica was last seen starting (ms), for the start switches. */
  private startedAt = new Map<string, number>();

  /** Counts a replica's switch to ready: a wake (its agent timed it) or a start (since it was first seen starting). */
  private timeSwitch(a: AssignmentView, r: ReplicaReport): void {
    if (r.state === "pending" || r.state === "starting" || r.state === "downloading" || r.state === "installing") {
      if (!this.startedAt.has(a.id)) this.startedAt.set(a.id, Date.now());
      return;
    }
    if (r.state !== "ready") {
      this.startedAt.delete(a.id);
      return;
    }
    const started = this.startedAt.get(a.id);
    this.startedAt.delete(a.id);
    if (a.state === "waking" || a.state === "sleeping")
      this.switches.observe({ workload: a.workload_id, kind: "wake" }, (r.switch_ms ?? 0) / 1000);
    else if (started !== undefined)
      this.switches.observe({ workload: a.workload_id, kind: "start" }, (Date.now() - started) / 1000);
  }

  /** Drops every replica of a worker from the dispatcher (the worker went away). */
  forgetWorker(workerId: string): void {
    this.dispatcher.removeWorker(workerId);
  }

  /**
   * Why a workload cannot take requests now (answered at once), or undefined to let them wait.
   * Judged from the store once per change (a report, a placement), not per request: a workload not
   * judged yet lets the request wait while it is, and the waiters are failed then if it cannot serve.
   */
  unservable(workloadId: string, kind: "sync" | "job" = "sync"): string | undefined {
    const v = this.verdicts.get(workloadId);
    if (!v) {
      this.judgeSoon(workloadId);
      return undefined;
    }
    // Jobs wait for a worker to come back; a client is told at once.
    return kind === "job" ? v.always : (v.always ?? v.offline);
  }

  private judging = new Set<string>();

  /** Judges a workload in the background and fails its waiters if it cannot serve. */
  private judgeSoon(workloadId: string): void {
    if (this.judging.has(workloadId)) return;
    this.judging.add(workloadId);
    void this.judge(workloadId)
      .then((v) => {
        this.verdicts.set(workloadId, v);
        this.dispatcher.failIfUnservable(workloadId);
      })
      .catch((e) => log.warn(`could not judge workload ${workloadId}`, e))
      .finally(() => this.judging.delete(workloadId));
  }

  private async judge(workloadId: string): Promise<{ always?: string; offline?: string }> {
    const w = await getWorkloadById(this.db, workloadId);
    const placed = await listAssignments(this.db, workloadId);
    if (w?.paused)
      return { offline: "this workload is stopped by the operator; async jobs wait until it is started again" };
    if (w?.execution_policy === "scheduled" && initialDesired(w, Date.now()).desired === "idle")
      return {
        offline: "this workload runs on a schedule and no window is open now; async jobs wait for the next window",
      };
    if (placed.length === 0)
      return {
        always: this.unplaced.get(workloadId)
          ? `this workload cannot be placed: ${this.unplaced.get(workloadId)}`
          : undefined,
      };
    const failed = placed.filter((a) => a.state === "failed");
    if (failed.length === placed.length)
      return {
        always: `every replica of this workload failed to start: ${failed[0].reason ? publicReason(failed[0].reason) : "unknown reason"}`,
      };
    const down = placed.filter((a) => a.state === "failed" || this.offline.has(a.worker_id));
    if (down.length === placed.length)
      return { offline: "every worker of this workload is offline; retry when one is back" };
    return {};
  }

  /** Why a workload's replicas are not taking requests, from their states' reasons (for a queue timeout). */
  private async waitingBecause(workloadId: string): Promise<string | undefined> {
    const notReady = (await listAssignments(this.db, workloadId)).filter((a) => a.state !== "ready" && a.reason);
    return notReady.length ? notReady.map((a) => `${a.state}: ${publicReason(a.reason!)}`).join("; ") : undefined;
  }

  /** Marks a worker offline or back online, and what that means for its workloads. */
  async setOffline(workerId: string, offline: boolean): Promise<void> {
    if (offline) this.offline.add(workerId);
    else this.offline.delete(workerId);
    this.verdicts.clear();
    const placed = await listAssignmentsOfWorker(this.db, workerId);
    for (const a of placed) {
      if (offline && a.state !== "failed") await setAssignmentState(this.db, a.id, "pending", "its worker is offline");
      this.judgeSoon(a.workload_id);
    }
    // A group whose member's agent is lost is placed again whole (on the next pass, now).
    if (placed.some((a) => a.group_id)) void this.reconcile();
  }

  /** The admin view of a workload: stored fields, replicas with their states, queue and usage. */
  async describe(w: Workload) {
    const fresh = (await getWorkloadById(this.db, w.id)) ?? w;
    return {
      ...fresh,
      assignments: (await listAssignments(this.db, w.id)).map((a) => ({
        ...a,
        concurrency: a.concurrency_set ? a.concurrency : (this.slots.get(a.id) ?? a.concurrency),
        in_flight: this.dispatcher.targetsOf(w.id).find((t) => t.id === a.id)?.inFlight ?? 0,
        base_url: this.reports.get(a.id)?.base_url,
        served_model: this.reports.get(a.id)?.served_model,
        backend: a.state === "ready" ? this.reports.get(a.id)?.backend : undefined,
        progress: a.state === "downloading" ? this.reports.get(a.id)?.progress : undefined,
      })),
      scheduling_error: this.unplaced.get(w.id) ?? null,
      scaling: this.scaling?.view(fresh) ?? null,
      queue_depth: this.dispatcher.depth(w.id),
      usage: await workloadUsageOf(this.db, w.id),
    };
  }
}

/** The admin view of one workload (`GET /admin/workloads/:id`), as `Fleet.describe` builds it. */
export type WorkloadDetail = Awaited<ReturnType<Fleet["describe"]>>;

/** One replica as a worker lists it (`GET /admin/workers`). */
export type WorkerReplica = Awaited<ReturnType<Fleet["replicasOf"]>>[number];
