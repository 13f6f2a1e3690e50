/**
 * Execution policies made real, with the fake vLLM and a fake nvidia-smi whose memory is what the
 * running fakes hold (FAKE_GPU_USAGE_DIR): cold start from zero through the OpenAI SDK, the idle
 * timeout stopping the runtime's process group, queue pressure adding replicas and draining back,
 * a schedule's window closing and opening, kill -9 while at zero, and slots from the runtime.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { cleanup, isAlive, tempDir, waitFor } from "./helpers/proc";
import { startServing, type Serving, type WorkloadDetail } from "./helpers/serving";
import { writeTinyGguf } from "./fixtures/gguf";

type Detail = WorkloadDetail & {
  scaling: {
    desired: number;
    current: number;
    reason: string;
    last_decision: { action: string; reason: string } | null;
  };
  assignments: (WorkloadDetail["assignments"][number] & { desired: string })[];
};

const servers: Serving[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop().catch(() => 0)));
  await cleanup();
});
/** inferd with two fake 24 GB GPUs whose memory follows the fake runtimes. */
async function serve(env: Record<string, string> = {}, dataDir?: string) {
  const s = await startServing(
    { FAKE_GPUS: "2x NVIDIA L4:24000", FAKE_GPU_USAGE_DIR: tempDir("usage"), FAKE_LOAD_MS: "150", ...env },
    [],
    dataDir,
  );
  servers.push(s);
  return s;
}
const detail = async (s: Serving, id: string) => (await s.workload(id)) as Detail;
const until = <T>(s: Serving, what: string, check: () => Promise<T | undefined>, timeoutMs = 20_000) =>
  waitFor(check, { what, timeoutMs, detail: () => s.output() });
const chat = (s: Serving, slug: string, content = "hi") =>
  s.data(slug, "/v1/chat/completions", { body: { messages: [{ role: "user", content }] } });

describe("autoscaling from zero", () => {
  let s: Serving;
  let w: { id: string; slug: string };
  beforeAll(async () => {
    s = await serve();
    w = await s.createWorkload({
      name: "ondemand",
      backend: "vllm",
      model_name: "od",
      config: { command: "vllm serve od" },
      execution_policy: "autoscaling",
      // Stopped, not put to sleep (test/sleep-wake.test.ts has the sleeping).
      execution_params: { min_replicas: 0, max_replicas: 1, idle_timeout_s: 2, sleep: false },
    });
  });

  test("a new workload waits at zero (idle), and the first request through the OpenAI SDK starts it and is answered", async () => {
    const d = await detail(s, w.id);
    expect(d.execution_params).toEqual({
      min_replicas: 0,
      max_replicas: 1,
      scale_up_after_s: 10,
      idle_timeout_s: 2,
      sleep: false,
    });
    expect(d.assignments[0]).toMatchObject({
      state: "idle",
      desired: "idle",
      reason: "scaled to zero: the first request starts it",
    });
    expect(s.events((e) => e.event === "start" && (e.argv as string[]).includes("od"))).toHaveLength(0);
    const openai = new OpenAI({ baseURL: `${s.url}/endpoint/${s.project}/ondemand/v1`, apiKey: s.live });
    const answer = await openai.chat.completions.create({
      model: "default",
      messages: [{ role: "user", content: "wake up" }],
    });
    expect(answer.choices[0].message.content).toBeTruthy();
    const after = await detail(s, w.id);
    expect(after.assignments[0]).toMatchObject({ state: "ready", desired: "run" });
    expect(after.scaling.last_decision?.reason).toContain("cold start");
  });

  test("idle for the timeout: the runtime's process group is stopped and the replica shows idle with the reason", async () => {
    const start = s.events((e) => e.event === "start" && (e.argv as string[]).includes("od")).at(-1)!;
    const idle = await until(s, "the replica idle after its timeout", async () => {
      const d = await detail(s, w.id);
      return d.assignments[0].state === "idle" ? d : undefined;
    });
    expect(idle.assignments[0].reason).toMatch(/^no request for \d+ s \(idle timeout 2 s\)$/);
    await until(s, "the runtime gone", async () => (!isAlive(start.pid as number) ? true : undefined));
    expect(s.events((e) => e.event === "exit" && e.pid === start.pid)[0]).toMatchObject({ reason: "signal" });
    // Still addressable: the next request starts it again.
    expect((await chat(s, w.slug)).status).toBe(200);
  });
});

