import { describe, expect, test } from "bun:test";
import {
  freeMemory,
  needMiB,
  without,
  type ReplicaSnapshot,
  type Snapshot,
  type WorkerSnapshot,
  type WorkloadSnapshot,
} from "../src/placement/snapshot";
import { placeOn, placeReplica, staleReplicas } from "../src/placement/replica";
import { groupStands, placeGroup } from "../src/placement/group";
import { room, workerForAnother, type RoomContext } from "../src/placement/room";
import { replicaGpus } from "../src/placement/workload";
import { withTensorParallel } from "../agent/runtimes/args";
import { tensorParallelOf } from "../agent/engines";
import { vllm as vllmEngine } from "../agent/engines/vllm";
import { memberPlan } from "../agent/runtimes/group";
import type { ReplicaSpec } from "../agent/protocol";
import type { LaunchContext } from "../agent/runtimes/types";

/**
 * Placement as arithmetic over a snapshot: no store, no process, no timer (times are plain numbers).
 * Free memory alone first (like Ollama's TestUpdateFreeSpace), then where replicas, groups and the
 * scaler's starts go, then the tensor-parallel flags both the host and the agent read.
 */
const GIB = 1024 ** 3;
const PROBED = 1_000_000; // when every worker here last reported its GPUs
const gpu = (index: number, usedMiB = 0, totalMiB = 24000) => ({
  index,
  uuid: `GPU-${index}`,
  name: "L4",
  totalMiB,
  usedMiB,
});
const worker = (name: string, over: Partial<WorkerSnapshot> = {}): WorkerSnapshot => ({
  id: `wk_${name}`,
  name,
  kind: "remote",
  online: true,
  clusterAddress: "10.0.0.1",
  gpus: [gpu(0)],
  ramFreeBytes: 64 * GIB,
  sleepRamMiB: 32768,
  probedAt: PROBED,
  ...over,
});
const replica = (id: string, over: Partial<ReplicaSnapshot> = {}): ReplicaSnapshot => ({
  id,
  workloadId: "a",
  workerId: "wk_a",
  gpus: 1,
  gpuIndices: [0],
  desired: "run",
  state: "starting",
  auto: true,
  groupId: null,
  nodeRank: 0,
  updatedAt: PROBED - 1000,
  ...over,
});
const workload = (id: string, over: Partial<WorkloadSnapshot> = {}): WorkloadSnapshot => ({
  id,
  label: `p/${id}`,
  backend: "llamacpp",
  nodes: 1,
  gpus: 1,
  needsGpu: false,
  need: {},
  pinnedWorker: null,
  pinnedGpu: null,
  sleep: [],
  swappable: false,
  keepWarm: false,
  priority: 0,
  ...over,
});
const snapshot = (
  workers: WorkerSnapshot[],
  replicas: ReplicaSnapshot[] = [],
  workloads: WorkloadSnapshot[] = [],
): Snapshot => ({ workers, replicas, workloads: new Map(workloads.map((w) => [w.id, w])) });
const freeOf = (snap: Snapshot, workerId = "wk_a") =>
  freeMemory(snap)
    .get(workerId)!
    .map((g) => g.free_mib);

