import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cleanup, waitFor } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";

/**
 * The local agent on a machine with two (fake) RTX 4090s: GPU probe, placement, launch flags,
 * version installs, readiness, crash restarts, logs and a clean shutdown, through real processes.
 */
let s: Serving;
beforeAll(async () => {
  s = await startServing({ FAKE_UNKNOWN_VERSIONS: "0.0.1" });
});
afterAll(async () => {
  await s.stop();
  await cleanup();
});

const starts = () => s.events((e) => e.event === "start");
const argvOf = (e: { [k: string]: unknown }) => (e.argv as string[]).join(" ");

describe("the local worker", () => {
  test("is registered with the GPUs nvidia-smi reports, CPU and RAM, and its telemetry refreshes", async () => {
    const [w] = await (await s.admin("/admin/workers")).json();
    expect(w).toMatchObject({ kind: "local", state: "online" });
    expect(w.cpu_cores).toBeGreaterThan(0);
    expect(w.ram_bytes).toBeGreaterThan(0);
    expect(w.gpus).toHaveLength(2);
    expect(w.gpus[0]).toMatchObject({
      index: 0,
      name: "NVIDIA GeForce RTX 4090",
      memory_total_mib: 24564,
      vendor: "nvidia",
    });
    expect(w.gpus[0].uuid).toMatch(/^GPU-/);
    const seen = w.last_seen_at;
    const later = await waitFor(
      async () => {
        const [x] = await (await s.admin("/admin/workers")).json();
        return x.last_seen_at !== seen ? x : undefined;
      },
      { what: "a newer heartbeat" },
    );
    expect(later.gpus).toHaveLength(2);
    const detail = await (await s.admin(`/admin/workers/${w.id}`)).json();
    expect(detail.history.length).toBeGreaterThan(0);
    expect(detail.history[0].gpus[0]).toHaveProperty("utilization_percent");
  });
});

