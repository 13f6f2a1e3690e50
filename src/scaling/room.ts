/**
 * The scaler's hands on placement: reads placement's snapshot, asks src/placement/room.ts whether
 * and where each replica can start (swapping out least recently used idle replicas when it must),
 * and writes the answers — moves, starts, swaps, waits with the reason — keeping the snapshot in
 * step so later decisions of the same pass see them.
 */
import type { Db } from "../db";
import type { Workload } from "../workloads/service";
import type { Fleet } from "../workers/fleet";
import { insertAssignment, moveAssignment, setAssignmentDesired, type AssignmentView } from "../workers/service";
import { loadSnapshot, replicaOfView } from "../workers/snapshot";
import { pickGpus } from "../placement/replica";
import { room, workerForAnother, type RoomContext, type Spot } from "../placement/room";
import { note, restFor, roomToReload, type Desired, type Snapshot } from "../placement/snapshot";
import { plural } from "../words";

/** Starts replicas where the GPUs have room, as src/placement/room.ts decides. */
export class Room {
  constructor(
    private db: Db,
    private fleet: Pick<Fleet, "dispatcher">,
  ) {}

  /**
   * Starts up to `count` more replicas of `w`: idle ones first (see `startOne`), then new ones on a
   * worker with room. Returns what it did.
   */
  async startMore(
    w: Workload,
    rows: AssignmentView[],
    count: number,
    reason: string,
    lastBusy: (id: string) => number,
  ): Promise<string> {
    const snap = await loadSnapshot(this.db);
    const ctx: RoomContext = { busy: this.busy(snap), lastBusy };
    const done: string[] = [];
    // Sleeping replicas first (a wake takes a fraction of a second; a start, a cold load), level 1 before 2.
    const rank = (d: string) => (d === "sleep" ? 0 : d === "deep_sleep" ? 1 : 2);
    const resting = rows.filter((x) => x.desired !== "run").sort((x, y) => rank(x.desired) - rank(y.desired));
    for (const a of resting.slice(0, count)) {
      done.push(await this.startOne(snap, a.id, reason, ctx));
      count--;
    }
    // Replicas placed by hand replace automatic ones: more are not added beside them.
    const ws = snap.workloads.get(w.id);
    for (; ws && count > 0 && !rows.some((a) => !a.auto); count--) {
      const worker = workerForAnother(snap, ws);
      if (!worker) break;
      const a = await insertAssignment(this.db, w, {
        workerId: worker.id,
        gpus: 1,
        gpuIndices: pickGpus(snap, worker, 1, ws.need.bytes, ws.pinnedGpu),
        auto: true,
        desired: "idle",
        reason: "placed",
      });
      note(snap, { add: replicaOfView(a) });
      done.push(`placed replica ${a.id} on ${worker.name}`, await this.startOne(snap, a.id, reason, ctx));
    }
    return done.filter(Boolean).join("; ");
  }

  /**
   * Starts one idle replica if it can: where there is room now (its own GPUs, else elsewhere), else
   * where swapping out idle replicas of other workloads makes room (it waits there for the memory),
   * else it waits, saying why. Returns what it did ("" when it only waits).
   */
  private async startOne(snap: Snapshot, id: string, reason: string, ctx: RoomContext): Promise<string> {
    const decision = room(snap, id, ctx);
    if (!decision) return "";
    const asleep = snap.replicas.find((r) => r.id === id)?.state === "sleeping";
    if ("start" in decision && asleep) {
      // Asleep at level 2, it reads its weights back through host RAM: older level-1 sleepers there stop for it.
      const ram = roomToReload(snap, id, ctx.lastBusy);
      if (ram && "wait" in ram) return "";
      if (ram) {
        const label = snap.workloads.get(snap.replicas.find((r) => r.id === id)!.workloadId)!.label;
        for (const x of ram.stop) await this.desire(snap, x.id, "idle", `stopped: host RAM needed to wake ${label}`);
        return `stopping ${ram.stop.length} sleeping replica(s) to free host RAM for replica ${id}`;
      }
    }
    if ("start" in decision) {
      // A sleeping replica wakes where it sleeps (its process is there); another starts where there is room.
      if (!asleep) await this.move(snap, id, decision.start);
      await this.desire(snap, id, "run", `${asleep ? "waking" : "starting"}: ${reason}`);
      if (asleep) return `waking replica ${id} on ${decision.start.worker.name}`;
      // What it was given: the backend the runtime really uses is the replica row's to say (it may fall back to the CPU).
      const given = decision.start.gpuIndices.length ? `GPU ${decision.start.gpuIndices.join(", ")}` : "no GPU";
      return `started replica ${id} on ${decision.start.worker.name} (given ${given})`;
    }
    if ("wait" in decision) {
      // A sleeping replica keeps sleeping while it waits for memory (it wakes in a moment once there is room).
      const r = snap.replicas.find((x) => x.id === id)!;
      if (asleep) await this.desire(snap, id, r.desired, decision.wait);
      else await this.desire(snap, id, "idle", decision.wait, "pending");
      return "";
    }
    if (!asleep) await this.move(snap, id, decision.swap);
    const label = snap.workloads.get(snap.replicas.find((r) => r.id === id)!.workloadId)!.label;
    // Those swapped out sleep when they can (their memory on the GPU is freed either way: one that must
    // wait for host RAM to sleep at level 1 goes to level 2 or stops instead, so the swap does not wait).
    for (const x of decision.evict) await this.restOne(snap, x.id, `swapped out for ${label}`, ctx.lastBusy, false);
    if (!asleep) await this.desire(snap, id, "idle", decision.why, "pending");
    return `swapping out ${decision.names.join(", ")} for replica ${id}`;
  }

