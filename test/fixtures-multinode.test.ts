// Tests of the fakes' multi-node modes, run as real processes the way inferd's agents on several
// machines would run them (here every "machine" is 127.0.0.1): vLLM's --nnodes/--headless group,
// vLLM on a Ray cluster (fake `ray start`), SGLang's --dist-init-addr group, llama.cpp's rpc-server
// with `llama-server --rpc`. Each waits on conditions (output lines, health, exits), never on time.

import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fixtureEnv, type FixtureProcess, freePort, readRecord, spawnFixture, waitHealthy } from "./fixtures";
import type { RecordEvent } from "./fixtures/record";
import { waitFor } from "./helpers/proc";

const TMP = mkdtempSync(join(tmpdir(), "inferd-multinode-"));
const started: FixtureProcess[] = [];

function start(cmd: string[], env: Record<string, string>): FixtureProcess {
  const p = spawnFixture(cmd, env, TMP);
  started.push(p);
  return p;
}

/** Runs a command that is expected to exit; returns its code and output. */
async function finish(cmd: string[], env: Record<string, string>) {
  const p = start(cmd, env);
  return { code: await p.exited, output: p.output() };
}

/** GET status, or "refused" when nothing listens. */
const status = (url: string) =>
  fetch(url)
    .then(async (r) => (await r.body?.cancel(), r.status))
    .catch(() => "refused" as const);

const starts = (file: string, pred: (e: RecordEvent) => boolean = () => true) =>
  readRecord(file).filter((e) => e.event === "start" && pred(e));

afterAll(async () => {
  for (const p of started) if (p.proc.exitCode === null) p.proc.kill("SIGKILL");
  await Promise.all(started.map((p) => p.exited));
  rmSync(TMP, { recursive: true, force: true });
});

