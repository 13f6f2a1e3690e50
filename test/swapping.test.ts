/**
 * Many models on few GPUs, and the operator's controls, with the fake vLLM holding 90% of its GPU
 * while it runs (as vLLM does) and the fake nvidia-smi reporting what is held: two workloads that
 * cannot both fit take turns on one GPU, swapping out the least recently used idle one — never a
 * busy or a `fixed` one — and start / stop / rolling restart / retry from the admin API.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cleanup, tempDir, waitFor } from "./helpers/proc";
import { sseEvents, startServing, type Serving, type WorkloadDetail } from "./helpers/serving";

type Replica = WorkloadDetail["assignments"][number] & { desired: string };
let s: Serving;
beforeAll(async () => {
  s = await startServing({
    FAKE_GPUS: "2x NVIDIA L4:24000",
    FAKE_GPU_USAGE_DIR: tempDir("usage"),
    FAKE_LOAD_MS: "150",
    FAKE_TOKEN_MS: "40",
    INFERD_MAX_CRASHES: "1",
  });
});
afterAll(async () => {
  await s.stop();
  await cleanup();
});
const replicas = async (id: string) => (await s.workload(id)).assignments as Replica[];
const until = <T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 20_000) =>
  waitFor(check, { what, timeoutMs, detail: () => s.output() });
const chat = (slug: string, extra: Record<string, unknown> = {}) =>
  s.data(slug, "/v1/chat/completions", {
    body: { messages: [{ role: "user", content: "hi" }], max_tokens: 4, ...extra },
  });
const onDemand = (name: string) =>
  s.createWorkload({
    name,
    backend: "vllm",
    model_name: name,
    config: { command: `vllm serve ${name}` },
    execution_policy: "autoscaling",
    // Swapped out by stopping (test/sleep-wake.test.ts has the sleeping).
    execution_params: { min_replicas: 0, max_replicas: 1, idle_timeout_s: 600, sleep: false },
  });

describe("two workloads that cannot both fit share a GPU", () => {
  let fixed: { id: string; slug: string };
  let a: { id: string; slug: string };
  let b: { id: string; slug: string };
  let fixedPid: number;
  beforeAll(async () => {
    fixed = await s.createWorkload({
      name: "always",
      backend: "vllm",
      model_name: "always",
      config: { command: "vllm serve always" },
    });
    await s.waitState(fixed.id);
    fixedPid = s.events((e) => e.event === "start" && (e.argv as string[]).includes("always")).at(-1)!.pid as number;
    a = await onDemand("model-a");
    b = await onDemand("model-b");
  });

  test("the second one swaps out the least recently used idle one, which shows why", async () => {
    expect((await chat(a.slug)).status).toBe(200);
    const [ra] = await replicas(a.id);
    expect(ra.gpu_indices).toEqual([1]); // GPU 0 is held by the fixed workload
    expect((await chat(b.slug)).status).toBe(200);
    const swapped = (await replicas(a.id))[0];
    expect(swapped).toMatchObject({ state: "idle", desired: "idle", reason: `swapped out for ${s.project}/model-b` });
    expect((await replicas(b.id))[0]).toMatchObject({ state: "ready", gpu_indices: [1] });
  });

  test("alternating traffic: every request is answered, the GPU taking turns", async () => {
    for (const w of [a, b, a, b, a]) expect((await chat(w.slug)).status).toBe(200);
    expect((await replicas(a.id))[0].state).toBe("ready");
    expect((await replicas(b.id))[0].state).toBe("idle");
  });

  test("a replica with a request in flight is never swapped out: the other waits until it is done", async () => {
    // The fake answers "You said: …": 40 words streamed at 40 ms each, about 1.6 s.
    const long = chat(a.slug, {
      stream: true,
      max_tokens: 40,
      messages: [{ role: "user", content: "word ".repeat(40) }],
    });
    await until("model-a busy", async () => ((await s.workload(a.id)).assignments[0].in_flight > 0 ? true : undefined));
    const order: string[] = [];
    const streamed = long.then(async (r) => {
      const events = await sseEvents(r);
      order.push("a done");
      return events;
    });
    const other = chat(b.slug).then((r) => (order.push("b answered"), r));
    const events = await streamed;
    expect(events.at(-1)).toBe("[DONE]");
    const text = events
      .map((e) =>
        typeof e === "object"
          ? ((e as { choices?: { delta?: { content?: string } }[] }).choices?.[0]?.delta?.content ?? "")
          : "",
      )
      .join("");
    expect(text.trim().split(/\s+/)).toHaveLength(40); // the whole answer: it was not cut off
    expect((await other).status).toBe(200);
    expect(order).toEqual(["a done", "b answered"]);
  });

  test("the fixed workload was never touched", async () => {
    expect((await replicas(fixed.id))[0]).toMatchObject({ state: "ready", desired: "run" });
    expect(s.events((e) => e.event === "start" && (e.argv as string[]).includes("always")).at(-1)!.pid).toBe(fixedPid);
  });
});

describe("the operator's controls", () => {
  test("stop keeps a workload at zero (requests 503 with the reason, jobs wait); start brings it back", async () => {
    const w = await s.createWorkload({
      name: "ctl",
      backend: "vllm",
      model_name: "ctl",
      config: { command: "vllm serve ctl --gpu-memory-utilization 0.05" },
    });
    await s.waitState(w.id);
    const stopped = await (await s.admin(`/admin/workloads/${w.id}/stop`, { method: "POST" })).json();
    expect(stopped.paused).toBe(true);
    await until("idle after stop", async () => ((await replicas(w.id))[0].state === "idle" ? true : undefined));
    expect((await replicas(w.id))[0].reason).toBe("stopped by the operator");
    const refused = await chat(w.slug);
    expect(refused.status).toBe(503);
    expect((await refused.json()).error.message).toContain("stopped by the operator");
    const job = await (
      await s.data(w.slug, "/jobs", {
        body: { kind: "chat", body: { messages: [{ role: "user", content: "later" }] } },
      })
    ).json();
    expect((await (await s.admin(`/admin/workloads/${w.id}/start`, { method: "POST" })).json()).paused).toBe(false);
    await until("the job done after start", async () =>
      (await (await s.data(w.slug, `/jobs/${job.job_id}`)).json()).status === "completed" ? true : undefined,
    );
    expect((await replicas(w.id))[0].state).toBe("ready");
  });

  test("a rolling restart has a new replica ready before the old one stops: no request fails", async () => {
    const w = await s.createWorkload({
      name: "roll",
      backend: "vllm",
      model_name: "roll",
      config: { command: "vllm serve roll --gpu-memory-utilization 0.05" },
    });
    const [before] = (await s.waitState(w.id)).assignments;
    expect((await s.admin(`/admin/workloads/${w.id}/restart`, { method: "POST" })).status).toBe(202);
    let sawReady = true;
    const after = await until(
      "the old replica replaced",
      async () => {
        const rs = await replicas(w.id);
        sawReady &&= rs.some((r) => r.state === "ready");
        expect((await chat(w.slug)).status).toBe(200);
        return rs.length === 1 && rs[0].id !== before.id && rs[0].state === "ready" ? rs[0] : undefined;
      },
      30_000,
    );
    expect(sawReady).toBe(true);
    expect(after.id).not.toBe(before.id);
  });

  test("retry starts a failed replica again; a replica that has not failed cannot be retried", async () => {
    const w = await s.createWorkload({
      name: "broken",
      backend: "vllm",
      model_name: "broken",
      config: { command: "vllm serve broken -tp 8" },
    });
    const failed = await until("the replica failed", async () => {
      const [r] = await replicas(w.id);
      return r?.state === "failed" ? r : undefined;
    });
    const starts = () => s.events((e) => e.event === "start" && (e.argv as string[]).includes("broken")).length;
    const before = starts();
    const retried = await s.admin(`/admin/assignments/${failed.id}/retry`, { method: "POST" });
    expect(retried.status).toBe(200);
    await until("a new start after the retry", async () => (starts() > before ? true : undefined));
    const ok = await s.createWorkload({
      name: "fine",
      backend: "vllm",
      model_name: "fine",
      config: { command: "vllm serve fine --gpu-memory-utilization 0.05" },
    });
    const [r] = (await s.waitState(ok.id)).assignments;
    const refused = await s.admin(`/admin/assignments/${r.id}/retry`, { method: "POST" });
    expect(refused.status).toBe(409);
    expect((await refused.json()).error.code).toBe("not_failed");
  });
});

test("when nothing can be swapped out the request waits, then gets the queue's 503 with the reason", async () => {
  const small = await startServing({
    FAKE_GPUS: "1x NVIDIA L4:24000",
    FAKE_GPU_USAGE_DIR: tempDir("usage-1"),
    FAKE_LOAD_MS: "50",
    INFERD_QUEUE_WAIT_MS: "1500",
  });
  try {
    const fixed = await small.createWorkload({
      name: "holder",
      backend: "vllm",
      model_name: "holder",
      config: { command: "vllm serve holder" },
    });
    await small.waitState(fixed.id);
    const w = await small.createWorkload({
      name: "latecomer",
      backend: "vllm",
      model_name: "late",
      config: { command: "vllm serve late" },
      execution_policy: "autoscaling",
      execution_params: { idle_timeout_s: 60, sleep: false },
    });
    const r = await small.data(w.slug, "/v1/chat/completions", {
      body: { messages: [{ role: "user", content: "hi" }] },
    });
    expect(r.status).toBe(503);
    const { error } = await r.json();
    expect(error.code).toBe("queue_timeout");
    expect(error.message).toContain("no idle replica can be swapped out");
    expect((await small.workload(fixed.id)).assignments[0].state).toBe("ready");
  } finally {
    await small.stop();
  }
});