describe("free memory", () => {
  const llama8 = workload("a", { need: { bytes: 8 * GIB } }); // 8192 MiB on one GPU, 4096 on each of two
  const vllm = workload("v", { backend: "vllm", needsGpu: true, need: { share: 0.9 } });

  test("is what the worker reported: total − used", () => {
    expect(freeOf(snapshot([worker("a", { gpus: [gpu(0, 2000)] })]))).toEqual([22000]);
  });

  test("a starting replica's need is subtracted; once it shows in the report, it is not subtracted twice", () => {
    const starting = snapshot([worker("a")], [replica("r1")], [llama8]);
    expect(freeOf(starting)).toEqual([24000 - 8192]);
    // Ready after the last probe: the report does not show it yet.
    const justReady = snapshot([worker("a")], [replica("r1", { state: "ready", updatedAt: PROBED + 1 })], [llama8]);
    expect(freeOf(justReady)).toEqual([24000 - 8192]);
    // Ready before the probe: its memory is in the reported 8192 used, subtracted there only.
    const reported = snapshot([worker("a", { gpus: [gpu(0, 8192)] })], [replica("r1", { state: "ready" })], [llama8]);
    expect(freeOf(reported)).toEqual([24000 - 8192]);
  });

  test("vLLM and SGLang take their share of the GPU whatever the model; the estimate is split over a replica's GPUs", () => {
    expect(needMiB({ share: 0.9, bytes: GIB }, 24000, 1)).toBe(21600);
    expect(needMiB({ bytes: 8 * GIB }, 24000, 2)).toBe(4096);
    // The example of freeMemory's comment: two GPUs, one replica reported, a vLLM and a llama.cpp one starting.
    const snap = snapshot(
      [worker("a", { gpus: [gpu(0, 2000), gpu(1)] })],
      [
        replica("old", { workloadId: "a", state: "ready" }),
        replica("v1", { workloadId: "v", gpuIndices: [1] }),
        replica("both", { workloadId: "a", gpus: 2, gpuIndices: [0, 1] }),
      ],
      [llama8, vllm],
    );
    expect(freeOf(snap)).toEqual([24000 - 2000 - 4096, 24000 - 21600 - 4096]);
  });

  test("an unknown need takes nothing; failed, stopped and idle replicas hold nothing", () => {
    const unknown = workload("u");
    expect(freeOf(snapshot([worker("a")], [replica("r1", { workloadId: "u" })], [unknown]))).toEqual([24000]);
    const gone = [
      replica("f", { state: "failed" }),
      replica("s", { state: "stopped" }),
      replica("i", { desired: "idle", state: "idle" }),
      replica("w", { desired: "idle", state: "pending" }),
    ];
    expect(freeOf(snapshot([worker("a")], gone, [llama8]))).toEqual([24000]);
  });

  test("replicas count only on their own worker", () => {
    const snap = snapshot([worker("a"), worker("b")], [replica("r1", { workerId: "wk_b" })], [llama8]);
    expect(freeOf(snap, "wk_a")).toEqual([24000]);
    expect(freeOf(snap, "wk_b")).toEqual([24000 - 8192]);
  });
});

