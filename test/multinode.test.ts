import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { cleanup, tempDir, waitFor } from "./helpers/proc";
import { joinAgent, startHost, type AgentProc, type Host } from "./helpers/agents";
import { FIXTURE_BIN, SGLANG_BIN } from "./fixtures";
import { writeTinyGguf } from "./fixtures/gguf";

/**
 * One workload on two machines: two remote agents on loopback (each its own "machine", both with
 * --cluster-address 127.0.0.1) run the members of a group with the engines' multi-node flags; the
 * fakes in test/fixtures do the engines' real TCP rendezvous (see test/fixtures/rendezvous.ts), so a
 * member started with wrong flags, or a leader with a missing member, never becomes ready.
 */
let host: Host;
let live: string;
const agents: AgentProc[] = [];
const records: Record<string, string> = {};
const dir = tempDir("multinode");
const gguf = join(dir, "tiny.gguf");

beforeAll(async () => {
  writeTinyGguf(gguf);
  host = await startHost({ INFERD_RESTART_BACKOFF_MS: "100" });
  await host.admin("/admin/projects", { name: "Big", slug: "big" });
  live = (await (await host.admin("/admin/projects/big/keys", { name: "k", type: "live" })).json()).secret;
  for (const name of ["gpu-a", "gpu-b"]) {
    records[name] = join(dir, `${name}.jsonl`);
    agents.push(
      await joinAgent(host, name, {
        INFERD_CLUSTER_ADDRESS: "127.0.0.1",
        FAKE_RECORD: records[name],
        PATH: [SGLANG_BIN, FIXTURE_BIN, process.env.PATH ?? ""].join(delimiter),
      }),
    );
  }
});
afterAll(async () => {
  await Promise.all(agents.map((a) => a.stop().catch(() => 0)));
  await host.stop();
  await cleanup();
});

type Start = { event: string; argv: string[]; pid: number; env: Record<string, string | undefined>; time: number };
/** The start events of the fakes on one agent's machine whose argv mentions `word`. */
const starts = (agent: string, word: string): Start[] =>
  existsSync(records[agent])
    ? readFileSync(records[agent], "utf8")
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l) as Start)
        .filter((e) => e.event === "start" && e.argv?.some((a) => a.includes(word)))
    : [];
const detail = async (id: string) => (await host.admin(`/admin/workloads/${id}`)).json();
const chat = (slug: string) =>
  fetch(`${host.url}/endpoint/big/${slug}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${live}`, "content-type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
  });
/** The value after `flag` in an argv. */
const after = (argv: string[], flag: string) => argv[argv.indexOf(flag) + 1];

type Member = {
  worker_id: string;
  state: string;
  node_rank: number;
  group_id: string;
  generation: number;
  endpoint: string | null;
  reason?: string;
};
/** Creates a workload spanning both machines and waits until every member is ready. */
async function group(name: string, backend: string, command: string, model: string) {
  const w = await (
    await host.admin("/admin/projects/big/workloads", {
      name,
      backend,
      model_name: model,
      config: { command },
      nodes: 2,
    })
  ).json();
  let seen = "";
  const d = await waitFor(
    async () => {
      const d = await detail(w.id);
      seen = JSON.stringify(
        { error: d.scheduling_error, members: d.assignments.map((a: Member) => [a.node_rank, a.state, a.reason]) },
        null,
        1,
      );
      return d.assignments.length === 2 && d.assignments.every((a: Member) => a.state === "ready") ? d : undefined;
    },
    { what: `${name}: both members ready`, timeoutMs: 60_000, detail: () => seen },
  );
  const members = (d.assignments as Member[]).sort((a, b) => a.node_rank - b.node_rank);
  const names = new Map(agents.map((a, i) => [a.workerId, ["gpu-a", "gpu-b"][i]]));
  return { w, members, leader: names.get(members[0].worker_id)!, follower: names.get(members[1].worker_id)! };
}

