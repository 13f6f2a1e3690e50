/**
 * vLLM as it really is (issue 34): its default --max-num-seqs depends on the GPU (1024 on GPUs of
 * 70 GiB or more that are not A100s, vllm/engine/arg_utils.py get_batch_defaults), so inferd's slots
 * must too (M1); its key may come from VLLM_API_KEY (M5). The fake vLLM computes the same default
 * from the GPUs it sees (test/fixtures/runtime/cli.ts vllmDefaultSeqs).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { vllm } from "../agent/engines/vllm";
import { routeMissing } from "../src/dataplane/forward";
import { runtimeEnv } from "../agent/env";
import type { GroupSpec } from "../agent/protocol";
import { memberPlan } from "../agent/runtimes/group";
import type { LaunchPlan } from "../agent/runtimes/types";
import { cleanup } from "./helpers/proc";
import { launchContext } from "./helpers/launch";
import { startServing, type Serving } from "./helpers/serving";

afterAll(cleanup);

const gpu = (name: string, gib: number) => ({ name, memory_total_mib: gib * 1024 });

describe("vLLM's capacity, as vLLM works it out", () => {
  test("1024 on an H100/H200-class GPU, 256 on a 24 GiB GPU and on an A100 80GB, the command's own when set", () => {
    const slots = (gpus: { name: string; memory_total_mib: number }[], args: string[] = [], version?: string) =>
      vllm.capacity({ args: ["vllm", "serve", "m", ...args], gpus, env: {}, version }).slots;
    expect(slots([gpu("NVIDIA H200", 140)])).toBe(1024);
    expect(slots([gpu("NVIDIA H100 80GB HBM3", 80)])).toBe(1024);
    expect(slots([gpu("NVIDIA A100-SXM4-80GB", 80)])).toBe(256);
    expect(slots([gpu("NVIDIA GeForce RTX 4090", 24)])).toBe(256);
    expect(slots([])).toBe(256);
    expect(slots([gpu("NVIDIA H200", 140)], ["--max-num-seqs", "64"])).toBe(64);
    expect(slots([gpu("NVIDIA H200", 140)], [], "0.8.5")).toBe(256);
  });
  test("the key inferd sends: --api-key, else VLLM_API_KEY", () => {
    expect(vllm.apiKeyOf(["vllm", "serve", "m", "--api-key", "flag"], { VLLM_API_KEY: "env" })).toBe("flag");
    expect(vllm.apiKeyOf(["vllm", "serve", "m"], { VLLM_API_KEY: "env" })).toBe("env");
  });
});

describe.each([
  ["an H200", "1x NVIDIA H200:143771", 1024],
  ["an A100 80GB", "1x NVIDIA A100-SXM4-80GB:81920", 256],
  ["an RTX 4090", "1x NVIDIA GeForce RTX 4090:24564", 256],
])("a vLLM replica on %s", (_what, gpus, expected) => {
  let s: Serving;
  afterAll(() => s?.stop());
  test(`takes ${expected} requests at once, as vLLM itself does`, async () => {
    s = await startServing({ FAKE_GPUS: gpus, FAKE_LOAD_MS: "50" });
    const w = await s.createWorkload({
      name: "m",
      backend: "vllm",
      model_name: "m",
      config: { command: "vllm serve m" },
    });
    const ready = await s.waitState(w.id);
    expect(ready.assignments[0].concurrency).toBe(expected);
  });
});

test("a key in the agent's VLLM_API_KEY: ready and serving, never 401", async () => {
  const s = await startServing({ VLLM_API_KEY: "secret-from-env", FAKE_LOAD_MS: "50" });
  try {
    const w = await s.createWorkload({
      name: "keyed",
      backend: "vllm",
      model_name: "keyed",
      config: { command: "vllm serve keyed" },
    });
    await s.waitState(w.id);
    const r = await s.data(w.slug, "/v1/chat/completions", {
      body: { model: "keyed", messages: [{ role: "user", content: "hi" }], max_tokens: 2 },
    });
    expect(r.status).toBe(200);
  } finally {
    await s.stop();
  }
});

test("a pinned vLLM-Omni version installs the vllm-omni package, whose vllm takes --omni", async () => {
  const s = await startServing({ FAKE_LOAD_MS: "50", FAKE_INSTALL_MS: "20" });
  try {
    const w = await s.createWorkload({
      name: "omni",
      backend: "vllm-omni",
      model_name: "omni",
      task_type: "text2image",
      config: { command: "vllm serve omni --omni", vllm_version: "0.11.0" },
    });
    const ready = await s.waitState(w.id, "ready", 60_000);
    expect(ready.assignments[0].state).toBe("ready");
    const installs = s.events((e) => e.event === "install").map((e) => `${e.package}==${e.version}`);
    expect(installs).toContain("vllm-omni==0.11.0");
    const start = s.events((e) => e.event === "start" && (e.argv as string[]).includes("--omni")).at(-1)!;
    expect((start.env as Record<string, string>).PATH.split(":")[0]).toBe(`${s.dataDir}/runtimes/vllm-omni/0.11.0/bin`);
  } finally {
    await s.stop();
  }
});

describe("a vLLM group on machines with several network interfaces", () => {
  const ctx = (backend: string) => launchContext(backend, { gpuIndices: [0] });
  const base = (argv: string[]): LaunchPlan => ({
    argv,
    env: {},
    baseUrl: "http://127.0.0.1:9000",
    healthUrls: [],
    prep: [],
  });
  const members = [
    { rank: 0, worker: "a", address: "10.0.0.1", ready: true, endpoint: "10.0.0.1:29500" },
    { rank: 1, worker: "b", address: "10.0.0.2", ready: false },
  ];
  const group = (rank: number): GroupSpec => ({ id: "g", nodes: 2, rank, generation: 0, members });

  test("each member advertises its cluster address (VLLM_HOST_IP), in torch and in Ray mode", () => {
    for (const extra of [[], ["--distributed-executor-backend", "ray"]]) {
      const argv = ["vllm", "serve", "m", ...extra];
      expect(memberPlan(ctx("vllm"), base(argv), group(0), "10.0.0.1", 29500).env.VLLM_HOST_IP).toBe("10.0.0.1");
      expect(memberPlan(ctx("vllm"), base(argv), group(1), "10.0.0.2").env.VLLM_HOST_IP).toBe("10.0.0.2");
    }
  });
  test("GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME reach the runtime", () => {
    const env = runtimeEnv({ GLOO_SOCKET_IFNAME: "eth1", NCCL_SOCKET_IFNAME: "eth1", INFERD_SECRET: "x" });
    expect(env).toEqual({ GLOO_SOCKET_IFNAME: "eth1", NCCL_SOCKET_IFNAME: "eth1" });
  });
  test("a pinned vLLM 0.18 or later in Ray mode across machines installs Ray beside it", () => {
    const ray = ["vllm", "serve", "m", "--distributed-executor-backend", "ray"];
    expect(vllm.pinned!.install("0.18.0", { args: ray, nodes: 2 }).extra).toEqual(["ray[default]"]);
    expect(vllm.pinned!.install("0.11.0", { args: ray, nodes: 2 }).extra).toEqual([]);
    expect(vllm.pinned!.install("0.18.0", { args: ["vllm", "serve", "m"], nodes: 2 }).extra).toEqual([]);
  });
});

describe("a runtime's 404 on a route inferd asks first (/v1/messages, /v1/responses)", () => {
  const said = async (body: string) => (await routeMissing(new Response(body, { status: 404 }))).missing;
  test("the route is missing: FastAPI's, llama-server's or an empty 404", async () => {
    expect(await said(JSON.stringify({ detail: "Not Found" }))).toBe(true);
    expect(
      await said(JSON.stringify({ error: { code: 404, message: "File Not Found", type: "not_found_error" } })),
    ).toBe(true);
    expect(await said("")).toBe(true);
  });
  test("vLLM's NotFoundError for the model (both shapes) is an answer, read back whole", async () => {
    const nested = {
      error: { message: "The model `x` does not exist.", type: "NotFoundError", param: "model", code: 404 },
    };
    const flat = {
      object: "error",
      message: "The model `x` does not exist.",
      type: "NotFoundError",
      param: null,
      code: 404,
    };
    for (const body of [nested, flat]) {
      const r = await routeMissing(new Response(JSON.stringify(body), { status: 404 }));
      expect(r.missing).toBe(false);
      expect(await r.answer.json()).toEqual(body);
    }
  });
});