describe("placing a replica", () => {
  const two = worker("a", { gpus: [gpu(0, 20000), gpu(1, 1000)] });

  test("goes to the GPU with the most free memory when the model is known, the least shared when not", () => {
    const known = workload("m", {
      backend: "vllm",
      needsGpu: true,
      need: { bytes: 4 * GIB, text: "m needs ~4.0 GiB" },
    });
    expect(placeReplica(snapshot([two], [], [known]), known)).toEqual({ workerId: "wk_a", gpus: 1, gpuIndices: [1] });
    const unknown = workload("m", { backend: "vllm", needsGpu: true });
    const shared = snapshot(
      [worker("a", { gpus: [gpu(0), gpu(1)] })],
      [replica("x", { workloadId: "o", desired: "idle", state: "idle", gpuIndices: [0] })],
      [unknown, workload("o")],
    );
    expect(placeReplica(shared, unknown)).toMatchObject({ gpuIndices: [1] });
  });

  test("a replica still starting is counted: the next one goes where the memory really is", () => {
    const model = workload("m", {
      backend: "vllm",
      needsGpu: true,
      need: { bytes: 10 * GIB, text: "m needs ~10.0 GiB", share: 0.9 },
    });
    const first = snapshot([worker("a"), worker("b")], [], [model]);
    expect(placeReplica(first, model)).toMatchObject({ workerId: "wk_a" });
    const second = snapshot([worker("a"), worker("b")], [replica("r1", { workloadId: "m" })], [model]);
    expect(placeReplica(second, model)).toMatchObject({ workerId: "wk_b" });
  });

  test("pins: a worker by name, a GPU by uuid (its GPU first), and the reasons when they name nothing", () => {
    const snap = snapshot([worker("a"), worker("b", { gpus: [gpu(0), gpu(1)] })]);
    expect(placeReplica(snap, workload("m", { pinnedWorker: "b" }))).toMatchObject({ workerId: "wk_b" });
    // Only "b" has a GPU-1; its GPU 1 is taken although GPU 0 is as free.
    expect(placeReplica(snap, workload("m", { pinnedGpu: "GPU-1", backend: "vllm", needsGpu: true }))).toEqual({
      workerId: "wk_b",
      gpus: 1,
      gpuIndices: [1],
    });
    expect(placeReplica(snap, workload("m", { pinnedWorker: "gone" }))).toEqual({
      why: 'the pinned worker "gone" does not exist',
    });
    expect(placeReplica(snap, workload("m", { pinnedGpu: "GPU-x" }))).toEqual({
      why: 'no worker has the pinned GPU "GPU-x"',
    });
  });

  test("too big for every GPU: the reason names the need and the most free memory", () => {
    const big = workload("m", {
      backend: "vllm",
      needsGpu: true,
      need: { bytes: 30 * GIB, text: "m needs ~30.0 GiB" },
    });
    expect(placeReplica(snapshot([two], [], [big]), big)).toEqual({
      why: 'm needs ~30.0 GiB; the most free GPU memory is 22.5 GiB on GPU 1 of "a"',
    });
  });

  test("CPU backends go to the local worker, GPU backends need a GPU; the command's tensor-parallel size is the GPU count", () => {
    const cpu = workload("m");
    expect(placeReplica(snapshot([worker("r"), worker("l", { kind: "local", gpus: [] })]), cpu)).toEqual({
      workerId: "wk_l",
      gpus: 1,
      gpuIndices: [],
    });
    expect(placeReplica(snapshot([worker("l", { online: false })]), cpu)).toEqual({ why: "no worker is online" });
    const gpuOnly = workload("m", { backend: "sglang", needsGpu: true });
    expect(placeReplica(snapshot([worker("l", { gpus: [] })]), gpuOnly)).toEqual({
      why: 'no online worker has a GPU, which backend "sglang" needs',
    });
    const tp2 = workload("m", { backend: "vllm", needsGpu: true, gpus: 2 });
    expect(placeReplica(snapshot([worker("a", { gpus: [gpu(0), gpu(1), gpu(2)] })]), tp2)).toMatchObject({
      gpus: 2,
      gpuIndices: [0, 1],
    });
  });

  test("by hand: too many GPUs, or not fitting, say so with each GPU's own free memory; the workload's automatic replicas do not count", () => {
    const m = workload("m", { need: { bytes: 40 * GIB, text: "m needs ~40.0 GiB" } });
    expect(placeOn(snapshot([two]), m, two, 4, true)).toEqual({
      why: 'worker "a" has only 2 GPUs',
      code: "too_many_gpus",
    });
    expect(placeOn(snapshot([two]), m, two, 2, true)).toEqual({
      why: 'm needs ~40.0 GiB, 20.0 GiB on each of 2 GPUs; on worker "a" GPU 0 has 3.9 GiB free, GPU 1 has 22.5 GiB free. Free memory, pick another worker, or pass "force": true',
      code: "does_not_fit",
    });
    expect(placeOn(snapshot([two]), m, two, 2, false)).toEqual({ gpuIndices: [0, 1] });
    const small = workload("m", { need: { bytes: 20 * GIB, text: "m needs ~20.0 GiB" } });
    const withAuto = snapshot([worker("a")], [replica("auto", { workloadId: "m" })], [small]);
    expect(placeOn(withAuto, small, withAuto.workers[0], 1, true)).toMatchObject({ code: "does_not_fit" });
    expect(
      placeOn(
        without(withAuto, (r) => r.auto && r.workloadId === "m"),
        small,
        withAuto.workers[0],
        1,
        true,
      ),
    ).toEqual({ gpuIndices: [0] });
  });

  test("automatic replicas go stale when one is placed by hand or the pin moves", () => {
    const snap = snapshot([worker("a"), worker("b")], [replica("r1", { workloadId: "m" })]);
    expect(staleReplicas(snap, workload("m"))).toEqual([]);
    expect(staleReplicas(snap, workload("m", { pinnedWorker: "b" })).map((r) => r.id)).toEqual(["r1"]);
    expect(staleReplicas(snap, workload("m", { pinnedWorker: "a" }))).toEqual([]);
    const manual = snapshot(snap.workers, [...snap.replicas, replica("hand", { workloadId: "m", auto: false })]);
    expect(staleReplicas(manual, workload("m")).map((r) => r.id)).toEqual(["r1"]);
  });
});

