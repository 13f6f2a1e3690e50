import type { Db } from "../db";
import { log } from "../log";
import { listAllWorkloads, type Workload } from "../workloads/service";
import type { Fleet } from "../workers/fleet";
import { listAssignments, setAssignmentDesired, type AssignmentView } from "../workers/service";
import { decideAutoscaling, decideScheduled, type Decision, type Memory } from "../execution/decide";
import {
  DEFAULTS,
  type AutoscalingParams,
  type FixedParams,
  type ScalingView,
  type ScheduledParams,
} from "../execution/schema";
import { Room } from "./room";
import { replicaRoom } from "../limits/project";
import { plural } from "../words";
import { realClock, SerialRunner, type Clock } from "../../agent/serial";

/** How long after one look the scaler looks at every workload again (demand wakes it at once in between). */
const TICK_MS = 1000;

/** What the scaler needs of the fleet: its queues, placement one at a time, and a re-placement after a change. */
export type ScalerFleet = Pick<Fleet, "dispatcher" | "exclusively" | "reconcile">;

/**
 * Makes execution policies real: decides, per workload, how many replicas should run (pure
 * functions in decide.ts), and changes assignments to match — starting idle ones or placing new
 * ones where the GPUs have room (swapping out least-recently-used idle replicas of other workloads
 * that may go to zero when they must), idling or removing surplus ones. Agents do the rest.
 */
export class Scaler {
  private memory = new Map<string, Memory>();
  private views = new Map<string, ScalingView>();
  private busyAt = new Map<string, number>();
  private held = new Map<string, number>();
  /** Workload ids by `<project id>/<slug>`, as of the last look (what `warm_with` names). */
  private ids = new Map<string, string>();
  /** When each workload last had a request queued or in flight, as seen (not its start: `busyAt` counts that too). */
  private usedAt = new Map<string, number>();
  private stopped = false;
  /** Looks one at a time, each a second after the last; not looking before `start` (a host that does not lead never starts it) and after `standBy`. */
  private readonly looks: SerialRunner;
  readonly room: Room;

  constructor(
    private db: Db,
    private fleet: ScalerFleet,
    private clock: Clock = realClock,
  ) {
    this.room = new Room(db, fleet);
    this.looks = new SerialRunner(() => this.lookOnce(), {
      every: TICK_MS,
      clock,
      onError: (e) => log.error("scaling failed", e),
    });
  }

  /** Starts looking: now, then every second (again, after `standBy`). */
  start(): void {
    if (this.stopped) return;
    this.looks.start();
    void this.looks.run();
  }

  /** Stops deciding (another host of the cluster leads now); `start` resumes. */
  standBy(): void {
    void this.looks.stop();
  }

  /** Stops looking; resolves when the look in progress has ended. */
  stop(): Promise<void> {
    this.stopped = true;
    return this.looks.stop();
  }

  /** A request or job for `workloadId` is waiting: look now (a cold start should not wait a tick). */
  wake(workloadId?: string): void {
    if (workloadId) this.busyAt.set(workloadId, this.clock.now());
    if (workloadId) this.usedAt.set(workloadId, this.clock.now());
    this.looks.wake();
  }

  /** Looks at every workload now (or after the look in progress); resolves when that look has ended. */
  look(): Promise<void> {
    return this.looks.run();
  }

  /**
   * Keeps the scaler from stopping replicas of a workload (a rolling restart runs one extra for a
   * while); returns the release.
   */
  hold(workloadId: string): () => void {
    this.held.set(workloadId, (this.held.get(workloadId) ?? 0) + 1);
    return () => {
      const n = (this.held.get(workloadId) ?? 1) - 1;
      if (n > 0) this.held.set(workloadId, n);
      else this.held.delete(workloadId);
    };
  }

  /** The scaling view of a workload. */
  view(w: Workload): ScalingView {
    return (
      this.views.get(w.id) ?? {
        policy: w.execution_policy,
        desired: 0,
        current: 0,
        running: 0,
        last_decision: null,
        reason: "not evaluated yet",
      }
    );
  }

  /** When a workload last had work (for LRU eviction and idle timeouts). */
  lastBusy(workloadId: string): number {
    return this.busyAt.get(workloadId) ?? 0;
  }

