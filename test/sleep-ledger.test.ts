import { describe, expect, test } from "bun:test";
import { room } from "../src/placement/room";
import {
  needMiB,
  ramHeld,
  restFor,
  roomToReload,
  sleepRamMiB,
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
    for (const x of d.evict) set(snap, x.id, { desired: restFor(snap, x.id).desired }, now);
    probe(snap, now + 0.5);
  }
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
          const rest = restFor(snap, r.id);
          if (rest.desired === "sleep") slept++;
          if (rest.desired === "deep_sleep") deep++;
          set(snap, r.id, { desired: rest.desired }, now);
        }
        checkLedger(snap, seed, step);
      }
    }
    // The sequences did exercise each path.
    expect(slept).toBeGreaterThan(100);
    expect(deep).toBeGreaterThan(10);
    expect(woke).toBeGreaterThan(100);
  });

  test("a replica rests at level 1 while its weights fit the sleep RAM, then level 2, then stops", () => {
    const random = rng(7);
    const snap = world(random);
    const w0 = snap.workers[0];
    w0.sleepRamMiB = 10_000;
    const both: WorkloadSnapshot = { ...snap.workloads.get("wl_0")!, sleep: [1, 2], need: { weightsBytes: 6 * GIB } };
    const one: WorkloadSnapshot = { ...both, id: "wl_2", sleep: [1] };
    snap.workloads.set("wl_0", both);
    snap.workloads.set("wl_2", one);
    snap.workloads.set("wl_4", { ...both, id: "wl_4" });
    for (const id of ["asg_0", "asg_2", "asg_4"]) set(snap, id, { desired: "run", workerId: "wk_0" }, 1);
    expect(sleepRamMiB(both, w0.gpus)).toBe(6144);
    // The first fits (6144 of 10000 MiB).
    expect(restFor(snap, "asg_0")).toMatchObject({ desired: "sleep" });
    set(snap, "asg_0", { desired: "sleep" }, 2);
    // The second does not: an engine with level 2 drops its weights…
    const deep = restFor(snap, "asg_4");
    expect(deep.desired).toBe("deep_sleep");
    expect(deep.why).toContain("6144 of 10000 MiB held, 6144 MiB more needed");
    // …one without it stops.
    const stop = restFor(snap, "asg_2");
    expect(stop.desired).toBe("idle");
    expect(stop.why).toContain("host RAM for sleeping replicas is short");
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