describe("vLLM --nnodes (torch.distributed, multiprocessing backend)", () => {
  test("2 ranks: the leader stays unhealthy until rank 1 joins; killing rank 1 kills the leader; start events carry argv and env", async () => {
    const record = join(TMP, "vllm-torch.jsonl");
    const [http, master] = [await freePort(), await freePort()];
    const common = [
      "--tensor-parallel-size",
      "1",
      "--pipeline-parallel-size",
      "2",
      "--nnodes",
      "2",
      "--master-addr",
      "127.0.0.1",
      "--master-port",
      String(master),
    ];
    const leaderArgv = [
      "vllm",
      "serve",
      "org/big",
      "--host",
      "127.0.0.1",
      "--port",
      String(http),
      ...common,
      "--node-rank",
      "0",
    ];
    const memberPort = await freePort();
    const memberArgv = [
      "vllm",
      "serve",
      "org/big",
      "--port",
      String(memberPort),
      ...common,
      "--node-rank",
      "1",
      "--headless",
    ];
    const leader = start(leaderArgv, fixtureEnv({ FAKE_RECORD: record, FAKE_LOAD_MS: "0", CUDA_VISIBLE_DEVICES: "0" }));
    const base = `http://127.0.0.1:${http}`;
    await leader.waitOutput("world_size=2 rank=0 local_rank=0 distributed_init_method=tcp://127.0.0.1:");
    // With no load time, only the missing rank keeps it from serving.
    const seen: (number | string)[] = [];
    await waitFor(async () => (seen.push(await status(`${base}/health`)), seen.length >= 5 || undefined), {
      what: "five health answers",
    });
    expect(new Set(seen)).toEqual(new Set([503]));
    expect(await status(`${base}/v1/models`)).toBe(503);
    expect(readRecord(record).some((e) => e.event === "joined")).toBe(false);

    const member = start(memberArgv, fixtureEnv({ FAKE_RECORD: record, FAKE_LOAD_MS: "0", CUDA_VISIBLE_DEVICES: "1" }));
    await waitHealthy(base);
    expect((await (await fetch(`${base}/v1/models`)).json()).data[0].id).toBe("org/big");
    await member.waitOutput("Launching vLLM (v0.11.0) headless multiproc executor, with head node address 127.0.0.1:");
    await waitFor(() => readRecord(record).some((e) => e.event === "joined" && e.role === "member") || undefined, {
      what: "the member's joined event",
    });
    expect(await status(`http://127.0.0.1:${memberPort}/health`)).toBe("refused"); // headless: no API server of its own

    const [l, m] = [starts(record, (e) => e.node_rank === 0)[0], starts(record, (e) => e.node_rank === 1)[0]];
    expect(l).toMatchObject({
      persona: "vllm",
      argv: leaderArgv,
      role: "leader",
      nnodes: 2,
      rendezvous: `127.0.0.1:${master}`,
      local_gpus: 1,
      env: { CUDA_VISIBLE_DEVICES: "0" },
    });
    expect(m).toMatchObject({
      persona: "vllm",
      argv: memberArgv,
      role: "member",
      nnodes: 2,
      rendezvous: `127.0.0.1:${master}`,
      env: { CUDA_VISIBLE_DEVICES: "1" },
    });
    expect(readRecord(record).find((e) => e.event === "joined" && e.role === "leader")?.member_pids).toEqual([
      member.proc.pid,
    ]);

    member.proc.kill("SIGKILL");
    expect(await leader.exited).toBe(1);
    expect(leader.output()).toContain("socketProgress: Connection closed by remote peer");
    expect(leader.output()).toContain("EngineDeadError");
    expect(readRecord(record).find((e) => e.event === "exit" && e.pid === leader.proc.pid)).toMatchObject({
      code: 1,
      reason: "peer_lost",
    });
  });

  test("SIGTERM stops a member with 0; when the leader goes, a member exits 1", async () => {
    const [http, master] = [await freePort(), await freePort()];
    const common = ["-tp", "2", "--nnodes", "2", "--master-addr", "127.0.0.1", `--master-port=${master}`];
    const env = fixtureEnv({ FAKE_LOAD_MS: "0", CUDA_VISIBLE_DEVICES: "0" });
    const leader = start(
      ["vllm", "serve", "m", "--port", String(http), "--host", "127.0.0.1", ...common, "--node-rank", "0"],
      env,
    );
    const first = start(["vllm", "serve", "m", ...common, "--node-rank", "1", "--headless"], env);
    await waitHealthy(`http://127.0.0.1:${http}`);
    first.proc.kill("SIGTERM");
    expect(await first.exited).toBe(0);
    expect(await leader.exited).toBe(1);

    const again = start(
      ["vllm", "serve", "m", "--port", String(http), "--host", "127.0.0.1", ...common, "--node-rank", "0"],
      env,
    );
    const second = start(["vllm", "serve", "m", ...common, "--node-rank", "1", "--headless"], env);
    await waitHealthy(`http://127.0.0.1:${http}`);
    await second.waitOutput("Model loading took");
    again.proc.kill("SIGTERM");
    expect(await again.exited).toBe(0);
    expect(await second.exited).toBe(1);
    expect(second.output()).toContain("NCCL error");
  });

  test("refused starts: no --headless on rank 1, no master address, too few GPUs, nobody to join, nobody joining, Ray with --nnodes", async () => {
    const master = String(await freePort());
    const group = ["-pp", "2", "--nnodes", "2", "--master-addr", "127.0.0.1", "--master-port", master];
    const noHeadless = await finish(["vllm", "serve", "m", ...group, "--node-rank", "1"], fixtureEnv());
    expect(noHeadless.code).toBe(1);
    expect(noHeadless.output).toContain("start node ranks > 0 with --headless");
    const noAddr = await finish(
      ["vllm", "serve", "m", "--nnodes", "2", "--node-rank", "1", "--headless"],
      fixtureEnv(),
    );
    expect(noAddr.code).toBe(2);
    expect(noAddr.output).toContain("needs --master-addr and --master-port");
    // tp 2 × pp 2 over 2 nodes: 2 GPUs per node.
    const gpus = await finish(
      ["vllm", "serve", "m", "-tp", "2", ...group, "--node-rank", "1", "--headless"],
      fixtureEnv({ CUDA_VISIBLE_DEVICES: "0" }),
    );
    expect(gpus.code).toBe(1);
    expect(gpus.output).toContain(
      "local_world_size (2) must be less than or equal to the number of visible devices (1)",
    );
    const lonely = await finish(
      ["vllm", "serve", "m", ...group, "--node-rank", "1", "--headless"],
      fixtureEnv({ FAKE_RENDEZVOUS_TIMEOUT_MS: "300" }),
    );
    expect(lonely.code).toBe(1);
    expect(lonely.output).toContain(
      `The client socket has timed out after 1s while trying to connect to (127.0.0.1, ${master}).`,
    );
    const waiting = await finish(
      ["vllm", "serve", "m", "--port", String(await freePort()), ...group, "--node-rank", "0"],
      fixtureEnv({ FAKE_RENDEZVOUS_TIMEOUT_MS: "300" }),
    );
    expect(waiting.code).toBe(1);
    expect(waiting.output).toContain("Timed out after 1 seconds waiting for clients. 1/2 clients joined.");
    const ray = await finish(["vllm", "serve", "m", ...group, "--distributed-executor-backend", "ray"], fixtureEnv());
    expect(ray.code).toBe(1);
    expect(ray.output).toContain("nnodes > 1 can only be set when distributed executor backend is mp");
  });
});

