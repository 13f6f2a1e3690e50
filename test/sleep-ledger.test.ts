import { describe, expect, test } from "bun:test";
import { room } from "../src/placement/room";
import {
  needMiB,
  ramHeld,
  restFor,
  roomToReload,
  sleepRamMiB,
  type Desired,
  type ReplicaSnapshot,
  type Snapshot,
  type WorkerSnapshot,
  type WorkloadSnapshot,
} from "../src/placement/snapshot";

/**
 * The memory ledger (issue 38): over random sequences of starts, wakes, sleeps and stops, decided by
 * the scaler's own pure functions (`room` to start or wake, swapping others out; `restFor` to sleep
 * at level 1 or 2, or stop), no GPU is ever promised more memory than it has and no worker's
 * sleeping replicas hold more host RAM than it allows. Time is injected (each step is a tick); the
 * "agents" do what they are told at once and the "probe" reports what runs.
 */
const GIB = 1024 ** 3;

/** A seeded generator (a run is the same every time; the seed is in the failure message). */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

/** A world of two workers with one 24 GB GPU each and six workloads with one replica each. */
function world(random: () => number): Snapshot {
  const worker = (i: number): WorkerSnapshot => ({
    id: `wk_${i}`,
    name: `w${i}`,
    kind: "remote",
    online: true,
    clusterAddress: null,
    gpus: [{ index: 0, uuid: `GPU-${i}`, name: "L4", totalMiB: 24_000, usedMiB: 0 }],
    ramFreeBytes: 64 * GIB,
    sleepRamMiB: 8_000 + Math.floor(random() * 16_000),
    probedAt: 0,
  });
  const workloads = new Map<string, WorkloadSnapshot>();
  const replicas: ReplicaSnapshot[] = [];
  for (let i = 0; i < 6; i++) {
    const weights = (4 + Math.floor(random() * 10)) * GIB;
    const levels: (1 | 2)[][] = [[1, 2], [1], [], [1, 2]];
    workloads.set(`wl_${i}`, {
      id: `wl_${i}`,
      label: `p/m${i}`,
      backend: "vllm",
      nodes: 1,
      gpus: 1,
      needsGpu: true,
      need: { bytes: weights + 2 * GIB, weightsBytes: weights },
      pinnedWorker: null,
      pinnedGpu: null,
      swappable: true,
      // One in six pinned (`keep_warm`); priorities -1, 0 or 1.
      keepWarm: random() < 1 / 6,
      priority: Math.floor(random() * 3) - 1,
      sleep: levels[Math.floor(random() * levels.length)],
    });
    replicas.push({
      id: `asg_${i}`,
      workloadId: `wl_${i}`,
      workerId: `wk_${i % 2}`,
      gpus: 1,
      gpuIndices: [0],
      desired: "idle",
      state: "idle",
      auto: true,
      groupId: null,
      nodeRank: 0,
      updatedAt: 0,
    });
  }
  return { workers: [worker(0), worker(1)], replicas, workloads };
}

/** The GPU memory a replica holds: all of its need while it runs, none asleep or stopped. */
const holds = (snap: Snapshot, r: ReplicaSnapshot, w: WorkerSnapshot) =>
  r.desired === "run" ? needMiB(snap.workloads.get(r.workloadId)!.need, w.gpus[0].totalMiB, 1) : 0;

/** The agents report: each GPU's use is what runs on it, measured now. */
function probe(snap: Snapshot, now: number): void {
  for (const w of snap.workers) {
    w.gpus[0].usedMiB = snap.replicas.filter((r) => r.workerId === w.id).reduce((s, r) => s + holds(snap, r, w), 0);
    w.probedAt = now;
  }
}

/** Sets a replica's wish and the state its agent reaches at once. */
function set(snap: Snapshot, id: string, change: Partial<ReplicaSnapshot>, now: number): void {
  const r = snap.replicas.find((x) => x.id === id)!;
  Object.assign(r, change, { updatedAt: now });
  r.state = r.desired === "run" ? "ready" : r.desired === "idle" ? "idle" : "sleeping";
}

