import { describe, expect, test } from "bun:test";
import { memberPlan, memberRole, missingFor } from "../agent/runtimes/group";
import { GroupRestarts } from "../src/workers/group-restarts";
import type { GroupSpec, ReplicaSpec } from "../agent/protocol";
import type { LaunchContext, LaunchPlan } from "../agent/runtimes/types";
import type { AssignmentView } from "../src/workers/service";
import type { Db } from "../src/db";

/** Member launch plans and group restarts, without processes (group placement: test/placement-units.test.ts). */

const group = (rank: number, members: GroupSpec["members"]): GroupSpec => ({
  id: "grp_1",
  nodes: members.length,
  rank,
  generation: 0,
  members,
});
const ctx = (backend: string, gpus = 1): LaunchContext => ({
  spec: {
    assignment_id: "asg",
    workload: { id: "wl", slug: "w", project_slug: "p", backend, model_name: "m", task_type: "text2text", config: {} },
    concurrency: 1,
    gpus,
    gpu_indices: [0],
    revision: "r",
  } as ReplicaSpec,
  freePort: 9000,
  dataDir: "/tmp/x",
  env: {},
  gpus: [],
  which: (cmd) => (cmd === "rpc-server" ? "/opt/llama/rpc-server" : null),
  builtinLlama: () => ({ argv: [], env: {} }),
});
const base = (argv: string[]): LaunchPlan => ({
  argv,
  env: {},
  baseUrl: "http://127.0.0.1:9000",
  port: 9000,
  healthUrls: ["http://127.0.0.1:9000/health"],
  prep: [],
});
const two = (leader?: string, member?: string, ready = [false, false]) => [
  { rank: 0, worker: "a", address: "10.0.0.1", ready: ready[0], ...(leader ? { endpoint: leader } : {}) },
  { rank: 1, worker: "b", address: "10.0.0.2", ready: ready[1], ...(member ? { endpoint: member } : {}) },
];

describe("member launch plans", () => {
  const vllm = ["vllm", "serve", "m", "--tensor-parallel-size", "1", "--host", "127.0.0.1", "--port", "9000"];

  test("vLLM: ranks, rendezvous on the leader's cluster address, pipeline parallel = nodes, the others headless", () => {
    expect(memberRole("vllm", base(vllm), 0)).toEqual({ listens: true, headFirst: false, waitFor: "nothing" });
    expect(memberPlan(ctx("vllm"), base(vllm), group(0, two()), "10.0.0.1", 29500).argv).toEqual([
      ...vllm,
      "--pipeline-parallel-size",
      "2",
      "--nnodes",
      "2",
      "--node-rank",
      "0",
      "--master-addr",
      "10.0.0.1",
      "--master-port",
      "29500",
    ]);
    const follower = memberPlan(ctx("vllm"), base(vllm), group(1, two("10.0.0.1:29500")), "10.0.0.2");
    expect(follower.argv).toEqual([
      ...vllm,
      "--pipeline-parallel-size",
      "2",
      "--nnodes",
      "2",
      "--node-rank",
      "1",
      "--master-addr",
      "10.0.0.1",
      "--master-port",
      "29500",
      "--headless",
    ]);
    expect(follower.healthUrls).toEqual([]);
    expect(memberPlan(ctx("vllm"), base([...vllm, "-pp", "4"]), group(0, two()), "10.0.0.1", 1).argv).not.toContain(
      "--pipeline-parallel-size",
    );
  });

  test("vLLM on Ray: the leader runs the head first and vllm serve once the workers joined; the others run ray start", () => {
    const ray = [...vllm, "--distributed-executor-backend", "ray"];
    expect(memberRole("vllm", base(ray), 0)).toEqual({ listens: true, headFirst: true, waitFor: "members" });
    expect(memberRole("vllm", base(ray), 1)).toEqual({ listens: false, headFirst: false, waitFor: "leader" });
    const leader = memberPlan(ctx("vllm"), base(ray), group(0, two()), "10.0.0.1", 6379);
    expect(leader.argv).toEqual([...ray, "--pipeline-parallel-size", "2"]);
    expect(leader.env.RAY_ADDRESS).toBe("10.0.0.1:6379");
    expect(memberPlan(ctx("vllm", 2), base(ray), group(1, two("10.0.0.1:6379")), "10.0.0.2").argv).toEqual([
      "ray",
      "start",
      "--address",
      "10.0.0.1:6379",
      "--node-ip-address",
      "10.0.0.2",
      "--num-gpus",
      "2",
      "--block",
    ]);
  });

  test("SGLang: --nnodes, --node-rank, --dist-init-addr and the group's tensor parallel size", () => {
    const sg = ["python3", "-m", "sglang.launch_server", "--model-path", "m"];
    expect(memberPlan(ctx("sglang", 4), base(sg), group(0, two()), "10.0.0.1", 20000).argv).toEqual([
      ...sg,
      "--tp",
      "8",
      "--nnodes",
      "2",
      "--node-rank",
      "0",
      "--dist-init-addr",
      "10.0.0.1:20000",
    ]);
    expect(
      memberPlan(ctx("sglang", 4), base([...sg, "--tp", "8"]), group(1, two("10.0.0.1:20000")), "10.0.0.2").argv,
    ).toEqual([...sg, "--tp", "8", "--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:20000"]);
  });

  test("llama.cpp: the others run rpc-server on their cluster address, the leader waits for them and gets --rpc", () => {
    const ls = ["llama-server", "-m", "/m.gguf", "--host", "127.0.0.1", "--port", "9000"];
    expect(memberRole("llamacpp", base(ls), 0).waitFor).toBe("listening members");
    const rpc = memberPlan(ctx("llamacpp"), base(ls), group(1, two()), "10.0.0.2", 50052);
    expect(rpc.argv).toEqual(["/opt/llama/rpc-server", "--host", "10.0.0.2", "--port", "50052"]);
    expect(rpc.healthUrls).toEqual(["tcp://10.0.0.2:50052"]);
    expect(
      memberPlan(ctx("llamacpp"), base(ls), group(0, two(undefined, "10.0.0.2:50052", [false, true])), "10.0.0.1").argv,
    ).toEqual([...ls, "--rpc", "10.0.0.2:50052"]);
    expect(() =>
      memberPlan(
        ctx("llamacpp"),
        { ...base(ls), builtin: true },
        group(0, two(undefined, "10.0.0.2:50052")),
        "10.0.0.1",
      ),
    ).toThrow("built-in llama.cpp runtime cannot use the RPC servers");
  });

  test("what a member waits for is said by member and worker", () => {
    expect(missingFor("leader", group(1, two()))).toBe('the leader (member 0 on "a") to open its group port');
    expect(missingFor("leader", group(1, two("10.0.0.1:1")))).toBeUndefined();
    expect(missingFor("listening members", group(0, two(undefined, undefined, [false, true])))).toBe(
      'member 1 on "b" to be up',
    );
    expect(missingFor("members", group(0, two(undefined, undefined, [false, true])))).toBeUndefined();
  });
});