describe("vLLM workloads", () => {
  test("are placed automatically, launched with TP and port flags, on their GPUs, and become ready", async () => {
    const w = await s.createWorkload({
      name: "auto",
      backend: "vllm",
      model_name: "meta/llama-3",
      config: { command: "vllm serve meta/llama-3 --max-model-len 4096" },
    });
    const ready = await s.waitState(w.id);
    const a = ready.assignments[0];
    // An automatic replica takes as many requests at once as the runtime batches (vLLM's --max-num-seqs, 256 by default).
    // One GPU: the one with the most free memory when it was placed (the fake readings move, so either).
    expect(a).toMatchObject({ concurrency: 256, concurrency_set: false, served_model: "meta/llama-3" });
    expect(a.gpu_indices).toHaveLength(1);
    const start = starts().find((e) => argvOf(e).includes("meta/llama-3 "))!;
    expect(argvOf(start)).toContain("--tensor-parallel-size 1");
    expect(argvOf(start)).toMatch(/--host 127\.0\.0\.1 --port \d+/);
    expect(a.base_url).toBe(`http://127.0.0.1:${start.port}`);
    expect((start.env as Record<string, string>).CUDA_VISIBLE_DEVICES).toBe(String(a.gpu_indices[0]));
    const r = await s.data(w.slug, "/v1/chat/completions", {
      body: { model: w.slug, messages: [{ role: "user", content: "ping" }] },
    });
    expect(r.status).toBe(200);
    expect((await r.json()).model).toBe("meta/llama-3");
  });

  test("keep an explicit port and tensor-parallel size; a 2-GPU assignment sees both GPUs", async () => {
    const port = 20000 + Math.floor(Math.random() * 20000);
    const w = await s.createWorkload({
      name: "explicit",
      backend: "vllm",
      model_name: "big",
      config: { command: `vllm serve big --port ${port} -tp 2` },
    });
    await s.waitState(w.id);
    const [worker] = await (await s.admin("/admin/workers")).json();
    const created = await s.admin(`/admin/workloads/${w.id}/assignments`, {
      body: { worker_id: worker.id, gpus: 2, concurrency: 4 },
    });
    expect(created.status).toBe(201);
    // A manual placement replaces the automatic one.
    const ready = await waitFor(
      async () => {
        const d = await s.workload(w.id);
        return d.assignments.length === 1 &&
          d.assignments[0].state === "ready" &&
          d.assignments[0].gpu_indices.length === 2
          ? d
          : undefined;
      },
      { what: "2-GPU replica ready", timeoutMs: 30_000 },
    );
    expect(ready.assignments[0].base_url).toBe(`http://127.0.0.1:${port}`);
    const start = starts()
      .filter((e) => argvOf(e).includes("serve big"))
      .at(-1)!;
    expect(argvOf(start)).toBe(`vllm serve big --port ${port} -tp 2 --host 127.0.0.1`);
    expect((start.env as Record<string, string>).CUDA_VISIBLE_DEVICES).toBe("0,1");
    const bad = await s.admin(`/admin/workloads/${w.id}/assignments`, { body: { worker_id: worker.id, gpus: 8 } });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error.field).toBe("gpus");
    const badGpus = await s.admin(`/admin/workloads/${w.id}/assignments`, { body: { worker_id: worker.id, gpus: 3 } });
    expect(badGpus.status).toBe(400);
  });

  test("with vllm_version install that version once into the data dir and run it from there", async () => {
    const w = await s.createWorkload({
      name: "pinned",
      backend: "vllm",
      model_name: "pinned-model",
      config: { command: "vllm serve pinned-model", vllm_version: "0.9.2" },
    });
    const states = new Set<string>();
    await waitFor(
      async () => {
        const d = await s.workload(w.id);
        d.assignments.forEach((a) => states.add(a.state));
        return d.assignments[0]?.state === "ready" ? d : undefined;
      },
      { what: "pinned ready", intervalMs: 20 },
    );
    expect(states.has("installing") || s.events((e) => e.event === "install").length > 0).toBe(true);
    const start = starts().find((e) => argvOf(e).includes("pinned-model"))!;
    expect(start.version).toBe("0.9.2");
    expect((start.env as Record<string, string>).PATH.split(":")[0]).toBe(`${s.dataDir}/runtimes/vllm/0.9.2/bin`);
    // Editing the command restarts the runtime, without installing again.
    await s.admin(`/admin/workloads/${w.id}`, {
      method: "PATCH",
      body: { config: { command: "vllm serve pinned-model --max-num-seqs 8", vllm_version: "0.9.2" } },
    });
    await waitFor(() => starts().some((e) => argvOf(e).includes("pinned-model --max-num-seqs 8")) || undefined, {
      what: "restart with the edited command",
    });
    await s.waitState(w.id);
    expect(s.events((e) => e.event === "install" && e.version === "0.9.2")).toHaveLength(1);
  });

  test("a version that cannot be installed ends failed with the installer's message", async () => {
    const w = await s.createWorkload({
      name: "bad-version",
      backend: "vllm",
      model_name: "m",
      config: { command: "vllm serve m", vllm_version: "0.0.1" },
    });
    const failed = await s.waitState(w.id, "failed");
    expect(failed.assignments[0].reason).toContain("vllm==0.0.1");
    const r = await s.data(w.slug, "/v1/chat/completions", { body: { messages: [{ role: "user", content: "x" }] } });
    expect(r.status).toBe(503);
    expect((await r.json()).error.message).toContain("failed");
  });

  test("requests sent while the runtime starts wait in the queue and are served once it is ready", async () => {
    const w = await s.createWorkload({
      name: "early",
      backend: "vllm",
      model_name: "early-model",
      config: { command: "vllm serve early-model" },
    });
    const r = await s.data(w.slug, "/v1/chat/completions", {
      body: { model: "early-model", messages: [{ role: "user", content: "are you up" }] },
    });
    expect(r.status).toBe(200);
    expect((await r.json()).choices[0].message.content).toBe("You said: are you up");
  });

  test("a runtime that crashes is restarted and serves again; its output is in the logs", async () => {
    const w = await s.createWorkload({
      name: "crashy",
      backend: "vllm",
      model_name: "crashy",
      config: { command: "vllm serve crashy" },
    });
    const before = await s.waitState(w.id);
    const pidsBefore = starts().filter((e) => argvOf(e).includes("serve crashy")).length;
    await fetch(`${before.assignments[0].base_url}/fake/crash`, { method: "POST" });
    await waitFor(() => starts().filter((e) => argvOf(e).includes("serve crashy")).length > pidsBefore || undefined, {
      what: "a restart",
    });
    await s.waitState(w.id);
    const r = await s.data(w.slug, "/v1/chat/completions", {
      body: { messages: [{ role: "user", content: "again" }] },
    });
    expect(r.status).toBe(200);
    const logs = await (await s.admin(`/admin/workloads/${w.id}/logs`)).json();
    expect(logs.replicas[0].text).toContain("\x1b[");
    expect(logs.replicas[0].text).toMatch(/crash|died|Engine/i);
  });

  test("logs follow live over SSE", async () => {
    const w = await s.createWorkload({
      name: "loud",
      backend: "vllm",
      model_name: "loud",
      config: { command: "vllm serve loud" },
    });
    await s.waitState(w.id);
    const ctrl = new AbortController();
    const r = await fetch(`${s.url}/admin/workloads/${w.id}/logs?follow=1&bytes=0`, {
      headers: { authorization: `Bearer ${s.adminToken}` },
      signal: ctrl.signal,
    });
    expect(r.headers.get("content-type")).toContain("text/event-stream");
    const reader = r.body!.getReader();
    await s.data(w.slug, "/v1/chat/completions", { body: { messages: [{ role: "user", content: "log me" }] } });
    let seen = "";
    await waitFor(
      async () => {
        const { value } = await reader.read();
        seen += new TextDecoder().decode(value);
        return seen.includes("POST /v1/chat/completions") || undefined;
      },
      { what: "the request's log line in the live stream" },
    );
    ctrl.abort();
  });
});