  private async lookOnce(): Promise<void> {
    const changed = await this.fleet.exclusively(async () => {
      let any = false;
      const all = await listAllWorkloads(this.db);
      this.ids = new Map(all.map((w) => [`${w.project_id}/${w.slug}`, w.id]));
      for (const w of all) {
        try {
          any = (await this.evaluate(w)) || any;
        } catch (e) {
          log.error(`scaling ${w.project_slug}/${w.slug} failed`, e);
        }
      }
      return any;
    });
    if (changed) await this.fleet.reconcile();
  }

  /** The decision for one workload now; `manual` counts the replicas placed by hand. */
  decide(w: Workload, running: number, manual = 0): Decision {
    if (w.paused)
      return { desired: 0, reason: "stopped by the operator (POST …/start to run it again)", onDemand: false };
    const now = this.clock.now();
    if (w.execution_policy === "scheduled") return decideScheduled(w.execution_params as ScheduledParams, now);
    if (w.execution_policy === "autoscaling") {
      const targets = this.fleet.dispatcher.targetsOf(w.id);
      const inFlight = targets.reduce((s, t) => s + t.inFlight, 0);
      const queued = this.fleet.dispatcher.depth(w.id);
      if (queued + inFlight > 0) this.usedAt.set(w.id, now);
      if (queued + inFlight > 0 || !this.busyAt.has(w.id)) this.busyAt.set(w.id, now);
      const slots = targets.length ? Math.round(targets.reduce((s, t) => s + t.capacity, 0) / targets.length) : 1;
      const load = { queued, inFlight, lastBusyAt: this.busyAt.get(w.id)!, slots };
      const r = decideAutoscaling(
        w.execution_params as AutoscalingParams,
        load,
        running,
        this.memory.get(w.id) ?? { pressureSince: null },
        now,
      );
      this.memory.set(w.id, r.memory);
      return this.preload(w, r.decision, now);
    }
    // Replicas placed by hand are the fixed set when there are any.
    if (manual > 0) return { desired: manual, reason: "fixed policy: the replicas placed by hand", onDemand: false };
    return {
      desired: (w.execution_params as FixedParams).replicas ?? DEFAULTS.fixed.replicas,
      reason: "fixed policy",
      onDemand: false,
    };
  }

  /**
   * `warm_with`: while a workload it names has requests queued or in flight (or had within this one's
   * idle timeout), at least one replica of `w` is wanted — started or woken ahead of its own first
   * request — and its idle timer counts from their use too.
   */
  private preload(w: Workload, d: Decision, now: number): Decision {
    const p = w.execution_params as AutoscalingParams;
    if (!p.warm_with?.length || w.paused) return d;
    const idleMs = (p.idle_timeout_s ?? DEFAULTS.autoscaling.idle_timeout_s) * 1000;
    const dispatcher = this.fleet.dispatcher;
    for (const slug of p.warm_with) {
      const id = this.ids.get(`${w.project_id}/${slug}`);
      if (!id || id === w.id) continue;
      const inUse = dispatcher.depth(id) > 0 || dispatcher.targetsOf(id).some((t) => t.inFlight > 0);
      if (inUse) this.usedAt.set(id, now);
      const used = this.usedAt.get(id);
      if (used === undefined || now - used >= idleMs) continue;
      if (used > (this.busyAt.get(w.id) ?? 0)) this.busyAt.set(w.id, used);
      if (d.desired === 0) return { desired: 1, reason: `preloading: ${slug} is in use (warm_with)`, onDemand: true };
    }
    return d;
  }