describe("placing a group", () => {
  const gpus = (free: number) => [{ index: 0, uuid: "GPU-0", name: "L4", totalMiB: 23034, usedMiB: 23034 - free }];
  const member = (name: string, over: Partial<WorkerSnapshot> = {}) => worker(name, { gpus: gpus(23034), ...over });
  const group = (over: Partial<WorkloadSnapshot> = {}) =>
    workload("g", { backend: "vllm", nodes: 2, gpus: 1, needsGpu: true, ...over });

  test("two fitting workers host the group, the pinned one leading", () => {
    const r = placeGroup(snapshot([member("a"), member("b"), member("c")]), group({ pinnedWorker: "c" }));
    expect(r).toEqual({
      members: [
        { workerId: "wk_c", gpuIndices: [0] },
        { workerId: "wk_a", gpuIndices: [0] },
      ],
    });
  });

  test("all or nothing: one fitting worker is not enough, and the error names what is missing", () => {
    const r = placeGroup(
      snapshot([
        member("a"),
        member("b", { clusterAddress: null }),
        member("c", { online: false }),
        member("d", { gpus: [] }),
      ]),
      group(),
    );
    expect("why" in r && r.why).toBe(
      'this workload spans 2 machines: it needs 2 workers online with --cluster-address and 1 GPU each; found 1: "a" ("b" has no --cluster-address; "c" is offline; "d" has 0 GPUs, not 1)',
    );
  });

  test("the model's estimate is split over the machines: a model too big for one GPU fits on two", () => {
    const big = group({ need: { bytes: 30 * GIB, text: "m needs ~30.0 GiB" } });
    expect("members" in placeGroup(snapshot([member("a"), member("b")]), big)).toBe(true);
    const r = placeGroup(snapshot([member("a"), member("b", { gpus: gpus(10_000) })]), big);
    expect("why" in r && r.why).toContain(
      'room for ~15.0 GiB each (m needs ~30.0 GiB, split over 2 machines); found 1: "a" ("b" has at most 9.8 GiB free on a GPU)',
    );
  });

  test("llama.cpp RPC members may be machines without GPUs; the least used GPUs are taken", () => {
    const busy = member("a", { gpus: [gpu(0), gpu(1)] });
    const use = [
      replica("x", { workloadId: "o", desired: "idle", state: "idle" }),
      replica("y", { workloadId: "o", desired: "idle", state: "idle" }),
    ];
    const r = placeGroup(
      snapshot([busy, member("cpu", { gpus: [] })], use, [workload("o")]),
      group({ backend: "llamacpp", needsGpu: false }),
    );
    expect(r).toEqual({
      members: [
        { workerId: "wk_a", gpuIndices: [1] },
        { workerId: "wk_cpu", gpuIndices: [] },
      ],
    });
  });

  test("a pinned leader that cannot host says so", () => {
    const r = placeGroup(
      snapshot([member("a", { clusterAddress: null }), member("b"), member("c")]),
      group({ pinnedWorker: "a" }),
    );
    expect("why" in r && r.why).toEndWith('the pinned leader "a" has no --cluster-address');
  });

  test("a placed group stands while its workers are online and the GPU count and pin still match", () => {
    const snap = snapshot([member("a"), member("b")]);
    const members = [
      replica("m0", { workloadId: "g", groupId: "grp", nodeRank: 0 }),
      replica("m1", { workloadId: "g", workerId: "wk_b", groupId: "grp", nodeRank: 1 }),
    ];
    expect(groupStands(snap, group(), members)).toBe(true);
    expect(groupStands(snap, group({ gpus: 2 }), members)).toBe(false);
    expect(groupStands(snap, group({ pinnedWorker: "b" }), members)).toBe(false);
    expect(groupStands(snapshot([member("a"), member("b", { online: false })]), group(), members)).toBe(false);
  });
});