describe("restarting a group as one", () => {
  /** A store double recording the group updates GroupRestarts makes (the SQL is tested end to end in test/multinode.test.ts). */
  function harness() {
    const writes: string[] = [];
    const timers: { fn: () => void; ms: number }[] = [];
    let t = 0;
    const chain = (what: string) => ({
      set: (v: Record<string, unknown>) => ({
        where: async () => void writes.push(`${what} ${JSON.stringify(v.state ?? v.reason ?? v.generation)}`),
      }),
    });
    const db = {
      update: () => chain("update"),
      select: () => ({ from: () => ({ where: async () => [{ id: "x" }] }) }),
    } as unknown as Db;
    const changes = { n: 0 };
    const restarts = new GroupRestarts(db, {
      policy: { baseMs: 1000, maxMs: 60_000, maxCrashes: 2, windowMs: 600_000 },
      onChange: () => changes.n++,
      now: () => t,
      setTimeout: (fn, ms) => timers.push({ fn, ms }),
    });
    return { restarts, writes, timers, changes, advance: (ms: number) => (t += ms) };
  }
  const member = { id: "asg_b", group_id: "grp_1", node_rank: 1, generation: 0 } as AssignmentView;

  test("a failed member restarts the whole group after the back-off, doubling, then gives up past the crash limit", async () => {
    const h = harness();
    await h.restarts.memberFailed(member, "b", "vllm exited with code 1\n--- last output ---\nNCCL error");
    expect(h.timers.map((x) => x.ms)).toEqual([1000]);
    expect(h.writes[0]).toBe(
      'update "member 1 on worker \\"b\\" failed: vllm exited with code 1; restarting the whole group in 1000 ms"',
    );
    await h.restarts.memberFailed(member, "b", "again"); // the same failure seen twice: one restart
    expect(h.timers.length).toBe(1);
    h.timers[0].fn();
    await Bun.sleep(0);
    expect(h.changes.n).toBe(1);
    h.advance(5000);
    await h.restarts.memberFailed(member, "b", "boom");
    expect(h.timers.map((x) => x.ms)).toEqual([1000, 2000]);
    h.timers[1].fn();
    await Bun.sleep(0);
    await h.restarts.memberFailed(member, "b", "boom");
    expect(h.timers.length).toBe(2);
    expect(h.writes.at(-1)).toBe('update "failed"');
  });
});