describe("vLLM on a Ray cluster (fake `ray start`)", () => {
  test("head + worker + ray-backend leader: placed on both nodes, serves; losing the worker node kills it; losing the head kills the worker", async () => {
    const record = join(TMP, "ray.jsonl");
    const [gcs, http] = [await freePort(), await freePort()];
    const address = `127.0.0.1:${gcs}`;
    const headArgv = [
      "ray",
      "start",
      "--head",
      "--port",
      String(gcs),
      "--node-ip-address",
      "127.0.0.1",
      "--num-gpus",
      "1",
      "--block",
    ];
    const head = start(headArgv, fixtureEnv({ FAKE_RECORD: record }));
    await head.waitOutput("Ray runtime started.");
    const worker = start(
      ["ray", "start", `--address=${address}`, "--node-ip-address", "127.0.0.1", "--block"],
      fixtureEnv({ FAKE_RECORD: record, CUDA_VISIBLE_DEVICES: "0,1" }),
    );
    await worker.waitOutput("Ray runtime started.");
    const cluster = await finish(["ray", "status", "--address", address], fixtureEnv());
    expect(cluster.code).toBe(0);
    expect(cluster.output.match(/^ 1 node_[0-9a-f]+$/gm)).toHaveLength(2);
    expect(cluster.output).toContain(" 0.0/3.0 GPU");

    const vllmArgv = [
      "vllm",
      "serve",
      "org/big",
      "--host",
      "127.0.0.1",
      "--port",
      String(http),
      "-tp",
      "3",
      "--distributed-executor-backend",
      "ray",
    ];
    const leader = start(vllmArgv, fixtureEnv({ FAKE_RECORD: record, FAKE_LOAD_MS: "0", RAY_ADDRESS: address }));
    await waitHealthy(`http://127.0.0.1:${http}`);
    expect(leader.output()).toContain(`Connecting to existing Ray cluster at address: ${address}...`);
    expect((await finish(["ray", "status"], fixtureEnv({ RAY_ADDRESS: address }))).output).toContain(" 3.0/3.0 GPU");
    expect(readRecord(record).find((e) => e.event === "placed")?.nodes).toHaveLength(2);
    expect(starts(record, (e) => e.persona === "vllm")[0]).toMatchObject({
      argv: vllmArgv,
      role: "ray-driver",
      world_size: 3,
      env: { RAY_ADDRESS: address },
    });
    expect(starts(record, (e) => e.persona === "ray")).toMatchObject([
      { role: "head", argv: headArgv, rendezvous: address, gpus: 1 },
      { role: "worker", rendezvous: address, gpus: 2, env: { CUDA_VISIBLE_DEVICES: "0,1" } },
    ]);

    worker.proc.kill("SIGTERM");
    expect(await worker.exited).toBe(0);
    expect(await leader.exited).toBe(1);
    expect(leader.output()).toContain("The actor is dead because its node has died.");

    const again = start(
      ["ray", "start", "--address", address, "--node-ip-address", "127.0.0.1", "--num-gpus", "2", "--block"],
      fixtureEnv(),
    );
    await again.waitOutput("Ray runtime started.");
    head.proc.kill("SIGKILL");
    expect(await again.exited).toBe(1);
    expect(again.output()).toContain("Failed to connect to GCS within 60 seconds");
    expect(again.output()).toContain("Some Ray subprocesses exited unexpectedly:");
  });

  test("too few GPUs in the cluster, an unreachable head, a version mismatch, no --block; losing the head kills vLLM", async () => {
    const gcs = await freePort();
    const address = `127.0.0.1:${gcs}`;
    const unreachable = await finish(
      ["ray", "start", "--address", address, "--block"],
      fixtureEnv({ FAKE_RENDEZVOUS_TIMEOUT_MS: "200" }),
    );
    expect(unreachable.code).toBe(1);
    expect(unreachable.output).toContain(`Unable to connect to GCS (ray head) at ${address}`);
    expect((await finish(["ray", "start", "--head", "--port", String(gcs)], fixtureEnv())).code).toBe(2);
    expect((await finish(["ray", "--version"], fixtureEnv())).output).toBe("ray, version 2.49.2\n");

    const head = start(
      ["ray", "start", "--head", "--port", String(gcs), "--node-ip-address", "127.0.0.1", "--num-gpus", "2", "--block"],
      fixtureEnv(),
    );
    await head.waitOutput("Ray runtime started.");
    const old = await finish(
      ["ray", "start", "--address", address, "--block"],
      fixtureEnv({ FAKE_RAY_VERSION: "2.40.0" }),
    );
    expect(old.code).toBe(1);
    expect(old.output).toContain("Version mismatch");
    const big = await finish(
      ["vllm", "serve", "m", "--port", String(await freePort()), "-tp", "4", "--distributed-executor-backend", "ray"],
      fixtureEnv({ RAY_ADDRESS: address, FAKE_RAY_PG_WAIT_MS: "200" }),
    );
    expect(big.code).toBe(1);
    expect(big.output).toContain(
      "The number of required GPUs exceeds the total number of available GPUs in the placement group.",
    );
    expect(big.output).toContain("Cannot provide a placement group of placement_group_specs=");

    const http = await freePort();
    const leader = start(
      [
        "vllm",
        "serve",
        "m",
        "--host",
        "127.0.0.1",
        "--port",
        String(http),
        "-tp",
        "2",
        "--distributed-executor-backend",
        "ray",
      ],
      fixtureEnv({ RAY_ADDRESS: address, FAKE_LOAD_MS: "0" }),
    );
    await waitHealthy(`http://127.0.0.1:${http}`);
    head.proc.kill("SIGTERM");
    expect(await head.exited).toBe(0);
    expect(await leader.exited).toBe(1);
    expect(leader.output()).toContain("Failed to connect to GCS within 60 seconds");
  });
});