  /**
   * Stops running `ids` (scaled down, idle, outside a schedule): each sleeps when its engine and
   * policy allow and host RAM has room (level 1, made by stopping sleepers that give way to it; else
   * 2), else stops. Returns what it did.
   */
  async rest(ids: string[], reason: string, lastBusy: (workloadId: string) => number): Promise<string> {
    const snap = await loadSnapshot(this.db);
    const done = { slept: 0, stopped: 0, kept: 0 };
    for (const id of ids) done[await this.restOne(snap, id, reason, lastBusy, true)]++;
    return [
      done.slept ? `put ${plural(done.slept, "replica")} to sleep` : "",
      done.stopped ? `stopped ${plural(done.stopped, "replica")}` : "",
      done.kept ? `kept ${plural(done.kept, "replica")} running until host RAM is freed to sleep` : "",
    ]
      .filter(Boolean)
      .join(", ");
  }

  /**
   * Rests one running replica as `restFor` says: the sleepers that give way to it are stopped first
   * (written first, so its agent stops them before it sleeps), then it sleeps or stops. When it would
   * have to wait for host RAM, it keeps running if `mayWait` (the scaler asks again next look), else
   * it takes the next rest that needs no wait (level 2, else stopped).
   */
  private async restOne(
    snap: Snapshot,
    id: string,
    reason: string,
    lastBusy: (workloadId: string) => number,
    mayWait: boolean,
  ): Promise<"slept" | "stopped" | "kept"> {
    const rest = restFor(snap, id, lastBusy, mayWait);
    if (rest.desired === "run") {
      await this.desire(snap, id, "run", `${reason}; ${rest.why}`);
      return "kept";
    }
    const label = snap.workloads.get(snap.replicas.find((r) => r.id === id)!.workloadId)!.label;
    for (const x of rest.stop ?? [])
      await this.desire(snap, x.id, "idle", `stopped: host RAM needed for ${label} to sleep`);
    await this.desire(snap, id, rest.desired, rest.why ? `${reason}${mayWait ? ";" : ":"} ${rest.why}` : reason);
    return rest.desired === "idle" ? "stopped" : "slept";
  }

  /** Moves a replica to a spot unless it is there already. */
  private async move(snap: Snapshot, id: string, spot: Spot): Promise<void> {
    const r = snap.replicas.find((x) => x.id === id)!;
    if (r.workerId === spot.worker.id && r.gpuIndices.join() === spot.gpuIndices.join()) return;
    await moveAssignment(this.db, id, spot.worker.id, spot.gpuIndices);
    note(snap, { set: { id, workerId: spot.worker.id, gpuIndices: spot.gpuIndices } });
  }

  /** Tells a replica to run or idle (with the reason shown), in the store and the snapshot. */
  private async desire(snap: Snapshot, id: string, desired: Desired, why: string, state?: string): Promise<void> {
    note(snap, { set: { id, desired, state: await setAssignmentDesired(this.db, id, desired, why, state) } });
    // A runtime told to sleep takes no more requests from now (a request reaching vLLM asleep crashes
    // it: vllm-project/vllm#15483), before its agent even hears of it.
    if (desired === "sleep" || desired === "deep_sleep") this.fleet.dispatcher.removeTarget(id);
  }

  /** Running replicas with a request in flight, or whose workload has requests queued. */
  private busy(snap: Snapshot): Set<string> {
    const d = this.fleet.dispatcher;
    return new Set(
      snap.replicas
        .filter(
          (r) =>
            r.desired === "run" &&
            (d.targetsOf(r.workloadId).some((t) => t.id === r.id && t.inFlight > 0) || d.depth(r.workloadId) > 0),
        )
        .map((r) => r.id),
    );
  }
}
