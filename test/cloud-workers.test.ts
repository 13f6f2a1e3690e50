/**
 * Cloud GPU workers (issue 35): a pod made through RunPod's REST API or a Kubernetes API server
 * (loopback HTTPS fakes that follow their references, test/fixtures/cloud.ts) boots a real inferd
 * agent that joins with the worker's one-time token; deleting the worker ends the pod and removes
 * the worker once the provider confirms, closing its billing. A provider that does not confirm, or
 * fails, leaves the worker "termination pending (pod …)", tried again automatically.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { makeTestPki } from "./fixtures/tls";
import { billedDays } from "../src/cloud/service";
import { startFakeKubernetes, startFakeRunpod, type Boot, type FakeCloud } from "./fixtures/cloud";
import { spawnAgent, startHost, type Host } from "./helpers/agents";
import { cleanup, tempDir, waitFor } from "./helpers/proc";

const RUNPOD_KEY = "rpa_test_key";
const KUBE_TOKEN = "kube-sa-token";
let pki: ReturnType<typeof makeTestPki>;
let runpod: FakeCloud;
let kube: FakeCloud;
let host: Host;

/** A pod's start command run as a real agent (`inferd agent join <url> --token <t>`) with the fake GPUs. */
const boot: Boot = (args) => {
  const { proc } = spawnAgent(args.slice(2), tempDir("pod"));
  return { kill: () => proc.kill("SIGKILL") };
};

beforeAll(async () => {
  pki = makeTestPki(tempDir("pki"), ["localhost"]);
  runpod = await startFakeRunpod({ pki, apiKey: RUNPOD_KEY, boot });
  kube = await startFakeKubernetes({ pki, token: KUBE_TOKEN, namespace: "gpu", boot });
  host = await startHost({
    NODE_EXTRA_CA_CERTS: pki.caFile,
    INFERD_RUNPOD_API_KEY: RUNPOD_KEY,
    INFERD_RUNPOD_API_URL: runpod.url,
    INFERD_KUBE_API_URL: kube.url,
    INFERD_KUBE_TOKEN: KUBE_TOKEN,
    INFERD_KUBE_NAMESPACE: "gpu",
    INFERD_KUBE_GPU_HOURLY_COST: "2.5",
    INFERD_CLOUD_CONFIRM_MS: "1500",
    INFERD_CLOUD_RETRY_MS: "300",
  });
});
afterAll(async () => {
  await host?.stop();
  await runpod?.stop();
  await kube?.stop();
  await cleanup();
});

const workers = async () => (await (await host.admin("/admin/workers")).json()) as Record<string, any>[];
const online = (name: string) =>
  waitFor(async () => (await workers()).find((w) => w.name === name && w.state === "online"), {
    what: `cloud worker ${name} online`,
    timeoutMs: 30_000,
    detail: () => host.output(),
  });
const pods = async () => (await (await host.admin("/admin/cloud/pods")).json()) as Record<string, any>[];
/** A one-GPU RunPod worker, made. */
const rtx = async (name: string) =>
  (await (
    await host.admin("/admin/cloud/workers", { name, provider: "runpod", gpu_type: "NVIDIA GeForce RTX 4090", gpus: 1 })
  ).json()) as { worker: { id: string }; pod: { pod_id: string } };
/** Waits until the worker is removed (its pod confirmed gone). */
const removed = (id: string, what = "the worker removed on a later try") =>
  waitFor(async () => ((await workers()).some((w) => w.id === id) ? undefined : true), { what, timeoutMs: 30_000 });