describe("SGLang --nnodes/--dist-init-addr", () => {
  test("2 ranks: rank 0 serves once rank 1 joined; rank 1 answers only its dummy health server; losing rank 0 kills rank 1", async () => {
    const record = join(TMP, "sglang.jsonl");
    const [http0, http1, dist] = [await freePort(), await freePort(), await freePort()];
    const group = ["--tp", "4", "--nnodes", "2", "--dist-init-addr", `127.0.0.1:${dist}`];
    const env = (gpus: string) =>
      fixtureEnv({ FAKE_RECORD: record, FAKE_LOAD_MS: "0", CUDA_VISIBLE_DEVICES: gpus }, { sglang: true });
    const rank0Argv = [
      "python3",
      "-m",
      "sglang.launch_server",
      "--model-path",
      "Qwen/Big",
      "--port",
      String(http0),
      ...group,
      "--node-rank",
      "0",
    ];
    const rank0 = start(rank0Argv, env("0,1"));
    await rank0.waitOutput("Init torch distributed begin.");
    const seen: (number | string)[] = [];
    await waitFor(
      async () => (seen.push(await status(`http://127.0.0.1:${http0}/health`)), seen.length >= 5 || undefined),
      { what: "five health answers" },
    );
    expect(new Set(seen)).toEqual(new Set([503]));

    const rank1 = start(
      [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "Qwen/Big",
        "--port",
        String(http1),
        ...group,
        "--node-rank",
        "1",
      ],
      env("2,3"),
    );
    await waitHealthy(`http://127.0.0.1:${http0}`);
    await waitHealthy(`http://127.0.0.1:${http1}`);
    expect(await status(`http://127.0.0.1:${http1}/v1/models`)).toBe(404);
    expect(rank1.output()).toContain(`Starting dummy health check server at 127.0.0.1:${http1}`);
    expect(starts(record, (e) => e.node_rank === 0)[0]).toMatchObject({
      persona: "sglang",
      argv: rank0Argv,
      role: "leader",
      local_gpus: 2,
      env: { CUDA_VISIBLE_DEVICES: "0,1" },
    });
    expect(starts(record, (e) => e.node_rank === 1)[0]).toMatchObject({
      role: "member",
      rendezvous: `127.0.0.1:${dist}`,
      env: { CUDA_VISIBLE_DEVICES: "2,3" },
    });

    rank0.proc.kill("SIGKILL");
    expect(await rank1.exited).toBe(1);
    expect(rank1.output()).toContain("Received sigquit from a child process.");
  });

  test("refused starts: tp not divisible by nnodes, too few GPUs on a node, no --dist-init-addr", async () => {
    const group = ["--nnodes", "2", "--dist-init-addr", `127.0.0.1:${await freePort()}`, "--node-rank", "1"];
    const env = (extra: Record<string, string> = {}) => fixtureEnv(extra, { sglang: true });
    const odd = await finish(
      ["python3", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "3", ...group],
      env(),
    );
    expect(odd.code).toBe(1);
    expect(odd.output).toContain("tp_size must be divisible by number of nodes");
    const few = await finish(
      ["python3", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "4", ...group],
      env({ CUDA_VISIBLE_DEVICES: "0" }),
    );
    expect(few.code).toBe(1);
    expect(few.output).toContain("invalid device ordinal");
    const noAddr = await finish(
      ["python3", "-m", "sglang.launch_server", "--model-path", "m", "--tp", "2", "--nnodes", "2", "--node-rank", "1"],
      env(),
    );
    expect(noAddr.code).toBe(1);
    expect(noAddr.output).toContain("please provide --dist-init-addr");
  });
});