test("queue pressure adds replicas up to the max on free GPUs, and they drain back when idle", async () => {
  const s = await serve({ FAKE_DELAY_MS: "800" });
  const w = await s.createWorkload({
    name: "busy",
    backend: "vllm",
    model_name: "busy",
    config: { command: "vllm serve busy --max-num-seqs 1" },
    execution_policy: "autoscaling",
    execution_params: {
      min_replicas: 0,
      max_replicas: 2,
      target_in_flight: 1,
      scale_up_after_s: 0,
      idle_timeout_s: 2,
      sleep: false,
    },
  });
  const burst = Array.from({ length: 8 }, (_, i) => chat(s, w.slug, `load ${i}`));
  const two = await until(s, "a second replica ready", async () => {
    const d = await detail(s, w.id);
    return d.assignments.filter((a) => a.state === "ready").length === 2 ? d : undefined;
  });
  expect(two.scaling.desired).toBe(2);
  expect(two.assignments.map((a) => a.gpu_indices[0]).sort()).toEqual([0, 1]); // the second one on the free GPU
  expect((await Promise.all(burst)).map((r) => r.status)).toEqual(Array(8).fill(200));
  const drained = await until(s, "both replicas idle again", async () => {
    const d = await detail(s, w.id);
    return d.assignments.every((a) => a.state === "idle") ? d : undefined;
  });
  expect(drained.assignments.length).toBeGreaterThanOrEqual(1);
  expect(drained.scaling.desired).toBe(0);
});

test("a schedule: replicas while a window is open; outside, requests get 503 with the reason and jobs wait for the next window", async () => {
  const s = await serve();
  const open = { windows: [{ cron: "* * * * *" }], sleep: false };
  const closed = { windows: [{ cron: "0 0 1 1 *", timezone: "UTC" }], sleep: false };
  const w = await s.createWorkload({
    name: "office",
    backend: "vllm",
    model_name: "office",
    config: { command: "vllm serve office" },
    execution_policy: "scheduled",
    execution_params: open,
  });
  await s.waitState(w.id);
  const patch = (execution_params: unknown) =>
    s.admin(`/admin/workloads/${w.id}`, { method: "PATCH", body: { execution_params } });
  expect((await patch(closed)).status).toBe(200);
  await until(s, "the replica idle outside the window", async () =>
    (await detail(s, w.id)).assignments[0].state === "idle" ? true : undefined,
  );
  const refused = await chat(s, w.slug);
  expect(refused.status).toBe(503);
  expect((await refused.json()).error.message).toContain("no window is open now");
  const job = await (
    await s.data(w.slug, "/jobs", {
      body: { kind: "chat", body: { messages: [{ role: "user", content: "tonight" }] } },
    })
  ).json();
  // Taken by the job runner, it waits for a replica; none starts outside the window.
  expect((await (await s.data(w.slug, `/jobs/${job.job_id}`)).json()).status).not.toBe("completed");
  expect((await detail(s, w.id)).assignments[0].state).toBe("idle");
  expect((await patch(open)).status).toBe(200);
  await until(s, "the job done once the window opened", async () =>
    (await (await s.data(w.slug, `/jobs/${job.job_id}`)).json()).status === "completed" ? true : undefined,
  );
  const bad = await patch({ windows: [{ days: ["mon"], start: "9", end: "17:00" }] });
  expect(bad.status).toBe(400);
  expect((await bad.json()).error.field).toBe("execution_params.windows.0.start");
});

test("kill -9 while scaled to zero restarts into the same state; the next request starts it", async () => {
  const dataDir = tempDir("zero");
  const first = await serve({}, dataDir);
  const w = await first.createWorkload({
    name: "sleepy",
    backend: "vllm",
    model_name: "sleepy",
    config: { command: "vllm serve sleepy" },
    execution_policy: "autoscaling",
    execution_params: { idle_timeout_s: 1, sleep: false },
  });
  expect((await chat(first, w.slug)).status).toBe(200);
  await until(first, "idle", async () =>
    (await detail(first, w.id)).assignments[0].state === "idle" ? true : undefined,
  );
  await first.kill9();
  const second = await serve({}, dataDir);
  const d = await detail(second, w.id);
  expect(d.assignments[0]).toMatchObject({ state: "idle", desired: "idle" });
  expect(second.events((e) => e.event === "start" && (e.argv as string[]).includes("sleepy"))).toHaveLength(0);
  expect((await chat(second, w.slug)).status).toBe(200);
});

test("an automatic replica takes as many requests at once as its runtime batches; a manual concurrency wins", async () => {
  const s = await serve();
  const gguf = writeTinyGguf(`${tempDir("gguf")}/np.gguf`).path;
  const llama = await s.createWorkload({
    name: "np",
    backend: "llamacpp",
    model_name: "np",
    config: { command: `llama-server -m ${gguf} -np 2` },
  });
  const vllm = await s.createWorkload({
    name: "seqs",
    backend: "vllm",
    model_name: "seqs",
    config: { command: "vllm serve seqs --max-num-seqs 8" },
  });
  expect((await s.waitState(llama.id)).assignments[0].concurrency).toBe(2);
  expect((await s.waitState(vllm.id)).assignments[0].concurrency).toBe(8);
  const [worker] = await (await s.admin("/admin/workers")).json();
  const manual = await (
    await s.admin(`/admin/workloads/${vllm.id}/assignments`, { body: { worker_id: worker.id, concurrency: 3 } })
  ).json();
  const d = await until(s, "the manual replica ready", async () => {
    const x = await detail(s, vllm.id);
    return x.assignments.length === 1 && x.assignments[0].id === manual.id && x.assignments[0].state === "ready"
      ? x
      : undefined;
  });
  expect(d.assignments[0]).toMatchObject({ concurrency: 3, concurrency_set: true });
});