  /** Decides and acts for one workload; true when assignments changed. */
  private async evaluate(w: Workload): Promise<boolean> {
    const rows = await listAssignments(this.db, w.id);
    if (w.nodes > 1) return this.evaluateGroup(w, rows);
    const running = rows.filter((a) => a.desired === "run");
    const d = this.decide(w, running.length, rows.filter((a) => !a.auto).length);
    let action = "";
    let reason = d.reason;
    // A workload's first replica is the fleet's to place (autoAssign, on every change): placing it
    // here too races it and leaves two when both read "none" before either wrote (the store's reads
    // and writes interleave; on PostgreSQL they take long enough to do so often).
    if (d.desired > running.length && rows.length > 0) {
      const cap = await replicaRoom(this.db, w.project_id);
      const count = await this.withinCap(rows, d.desired - running.length, cap);
      if (count > 0) action = await this.room.startMore(w, rows, count, d.reason, (id) => this.lastBusy(id));
      if (count < d.desired - running.length)
        reason = `${d.reason}; ${d.desired - running.length - count} not started: ${cap.why}`;
    } else if (d.desired < running.length && !this.held.has(w.id))
      action = await this.stopSome(w, running, running.length - d.desired, d.reason);
    const prev = this.views.get(w.id);
    const ready = rows.filter((a) => a.desired === "run" && a.state === "ready").length;
    const last = action
      ? { at: new Date(this.clock.now()).toISOString(), action, reason: d.reason }
      : (prev?.last_decision ?? null);
    if (action) log.info(`scaling ${w.project_slug}/${w.slug}: ${action} (${d.reason})`);
    this.views.set(w.id, {
      policy: w.execution_policy,
      desired: d.desired,
      current: ready,
      running: running.length,
      last_decision: last,
      reason,
    });
    return action !== "";
  }

  /**
   * Decides and acts for a workload spanning machines: it runs as one group (placed by the fleet),
   * started and stopped whole. A group given up after too many failures stays stopped until the
   * operator restarts it.
   */
  private async evaluateGroup(w: Workload, rows: AssignmentView[]): Promise<boolean> {
    const leader = rows.find((a) => a.group_id && a.node_rank === 0);
    const members = leader ? rows.filter((a) => a.group_id === leader.group_id) : [];
    const running = leader && (leader.desired === "run" || leader.state === "failed") ? 1 : 0;
    const d = this.decide(w, running);
    const want = Math.min(d.desired, 1);
    let action = "";
    let reason = d.desired > 1 ? `${d.reason}; a workload spanning machines runs one group` : d.reason;
    if (leader && want > running) {
      const cap = await replicaRoom(this.db, w.project_id);
      if (cap.room > 0) {
        for (const a of members) await setAssignmentDesired(this.db, a.id, "run", d.reason);
        action = `started the group of ${members.length} machines`;
      } else reason = `${reason}; not started: ${cap.why}`;
    } else if (leader && want < running && !this.held.has(w.id) && leader.state !== "failed") {
      const busy = this.fleet.dispatcher.targetsOf(w.id).some((t) => t.inFlight > 0);
      if (!busy) {
        for (const a of members) await setAssignmentDesired(this.db, a.id, "idle", d.reason);
        action = `stopped the group of ${members.length} machines`;
      }
    }
    const prev = this.views.get(w.id);
    const last = action
      ? { at: new Date(this.clock.now()).toISOString(), action, reason: d.reason }
      : (prev?.last_decision ?? null);
    if (action) log.info(`scaling ${w.project_slug}/${w.slug}: ${action} (${d.reason})`);
    this.views.set(w.id, {
      policy: w.execution_policy,
      desired: want,
      current: leader?.desired === "run" && leader.state === "ready" ? 1 : 0,
      running,
      last_decision: last,
      reason,
    });
    return action !== "";
  }

  /**
   * How many of `wanted` more replicas the project's `max_replicas` lets start now. Replicas
   * already running are never stopped for it (a cap lowered below them holds new ones back only);
   * an idle replica held back says why.
   */
  private async withinCap(rows: AssignmentView[], wanted: number, cap: { room: number; why: string }): Promise<number> {
    if (cap.room >= wanted) return wanted;
    const why = `not started: ${cap.why}`;
    for (const a of rows)
      if (a.desired === "idle" && a.reason !== why) await setAssignmentDesired(this.db, a.id, "idle", why);
    return Math.max(0, cap.room);
  }

  /** Puts to sleep or stops `count` running replicas, those without requests first (see `Room.rest`). */
  private async stopSome(w: Workload, running: AssignmentView[], count: number, reason: string): Promise<string> {
    const inFlight = new Map(this.fleet.dispatcher.targetsOf(w.id).map((t) => [t.id, t.inFlight]));
    const quiet = running.filter((a) => !(inFlight.get(a.id) ?? 0)).slice(0, count);
    if (quiet.length === 0) return "";
    return this.room.rest(
      quiet.map((a) => a.id),
      reason,
      (id) => this.lastBusy(id),
    );
  }
}