describe("llama.cpp rpc-server + llama-server --rpc", () => {
  test("llama-server uses two rpc-servers; one going away kills it; an unreachable one fails its start", async () => {
    const record = join(TMP, "rpc.jsonl");
    const gguf = join(TMP, "tiny.gguf");
    writeFileSync(gguf, Buffer.concat([Buffer.from("GGUF"), Buffer.alloc(28)]));
    const [p1, p2, http] = [await freePort(), await freePort(), await freePort()];
    const env = fixtureEnv({ FAKE_RECORD: record, FAKE_LOAD_MS: "0", CUDA_VISIBLE_DEVICES: "0" });
    const rpc1 = start(["rpc-server", "--host", "127.0.0.1", "--port", String(p1)], env);
    const rpc2 = start(["rpc-server", "-H", "127.0.0.1", "-p", String(p2)], env);
    await rpc1.waitOutput(`endpoint       : 127.0.0.1:${p1}`);
    await rpc2.waitOutput("Starting RPC server v3.0.0");
    const argv = [
      "llama-server",
      "-m",
      gguf,
      "--port",
      String(http),
      "--rpc",
      `127.0.0.1:${p1},127.0.0.1:${p2}`,
      "-ngl",
      "99",
    ];
    const server = start(argv, env);
    await waitHealthy(`http://127.0.0.1:${http}`);
    await rpc1.waitOutput("Accepted client connection");
    await rpc2.waitOutput("Accepted client connection");
    expect(server.output()).toContain(`using device RPC1 (127.0.0.1:${p2})`);
    expect(starts(record, (e) => e.persona === "llama-server")[0]).toMatchObject({
      argv,
      role: "rpc-client",
      rpc: [`127.0.0.1:${p1}`, `127.0.0.1:${p2}`],
    });
    expect(starts(record, (e) => e.persona === "rpc-server")).toHaveLength(2);

    rpc2.proc.kill("SIGTERM");
    expect(await rpc2.exited).toBe(0);
    expect(await server.exited).toBe(1);
    expect(server.output()).toContain("Remote RPC server crashed or returned malformed response");
    await rpc1.waitOutput("Client connection closed");

    const missing = await finish(["llama-server", "-m", gguf, "--port", String(http), "--rpc", `127.0.0.1:${p2}`], env);
    expect(missing.code).toBe(1);
    expect(missing.output).toContain(`Failed to connect to 127.0.0.1:${p2}`);
    expect(missing.output).toContain('error while handling argument "--rpc": failed to register RPC device');
    expect(missing.output).not.toContain("HTTP server is listening"); // it fails before binding
  });
});