describe("the scaler's room", () => {
  const vllm = (id: string, over: Partial<WorkloadSnapshot> = {}) =>
    workload(id, { backend: "vllm", needsGpu: true, need: { share: 0.9 }, ...over });
  const quiet: RoomContext = { busy: new Set(), lastBusy: () => 0 };
  const idle = (id: string, over: Partial<ReplicaSnapshot> = {}) =>
    replica(id, { desired: "idle", state: "idle", ...over });
  const running = (id: string, workloadId: string, over: Partial<ReplicaSnapshot> = {}) =>
    replica(id, { workloadId, state: "ready", ...over });
  // GPU 0 reports what a running vLLM holds (90 %); GPU 1 is empty.
  const held = () => worker("a", { gpus: [gpu(0, 21600), gpu(1)] });

  test("starts on its own GPU when there is room, else on another GPU with room", () => {
    expect(room(snapshot([worker("a")], [idle("r", { workloadId: "m" })], [vllm("m")]), "r", quiet)).toMatchObject({
      start: { gpuIndices: [0] },
    });
    const moved = room(
      snapshot([held()], [running("o", "other"), idle("r", { workloadId: "m" })], [vllm("m"), vllm("other")]),
      "r",
      quiet,
    );
    expect(moved).toMatchObject({ start: { worker: { id: "wk_a" }, gpuIndices: [1] } });
  });

  test("swaps out the least recently used idle replica of a workload that may go to zero, never a busy or fixed one", () => {
    const full = worker("a", { gpus: [gpu(0, 21600)] });
    const workloads = [vllm("m"), vllm("old", { swappable: true }), vllm("new", { swappable: true }), vllm("fixed")];
    const lastBusy = (id: string) => ({ old: 1, new: 2 })[id as "old"] ?? 0;
    // 2400 MiB free, 21600 needed: 18.8 GiB lack; swapping out one replica of 21600 covers it.
    const snap = snapshot(
      [full],
      [running("o1", "new"), running("o2", "old"), running("f", "fixed"), idle("r", { workloadId: "m" })],
      workloads,
    );
    const d = room(snap, "r", { busy: new Set(), lastBusy });
    expect(d).toMatchObject({
      swap: { gpuIndices: [0] },
      names: ["p/old"],
      why: "waiting for GPU memory (GPU 0 lacks 18.8 GiB): swapping out p/old",
    });
    expect(room(snap, "r", { busy: new Set(["o2"]), lastBusy })).toMatchObject({ names: ["p/new"] });
    expect(room(snap, "r", { busy: new Set(["o1", "o2"]), lastBusy })).toEqual({
      wait: "waiting for GPU memory (GPU 0 lacks 18.8 GiB); no idle replica can be swapped out",
    });
  });

  test("waits while another replica's memory is being freed rather than swapping out more", () => {
    const full = worker("a", { gpus: [gpu(0, 21600)] });
    const stopping = replica("s", { workloadId: "other", desired: "idle", state: "ready" });
    expect(
      room(
        snapshot([full], [stopping, idle("r", { workloadId: "m" })], [vllm("m"), vllm("other", { swappable: true })]),
        "r",
        quiet,
      ),
    ).toEqual({ wait: "waiting for GPU memory being freed" });
  });

  test("another replica goes to a worker with room for it, else to the first candidate", () => {
    const snap = snapshot(
      [worker("a", { gpus: [gpu(0, 21600)] }), worker("b"), worker("c", { gpus: [] })],
      [],
      [vllm("m")],
    );
    expect(workerForAnother(snap, vllm("m"))?.id).toBe("wk_b");
    expect(workerForAnother(snapshot([worker("a", { gpus: [gpu(0, 21600)] })]), vllm("m"))?.id).toBe("wk_a");
    expect(workerForAnother(snapshot([worker("c", { gpus: [] })]), vllm("m"))).toBeUndefined();
  });
});