/** A request for the workload of replica `id`: wake or start it, swapping others out as `room` says. */
function request(snap: Snapshot, id: string, now: number, lastBusy: Map<string, number>): void {
  const r = snap.replicas.find((x) => x.id === id)!;
  lastBusy.set(r.workloadId, now);
  if (r.desired === "run") return;
  for (let tries = 0; tries < 2; tries++) {
    const d = room(snap, id, { busy: new Set(), lastBusy: (w) => lastBusy.get(w) ?? 0 });
    if (!d || "wait" in d) return;
    if ("start" in d) {
      const moved = r.state === "sleeping" ? {} : { workerId: d.start.worker.id, gpuIndices: d.start.gpuIndices };
      set(snap, id, { desired: "run", ...moved }, now);
      return;
    }
    for (const x of d.evict) {
      giveWay(snap, x, r);
      rest(snap, x.id, now, lastBusy);
    }
    probe(snap, now + 0.5);
  }
}

/** Fails when `x` gives way (swapped out, or stopped asleep) for `r` though pinned or of a higher priority. */
function giveWay(snap: Snapshot, x: ReplicaSnapshot, r: ReplicaSnapshot): void {
  const [mine, theirs] = [snap.workloads.get(x.workloadId)!, snap.workloads.get(r.workloadId)!];
  if (mine.keepWarm) throw new Error(`${x.id} is pinned but gave way to ${r.id}`);
  if (mine.priority > theirs.priority)
    throw new Error(`${x.id} (priority ${mine.priority}) gave way to ${r.id} (${theirs.priority})`);
  gaveWay++;
}
let gaveWay = 0;

/** Rests a running replica as `restFor` says, stopping first the sleepers it names (as the scaler does). */
function rest(snap: Snapshot, id: string, now: number, lastBusy: Map<string, number>): Desired {
  const r = snap.replicas.find((x) => x.id === id)!;
  const plan = restFor(snap, id, (w) => lastBusy.get(w) ?? 0);
  for (const x of plan.stop ?? []) {
    giveWay(snap, x, r);
    set(snap, x.id, { desired: "idle" }, now);
  }
  set(snap, id, { desired: plan.desired }, now);
  return plan.desired;
}

/** Checks the two halves of the ledger: no GPU and no worker's sleep RAM over-committed. */
function checkLedger(snap: Snapshot, seed: number, step: number): void {
  for (const w of snap.workers) {
    const used = snap.replicas.filter((r) => r.workerId === w.id).reduce((s, r) => s + holds(snap, r, w), 0);
    if (used > w.gpus[0].totalMiB)
      throw new Error(`seed ${seed}, step ${step}: ${w.name}'s GPU promised ${used} of ${w.gpus[0].totalMiB} MiB`);
    const ram = ramHeld(snap, w);
    if (ram > w.sleepRamMiB)
      throw new Error(`seed ${seed}, step ${step}: ${w.name}'s sleeping replicas hold ${ram} of ${w.sleepRamMiB} MiB`);
  }
}