describe("RunPod", () => {
  test("a pod of 2 GPUs boots an agent that joins; deleting the worker ends the pod and closes its billing", async () => {
    const r = await host.admin("/admin/cloud/workers", {
      name: "rp-h100",
      provider: "runpod",
      gpu_type: "NVIDIA H100 80GB HBM3",
      gpus: 2,
    });
    expect(r.status).toBe(201);
    const { worker, pod } = await r.json();
    expect(pod).toMatchObject({ provider: "runpod", gpus: 2, cost_per_hour: 5.38, state: "running", label: null });
    const asked = runpod.pods.get(pod.pod_id)!;
    expect(asked.body).toMatchObject({
      gpuTypeIds: ["NVIDIA H100 80GB HBM3"],
      gpuCount: 2,
      imageName: "ghcr.io/inferd/inferd:latest",
    });
    expect(asked.args.slice(0, 3)).toEqual(["inferd", "agent", "join"]);
    const joined = await online("rp-h100");
    expect(joined.cloud).toMatchObject({ pod_id: pod.pod_id, gpus: 2 });
    const del = await host.admin(`/admin/workers/${worker.id}`, undefined, "DELETE");
    expect(del.status).toBe(200);
    expect((await workers()).some((w) => w.id === worker.id)).toBe(false);
    expect(runpod.calls).toContain(`DELETE /v1/pods/${pod.pod_id}`);
    const ended = (await pods()).find((p) => p.pod_id === pod.pod_id)!;
    expect(ended.state).toBe("terminated");
    expect(ended.ended_at).not.toBeNull();
    expect(ended.billed_seconds).toBeGreaterThanOrEqual(0);
    expect(ended.billed_cost).toBe(Math.round((ended.billed_seconds / 3600) * 5.38 * 1e4) / 1e4);
    // Billing is closed: the billed time is creation to confirmed end, no longer now.
    expect(ended.billed_seconds).toBe(Math.round((Date.parse(ended.ended_at) - Date.parse(ended.created_at)) / 1000));
  });

  test("a provider that does not confirm: termination pending (pod …), the worker kept, retried until confirmed", async () => {
    const { worker, pod } = await rtx("rp-stuck");
    await online("rp-stuck");
    runpod.neverConfirm(true);
    const del = await host.admin(`/admin/workers/${worker.id}`, undefined, "DELETE");
    expect(del.status).toBe(502);
    const { error } = await del.json();
    expect(error.code).toBe("termination_pending");
    expect(error.message).toContain(`termination pending (pod ${pod.pod_id})`);
    expect(error.message).toContain("may still be billed");
    const kept = (await workers()).find((w) => w.id === worker.id)!;
    expect(kept.cloud).toMatchObject({
      state: "termination_pending",
      label: `termination pending (pod ${pod.pod_id})`,
      attempts: 1,
    });
    expect(kept.cloud.reason).toContain("still reports the pod");
    // Tried again on its own; once the provider confirms, the worker is gone.
    await waitFor(async () => ((await pods()).find((p) => p.pod_id === pod.pod_id)!.attempts >= 2 ? true : undefined), {
      what: "a second try",
      timeoutMs: 20_000,
    });
    runpod.neverConfirm(false);
    await removed(worker.id, "the worker removed once confirmed");
    expect((await pods()).find((p) => p.pod_id === pod.pod_id)!.state).toBe("terminated");
  });

  test("a provider failing (5xx) on delete: termination pending with its words, then retried", async () => {
    const { worker, pod } = await rtx("rp-5xx");
    runpod.failNext(503);
    const del = await host.admin(`/admin/workers/${worker.id}`, undefined, "DELETE");
    expect(del.status).toBe(502);
    expect((await del.json()).error.message).toContain("RunPod answered 503");
    await removed(worker.id, "the worker removed on a later try");
    expect((await pods()).find((p) => p.pod_id === pod.pod_id)!.attempts).toBeGreaterThanOrEqual(1);
  });

  test("a provider that does not answer: the delete gives up after the wait, termination pending, then retried", async () => {
    const { worker } = await rtx("rp-mute");
    runpod.hangNext(1);
    const del = await host.admin(`/admin/workers/${worker.id}`, undefined, "DELETE");
    expect(del.status).toBe(502);
    expect((await del.json()).error.message).toContain("RunPod did not answer");
    await removed(worker.id, "the worker removed on a later try");
  });

  test("bad asks: GPUs other than 1, 2, 4, 8; a GPU type the provider refuses leaves no worker", async () => {
    const three = await host.admin("/admin/cloud/workers", {
      name: "x",
      provider: "runpod",
      gpu_type: "NVIDIA GeForce RTX 4090",
      gpus: 3,
    });
    expect(three.status).toBe(400);
    expect((await three.json()).error.field).toBe("gpus");
    const refused = await host.admin("/admin/cloud/workers", {
      name: "nope",
      provider: "runpod",
      gpu_type: "Potato 9000",
      gpus: 1,
    });
    expect(refused.status).toBe(502);
    expect((await refused.json()).error).toMatchObject({
      code: "cloud_provider_failed",
      message: expect.stringContaining("Potato 9000"),
    });
    expect((await workers()).some((w) => w.name === "nope")).toBe(false);
  });
});

