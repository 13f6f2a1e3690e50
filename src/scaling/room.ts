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
import { note, type Snapshot } from "../placement/snapshot";

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
    for (const a of rows.filter((x) => x.desired === "idle").slice(0, count)) {
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
    if ("start" in decision) {
      await this.move(snap, id, decision.start);
      await this.desire(snap, id, "run", `starting: ${reason}`);
      // What it was given: the backend the runtime really uses is the replica row's to say (it may fall back to the CPU).
      const given = decision.start.gpuIndices.length ? `GPU ${decision.start.gpuIndices.join(", ")}` : "no GPU";
      return `started replica ${id} on ${decision.start.worker.name} (given ${given})`;
    }
    if ("wait" in decision) {
      await this.desire(snap, id, "idle", decision.wait, "pending");
      return "";
    }
    await this.move(snap, id, decision.swap);
    const label = snap.workloads.get(snap.replicas.find((r) => r.id === id)!.workloadId)!.label;
    for (const x of decision.evict) await this.desire(snap, x.id, "idle", `swapped out for ${label}`);
    await this.desire(snap, id, "idle", decision.why, "pending");
    return `swapping out ${decision.names.join(", ")} for replica ${id}`;
  }

  /** Moves a replica to a spot unless it is there already. */
  private async move(snap: Snapshot, id: string, spot: Spot): Promise<void> {
    const r = snap.replicas.find((x) => x.id === id)!;
    if (r.workerId === spot.worker.id && r.gpuIndices.join() === spot.gpuIndices.join()) return;
    await moveAssignment(this.db, id, spot.worker.id, spot.gpuIndices);
    note(snap, { set: { id, workerId: spot.worker.id, gpuIndices: spot.gpuIndices } });
  }

  /** Tells a replica to run or idle (with the reason shown), in the store and the snapshot. */
  private async desire(
    snap: Snapshot,
    id: string,
    desired: "run" | "idle",
    why: string,
    state?: string,
  ): Promise<void> {
    note(snap, { set: { id, desired, state: await setAssignmentDesired(this.db, id, desired, why, state) } });
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