describe("one model on two machines", () => {
  test("placed all or nothing: a group the fleet cannot hold is not placed, and says what is missing", async () => {
    const w = await (
      await host.admin("/admin/projects/big/workloads", {
        name: "Too big",
        backend: "vllm",
        model_name: "m-big",
        config: { command: "vllm serve m-big --tensor-parallel-size 2" },
        nodes: 2,
      })
    ).json();
    const d = await waitFor(async () => ((await detail(w.id)).scheduling_error ? detail(w.id) : undefined), {
      what: "a scheduling error",
    });
    expect(d.assignments).toEqual([]);
    expect(d.scheduling_error).toBe(
      'this workload spans 2 machines: it needs 2 workers online with --cluster-address and 2 GPUs each; found none ("gpu-a" has 1 GPU, not 2; "gpu-b" has 1 GPU, not 2)',
    );
    const three = await (
      await host.admin(`/admin/workloads/${w.id}`, { nodes: 3, config: { command: "vllm serve m-big" } }, "PATCH")
    ).json();
    expect(three.nodes).toBe(3);
    expect(
      await waitFor(
        async () =>
          (await detail(w.id)).scheduling_error?.includes("found 2")
            ? (await detail(w.id)).scheduling_error
            : undefined,
        { what: "error for 3" },
      ),
    ).toContain('needs 3 workers online with --cluster-address and 1 GPU each; found 2: "gpu-a", "gpu-b"');
    expect((await detail(w.id)).assignments).toEqual([]);
    await host.admin(`/admin/workloads/${w.id}`, undefined, "DELETE");
  });

  test("vLLM: ranks, the leader's rendezvous, pipeline parallel over the machines; the other headless; requests reach the leader", async () => {
    const { w, members, leader, follower } = await group("vllm torch", "vllm", "vllm serve m-torch", "m-torch");
    const [l] = starts(leader, "m-torch");
    const [f] = starts(follower, "m-torch");
    expect(after(l.argv, "--nnodes")).toBe("2");
    expect(after(l.argv, "--node-rank")).toBe("0");
    expect(after(l.argv, "--pipeline-parallel-size")).toBe("2");
    expect(after(l.argv, "--tensor-parallel-size")).toBe("1");
    expect(after(l.argv, "--master-addr")).toBe("127.0.0.1");
    expect(l.argv).not.toContain("--headless");
    expect(after(f.argv, "--node-rank")).toBe("1");
    expect(f.argv).toContain("--headless");
    expect(`${after(f.argv, "--master-addr")}:${after(f.argv, "--master-port")}`).toBe(members[0].endpoint!);
    expect(members[0].group_id).toBe(members[1].group_id);
    const r = await chat("vllm-torch");
    expect(r.status).toBe(200);
    expect((await r.json()).model).toBe("m-torch");
    await host.admin(`/admin/workloads/${w.id}`, undefined, "DELETE");
  });

  test("vLLM on Ray: the leader runs the Ray head, the other joins it, vllm serve runs on the leader alone", async () => {
    const { w, leader, follower } = await group(
      "vllm ray",
      "vllm",
      "vllm serve m-ray --distributed-executor-backend ray",
      "m-ray",
    );
    const [head] = starts(leader, "--head");
    const [serve] = starts(leader, "m-ray");
    const [worker] = starts(follower, "--address");
    expect(starts(follower, "m-ray")).toEqual([]);
    const gcs = `${after(head.argv, "--node-ip-address")}:${after(head.argv, "--port")}`;
    expect(after(worker.argv, "--address")).toBe(gcs);
    expect(serve.env.RAY_ADDRESS).toBe(gcs);
    expect(after(serve.argv, "--pipeline-parallel-size")).toBe("2");
    expect((await chat("vllm-ray")).status).toBe(200);
    await host.admin(`/admin/workloads/${w.id}`, undefined, "DELETE");
  });

  test("SGLang: --nnodes, --node-rank and --dist-init-addr on the leader's cluster address", async () => {
    const { w, members, leader, follower } = await group(
      "sglang",
      "sglang",
      "python3 -m sglang.launch_server --model-path m-sg",
      "m-sg",
    );
    const [l] = starts(leader, "m-sg");
    const [f] = starts(follower, "m-sg");
    for (const [s, rank] of [
      [l, "0"],
      [f, "1"],
    ] as const) {
      expect(after(s.argv, "--nnodes")).toBe("2");
      expect(after(s.argv, "--node-rank")).toBe(rank);
      expect(after(s.argv, "--dist-init-addr")).toBe(members[0].endpoint!);
      expect(after(s.argv, "--tp")).toBe("2");
    }
    expect((await chat("sglang")).status).toBe(200);
    await host.admin(`/admin/workloads/${w.id}`, undefined, "DELETE");
  });

  test("llama.cpp: the other machine runs rpc-server, the leader gets --rpc once it listens", async () => {
    const { w, members, leader, follower } = await group(
      "llama rpc",
      "llamacpp",
      `llama-server -m ${gguf} --alias m-llama`,
      "m-llama",
    );
    const [rpc] = starts(follower, "rpc-server");
    const [l] = starts(leader, "m-llama");
    expect(`${after(rpc.argv, "--host")}:${after(rpc.argv, "--port")}`).toBe(members[1].endpoint!);
    expect(after(l.argv, "--rpc")).toBe(members[1].endpoint!);
    expect((await chat("llama-rpc")).status).toBe(200);
    await host.admin(`/admin/workloads/${w.id}`, undefined, "DELETE");
  });

  test("killing one member restarts the whole group, naming the member; requests are served again", async () => {
    const { w, members, leader, follower } = await group("restarts", "vllm", "vllm serve m-restart", "m-restart");
    const [f] = starts(follower, "m-restart");
    process.kill(f.pid, "SIGKILL");
    let seen = "";
    const d = await waitFor(
      async () => {
        const d = await detail(w.id);
        seen =
          JSON.stringify(
            d.assignments.map((a: Member) => [a.node_rank, a.state, a.generation, a.endpoint, a.reason]),
            null,
            1,
          ) +
          ["gpu-a", "gpu-b"]
            .map((n) =>
              readFileSync(records[n], "utf8")
                .split("\n")
                .filter((l) => l.includes("m-restart") || l.includes('"exit"') || l.includes('"joined"'))
                .slice(-8)
                .join("\n"),
            )
            .join("\n");
        return d.assignments.length === 2 &&
          d.assignments.every((a: Member) => a.generation === 1 && a.state === "ready")
          ? d
          : undefined;
      },
      { what: "the group restarted and ready", timeoutMs: 60_000, detail: () => seen },
    );
    expect(d.assignments.map((a: Member) => a.group_id)).toEqual([members[0].group_id, members[0].group_id]);
    expect(starts(leader, "m-restart").length).toBe(2);
    expect(starts(follower, "m-restart").length).toBe(2);
    const leaderId = d.assignments.find((a: Member & { id: string }) => a.node_rank === 0).id;
    const logs = await (await host.admin(`/admin/workloads/${w.id}/logs?assignment=${leaderId}`)).json();
    // The killed member is named whether its failure or its leader's (peer lost) was reported first.
    expect(logs.replicas[0].text).toContain(`member 1 on worker "${follower}" failed: vllm was killed by SIGKILL`);
    expect(logs.replicas[0].text).toContain("restarting the whole group in 100 ms");
    expect((await chat("restarts")).status).toBe(200);
    await host.admin(`/admin/workloads/${w.id}`, undefined, "DELETE");
  });
});