describe("tensor-parallel flags, read alike by the host and the agent", () => {
  const sglang = "python3 -m sglang.launch_server --model-path m --tp-size 2";
  const ctx = (gpus: number): LaunchContext => ({
    spec: {
      assignment_id: "asg",
      workload: {
        id: "wl",
        slug: "w",
        project_slug: "p",
        backend: "sglang",
        model_name: "m",
        task_type: "text2text",
        config: {},
      },
      concurrency: 1,
      gpus,
      gpu_indices: [0],
      revision: "r",
    } as ReplicaSpec,
    freePort: 9000,
    dataDir: "/tmp/x",
    env: {},
    gpus: [],
    which: () => null,
    builtinLlama: () => ({ argv: [], env: {} }),
  });
  const member = (argv: string[]) => ({
    id: "grp",
    nodes: 2,
    rank: 0,
    generation: 0,
    members: [
      { rank: 0, worker: "a", address: "10.0.0.1", ready: false },
      { rank: 1, worker: "b", address: "10.0.0.2", ready: false },
    ],
  });

  test("SGLang's --tp-size 2: the host gives each of 2 machines 1 GPU (2 on one), and the agent keeps it rather than adding --tp", () => {
    expect(replicaGpus({ backend: "sglang", nodes: 1, config: { command: sglang } })).toBe(2);
    expect(replicaGpus({ backend: "sglang", nodes: 2, config: { command: sglang } })).toBe(1);
    const argv = sglang.split(" ");
    const plan = memberPlan(
      ctx(1),
      { argv, env: {}, baseUrl: "", port: 9000, healthUrls: [], prep: [] },
      member(argv),
      "10.0.0.1",
      20000,
    );
    expect(plan.argv).not.toContain("--tp");
    expect(plan.argv!.slice(0, argv.length)).toEqual(argv);
  });

  test("each engine's own flags, in both spellings; another engine's flag is not read", () => {
    expect(tensorParallelOf("sglang", ["--tp", "4"])).toBe(4);
    expect(tensorParallelOf("sglang", ["--tensor-parallel-size=4"])).toBe(4);
    expect(tensorParallelOf("vllm", ["vllm", "serve", "m", "-tp", "2"])).toBe(2);
    expect(tensorParallelOf("vllm", ["vllm", "serve", "m", "--tensor-parallel-size=8"])).toBe(8);
    expect(tensorParallelOf("vllm", ["vllm", "serve", "m", "--tp-size", "2"])).toBeUndefined();
    expect(tensorParallelOf("llamacpp", ["llama-server", "--tp", "2"])).toBeUndefined();
    // vLLM: the host counts 1 GPU for a flag vLLM does not know, and the agent adds vLLM's own.
    expect(replicaGpus({ backend: "vllm", nodes: 1, config: { command: "vllm serve m --tp-size 2" } })).toBe(1);
    expect(withTensorParallel(["vllm", "serve", "m", "--tp-size", "2"], 1, vllmEngine.flags.tensorParallel)).toEqual([
      "vllm",
      "serve",
      "m",
      "--tp-size",
      "2",
      "--tensor-parallel-size",
      "1",
    ]);
  });
});