describe("Kubernetes", () => {
  test("an agent Pod asking nvidia.com/gpu: 4 on the GPU model's nodes joins; deleted, it is gone after its grace period", async () => {
    const r = await host.admin("/admin/cloud/workers", {
      name: "k8s-a100",
      provider: "kubernetes",
      gpu_type: "NVIDIA-A100-SXM4-80GB",
      gpus: 4,
    });
    expect(r.status).toBe(201);
    const { worker, pod } = await r.json();
    expect(pod).toMatchObject({ provider: "kubernetes", pod_id: "inferd-k8s-a100", cost_per_hour: 10 });
    const manifest = kube.pods.get("inferd-k8s-a100")!.body as any;
    expect(manifest.spec.containers[0].resources.limits).toEqual({ "nvidia.com/gpu": "4" });
    expect(manifest.spec.nodeSelector).toEqual({ "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB" });
    await online("k8s-a100");
    const del = await host.admin(`/admin/workers/${worker.id}`, undefined, "DELETE");
    expect(del.status).toBe(200);
    expect(kube.calls).toContain("DELETE /api/v1/namespaces/gpu/pods/inferd-k8s-a100");
    expect((await pods()).find((p) => p.pod_id === "inferd-k8s-a100")!.state).toBe("terminated");
  });

  test("a provider that is not set up is a 409 naming the setting", async () => {
    const bare = await startHost();
    try {
      const r = await bare.admin("/admin/cloud/workers", { name: "x", provider: "runpod", gpu_type: "g", gpus: 1 });
      expect(r.status).toBe(409);
      expect((await r.json()).error).toMatchObject({
        code: "cloud_provider_not_configured",
        message: expect.stringContaining("--runpod-api-key"),
      });
    } finally {
      await bare.stop();
    }
  });
});

describe("billed time in the usage", () => {
  test("a pod's time is split by UTC day, priced at its hourly cost, up to its confirmed end", () => {
    const row = {
      workerId: "wk_1",
      workerName: "rp",
      provider: "runpod" as const,
      podId: "p1",
      gpuType: "g",
      gpus: 2,
      costMicrosPerHour: 4_000_000,
      state: "terminated" as const,
      reason: null,
      attempts: 0,
      nextAttemptAt: null,
      createdAt: "2026-11-01T22:00:00.000Z",
      endedAt: "2026-11-02T01:30:00.000Z",
    };
    expect(billedDays([row], "2026-11-01", "2026-11-30", Date.now())).toMatchObject([
      { day: "2026-11-01", billed_seconds: 7200, billed_cost: 8 },
      { day: "2026-11-02", billed_seconds: 5400, billed_cost: 6 },
    ]);
    // A range that starts on the second day counts that day only; a pod still running counts up to now.
    expect(billedDays([row], "2026-11-02", "2026-11-02", Date.now()).map((d) => d.billed_seconds)).toEqual([5400]);
    // A pod ended within a second still shows on its day (its row says 0 s).
    const brief = { ...row, createdAt: "2026-11-03T10:00:00.000Z", endedAt: "2026-11-03T10:00:00.300Z" };
    expect(billedDays([brief], "2026-11-03", "2026-11-03", Date.now())).toMatchObject([{ billed_seconds: 0 }]);
    const open = { ...row, endedAt: null };
    expect(billedDays([open], "2026-11-01", "2026-11-01", Date.parse("2026-11-01T23:00:00Z"))[0].billed_seconds).toBe(
      3600,
    );
  });

  test("GET /admin/usage carries the pods' billed time per day for the admin", async () => {
    const usage = await (await host.admin("/admin/usage?group_by=workload")).json();
    const names = new Set((usage.cloud as { worker_name: string }[]).map((d) => d.worker_name));
    expect(names.has("rp-h100")).toBe(true);
    expect(names.has("k8s-a100")).toBe(true);
  });
});