describe("the memory ledger", () => {
  test("random starts, wakes, sleeps and stops never over-commit a GPU or a worker's host RAM", () => {
    let slept = 0;
    let deep = 0;
    let woke = 0;
    for (let seed = 1; seed <= 300; seed++) {
      const random = rng(seed);
      const snap = world(random);
      const lastBusy = new Map<string, number>();
      for (let step = 1; step <= 60; step++) {
        const now = step * 10;
        probe(snap, now - 1);
        const r = snap.replicas[Math.floor(random() * snap.replicas.length)];
        if (random() < 0.6) {
          const wasAsleep = r.state === "sleeping";
          request(snap, r.id, now, lastBusy);
          if (wasAsleep && r.desired === "run") woke++;
        } else if (r.desired === "run") {
          const desired = rest(snap, r.id, now, lastBusy);
          if (desired === "sleep") slept++;
          if (desired === "deep_sleep") deep++;
        }
        checkLedger(snap, seed, step);
      }
    }
    // The sequences did exercise each path.
    expect(slept).toBeGreaterThan(100);
    expect(deep).toBeGreaterThan(10);
    expect(woke).toBeGreaterThan(100);
    expect(gaveWay).toBeGreaterThan(100);
  });

  test("a replica rests at level 1 while its weights fit, else in the place of sleepers that give way to it, else level 2, else stops", () => {
    const random = rng(7);
    const snap = world(random);
    const w0 = snap.workers[0];
    w0.sleepRamMiB = 10_000;
    const both: WorkloadSnapshot = {
      ...snap.workloads.get("wl_0")!,
      sleep: [1, 2],
      need: { weightsBytes: 6 * GIB },
      keepWarm: false,
      priority: 0,
    };
    const one: WorkloadSnapshot = { ...both, id: "wl_2", sleep: [1] };
    snap.workloads.set("wl_0", both);
    snap.workloads.set("wl_2", one);
    snap.workloads.set("wl_4", { ...both, id: "wl_4" });
    for (const id of ["asg_0", "asg_2", "asg_4"]) set(snap, id, { desired: "run", workerId: "wk_0" }, 1);
    expect(sleepRamMiB(both, w0.gpus)).toBe(6144);
    // The first fits (6144 of 10000 MiB).
    expect(restFor(snap, "asg_0")).toMatchObject({ desired: "sleep" });
    set(snap, "asg_0", { desired: "sleep" }, 2);
    // The second does not fit beside it: an engine with level 2 drops its weights (nobody is stopped)…
    const deep = restFor(snap, "asg_4", () => 0);
    expect(deep).toMatchObject({ desired: "deep_sleep" });
    expect(deep.why).toContain("6144 of 10000 MiB held, 6144 MiB more needed");
    // …unless it has a higher priority: then the older sleeper is stopped for it, and it sleeps at level 1.
    snap.workloads.set("wl_4", { ...both, id: "wl_4", priority: 1 });
    expect(restFor(snap, "asg_4", () => 0)).toMatchObject({ desired: "sleep", stop: [{ id: "asg_0" }] });
    // An engine with level 1 only takes the place of an older sleeper of the same priority.
    const newer = restFor(snap, "asg_2", () => 0);
    expect(newer).toMatchObject({ desired: "sleep", stop: [{ id: "asg_0" }] });
    expect(newer.why).toContain("1 older sleeping replica(s) stopped for it");
    // A pinned (keep_warm) sleeper gives way to none: level 2, or stopped without it.
    snap.workloads.set("wl_0", { ...both, keepWarm: true });
    expect(restFor(snap, "asg_4").desired).toBe("deep_sleep");
    const stop = restFor(snap, "asg_2");
    expect(stop.desired).toBe("idle");
    expect(stop.why).toContain("host RAM for sleeping replicas is short");
    // While a sleeper told to stop still holds its RAM, a scaled-down replica that may wait keeps running;
    // one swapped out (its GPU is wanted now) does not wait: it stops.
    snap.workloads.set("wl_0", both);
    Object.assign(snap.replicas.find((x) => x.id === "asg_0")!, { desired: "idle", state: "sleeping" });
    expect(restFor(snap, "asg_2", () => 0, true)).toMatchObject({ desired: "run" });
    expect(restFor(snap, "asg_2", () => 0, false)).toMatchObject({ desired: "idle" });
  });

  test("swaps take replicas of lower priority first, then the least recently used, never pinned ones or for a lower priority", () => {
    const snap = world(rng(5));
    const model = (id: string, over: Partial<WorkloadSnapshot> = {}): WorkloadSnapshot => ({
      ...snap.workloads.get(id)!,
      sleep: [1],
      need: { bytes: 20 * GIB, weightsBytes: 4 * GIB },
      keepWarm: false,
      priority: 0,
      ...over,
    });
    snap.workers[0].gpus = [0, 1, 2].map((index) => ({ ...snap.workers[0].gpus[0], index, uuid: `GPU-${index}` }));
    snap.workloads.set("wl_0", model("wl_0"));
    snap.workloads.set("wl_2", model("wl_2", { priority: -1 }));
    snap.workloads.set("wl_4", model("wl_4", { keepWarm: true }));
    snap.workloads.set("wl_1", model("wl_1"));
    set(snap, "asg_0", { desired: "run", workerId: "wk_0", gpuIndices: [0] }, 1);
    set(snap, "asg_2", { desired: "run", workerId: "wk_0", gpuIndices: [1] }, 1);
    set(snap, "asg_4", { desired: "run", workerId: "wk_0", gpuIndices: [2] }, 1);
    set(snap, "asg_1", { desired: "sleep", workerId: "wk_0", gpuIndices: [0], auto: false }, 1);
    for (const g of snap.workers[0].gpus) g.usedMiB = 20_480;
    snap.workers[0].probedAt = 5;
    // wl_2 (priority -1) goes first although wl_0 was used longer ago; wl_4 is pinned.
    const used = new Map([
      ["wl_0", 1],
      ["wl_2", 9],
      ["wl_4", 0],
    ]);
    const ctx = { busy: new Set<string>(), lastBusy: (w: string) => used.get(w) ?? 0 };
    const on = (gpu: number) => {
      for (const x of snap.replicas) if (x.id === "asg_1") x.gpuIndices = [gpu];
      const d = room(snap, "asg_1", ctx);
      return d && "swap" in d ? d.evict.map((x) => x.id) : "wait" in (d ?? {}) ? "wait" : d;
    };
    expect(on(1)).toEqual(["asg_2"]);
    expect(on(2)).toBe("wait");
    // A workload of priority -1 swaps out none of priority 0.
    snap.workloads.set("wl_1", model("wl_1", { priority: -1 }));
    expect(on(0)).toBe("wait");
    snap.workloads.set("wl_1", model("wl_1", { priority: 0 }));
    expect(on(0)).toEqual(["asg_0"]);
  });

  test("a sleeping replica wakes where it sleeps, swapping out others there rather than moving", () => {
    const snap = world(rng(3));
    const big: WorkloadSnapshot = { ...snap.workloads.get("wl_0")!, need: { bytes: 20 * GIB, weightsBytes: 18 * GIB } };
    snap.workloads.set("wl_0", big);
    snap.workloads.set("wl_2", { ...big, id: "wl_2", sleep: [1, 2] });
    snap.workers[0].sleepRamMiB = 40_000;
    set(snap, "asg_0", { desired: "sleep", workerId: "wk_0" }, 1);
    set(snap, "asg_2", { desired: "run", workerId: "wk_0" }, 1);
    probe(snap, 5);
    const d = room(snap, "asg_0", { busy: new Set(), lastBusy: () => 0 });
    expect(d && "swap" in d ? d.swap.worker.id : d).toBe("wk_0");
    expect(d && "swap" in d ? d.evict.map((x) => x.id) : []).toEqual(["asg_2"]);
  });

  test("waking from level 2 stops the least recently used level-1 sleepers when host RAM is short, then waits for them", () => {
    const snap = world(rng(11));
    const w0 = snap.workers[0];
    w0.sleepRamMiB = 12_288;
    const model = (id: string): WorkloadSnapshot => ({
      ...snap.workloads.get(id)!,
      sleep: [1, 2],
      need: { bytes: 8 * GIB, weightsBytes: 6 * GIB },
      keepWarm: false,
      priority: 0,
    });
    for (const id of ["wl_0", "wl_2", "wl_4"]) snap.workloads.set(id, model(id));
    set(snap, "asg_0", { desired: "sleep", workerId: "wk_0" }, 1);
    set(snap, "asg_2", { desired: "sleep", workerId: "wk_0" }, 1);
    set(snap, "asg_4", { desired: "deep_sleep", workerId: "wk_0" }, 1);
    const lastBusy = new Map([
      ["wl_0", 50],
      ["wl_2", 20],
    ]);
    // 12288 MiB held by two sleepers: wl_4's 6144 do not fit; wl_2 was used least recently.
    const plan = roomToReload(snap, "asg_4", (w) => lastBusy.get(w) ?? 0);
    expect(plan && "stop" in plan ? plan.stop.map((x) => x.id) : plan).toEqual(["asg_2"]);
    // Told to stop, it still holds its RAM until it has: the wake waits.
    Object.assign(snap.replicas.find((x) => x.id === "asg_2")!, { desired: "idle" });
    expect(roomToReload(snap, "asg_4", () => 0)).toEqual({ wait: expect.stringContaining("host RAM being freed") });
    // Stopped: room.
    Object.assign(snap.replicas.find((x) => x.id === "asg_2")!, { state: "idle" });
    expect(roomToReload(snap, "asg_4", () => 0)).toBeUndefined();
    // A level-1 sleeper needs nothing of it.
    expect(roomToReload(snap, "asg_0", () => 0)).toBeUndefined();
  });
});
