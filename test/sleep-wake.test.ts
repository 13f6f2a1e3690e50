/**
 * Many models, few GPUs, no cold starts (issue 38), end to end: a real `inferd serve` with its local
 * agent, the fake nvidia-smi reporting one 24 GB L4 and what the fake vLLM holds on it (90 % while it
 * runs, as vLLM does; nothing asleep), the fake vLLM sleeping and waking with vLLM's own endpoints and
 * costs (a cold start of seconds, a wake of a fraction of one), and a host RAM budget for sleeping
 * replicas that both the host (`INFERD_SLEEP_RAM_MIB`) and the fakes (`FAKE_HOST_RAM_FILE`) keep.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { writeFileSync } from "node:fs";
import { cleanup, tempDir, waitFor } from "./helpers/proc";
import { startServing, type Serving, type WorkloadDetail } from "./helpers/serving";

type Replica = WorkloadDetail["assignments"][number] & { desired: string };
/** Room for one vLLM replica's weights asleep (the host takes its GPU share, 21600 MiB, when the model is unknown). */
const SLEEP_RAM_MIB = 30_000;
let s: Serving;

beforeAll(async () => {
  const ram = join(tempDir("host-ram"), "ram.json");
  writeFileSync(ram, JSON.stringify({ free_mib: SLEEP_RAM_MIB }));
  s = await startServing({
    FAKE_GPUS: "1x NVIDIA L4:24000",
    FAKE_GPU_USAGE_DIR: tempDir("usage"),
    FAKE_LOAD_MS: "2500",
    FAKE_WAKE_MS: "150",
    FAKE_WAKE_L2_MS: "900",
    FAKE_WEIGHTS_MIB: "21600",
    FAKE_HOST_RAM_FILE: ram,
    INFERD_SLEEP_RAM_MIB: String(SLEEP_RAM_MIB),
  });
}, 120_000);

afterAll(async () => {
  await s?.stop();
  await cleanup();
});

const replicas = async (id: string) => (await s.workload(id)).assignments as Replica[];
const until = <T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000) =>
  waitFor(check, { what, timeoutMs, detail: () => s.output() });
const onDemand = (name: string, idle = 600) =>
  s.createWorkload({
    name,
    backend: "vllm",
    model_name: name,
    config: { command: `vllm serve ${name}` },
    execution_policy: "autoscaling",
    execution_params: { min_replicas: 0, max_replicas: 1, idle_timeout_s: idle },
  });
const chat = (slug: string, id: string) =>
  s.data(slug, "/v1/chat/completions", {
    body: { messages: [{ role: "user", content: "hi" }], max_tokens: 4 },
    headers: { "x-request-id": id },
  });
/** The pids of the fake vLLM processes started for `model` so far. */
const pids = (model: string) =>
  s.events((e) => e.event === "start" && (e.argv as string[]).includes(model)).map((e) => e.pid as number);
/** A replica's state once it is `state` (with its wish). */
const reaches = (id: string, state: string, desired?: string) =>
  until(`a replica of ${id} ${state}${desired ? ` (${desired})` : ""}`, async () => {
    const [a] = await replicas(id);
    return a && a.state === state && (!desired || a.desired === desired) ? a : undefined;
  });

describe("an idle replica sleeps and wakes instead of stopping and starting", () => {
  test("idle past its timeout it sleeps (level 1, its process kept); a request wakes it and is answered", async () => {
    const w = await onDemand("napper", 1);
    expect((await chat(w.slug, "nap-1")).status).toBe(200);
    const started = pids("napper");
    expect(started.length).toBe(1);
    const asleep = await reaches(w.id, "sleeping", "sleep");
    expect(asleep.reason).toContain("asleep (level 1");
    // vLLM was launched able to sleep, and told to (its own endpoint, level 1).
    const argv = s.events((e) => e.event === "start" && e.pid === started[0])[0].argv as string[];
    expect(argv).toContain("--enable-sleep-mode");
    await until("the fake's sleep", async () =>
      s.events((e) => e.event === "sleep" && e.pid === started[0]).length ? true : undefined,
    );
    const answer = await chat(w.slug, "nap-2");
    expect(answer.status).toBe(200);
    // The same process answered: woken, not started again.
    expect(pids("napper")).toEqual(started);
    expect((await replicas(w.id))[0].state).toBe("ready");
    // The request's timeline shows its wait as a wake.
    let spans: { name: string }[] = [];
    await until("the woken request's record", async () => {
      const r = await s.admin(`/admin/projects/${s.project}/requests?q=nap-2`);
      const row = ((await r.json()) as { requests: { id: string }[] }).requests[0];
      if (!row) return undefined;
      spans = ((await (await s.admin(`/admin/requests/${row.id}`)).json()) as { spans: { name: string }[] }).spans;
      return true;
    });
    expect(spans.map((x) => x.name)).toContain("wake");
    const metrics = await (await s.admin("/metrics")).text();
    expect(metrics).toMatch(/inferd_switch_seconds_count\{workload="[^"]+\/napper",kind="wake"\} 1/);
    expect(metrics).toMatch(
      /inferd_replica_state\{workload="[^"]+\/napper",replica="asg_[^"]+",state="ready",desired="run"\} 1/,
    );
    // Deleted, its runtime stops and gives its host memory back (the next tests start with all of it).
    expect((await s.admin(`/admin/workloads/${w.id}`, { method: "DELETE" })).status).toBeLessThan(300);
    await until("the runtime gone", async () =>
      s.events((e) => e.event === "exit" && e.pid === started[0]).length ? true : undefined,
    );
  }, 90_000);
});

describe("models take turns on one GPU by sleeping", () => {
  test("a second model puts the first to sleep; a third puts the second in deep sleep (RAM is short); the first wakes", async () => {
    const [a, b, c] = [await onDemand("alpha"), await onDemand("beta"), await onDemand("gamma")];
    expect((await chat(a.slug, "turn-a1")).status).toBe(200);
    // beta needs the GPU: alpha is swapped out asleep at level 1 (its 21600 MiB fit the 30000 of sleep RAM).
    expect((await chat(b.slug, "turn-b1")).status).toBe(200);
    const alphaAsleep = (await replicas(a.id))[0];
    expect(alphaAsleep).toMatchObject({ state: "sleeping", desired: "sleep" });
    expect(alphaAsleep.reason).toContain("swapped out for");
    // gamma: beta must rest too, but sleep RAM holds alpha's weights: beta drops its weights (level 2).
    expect((await chat(c.slug, "turn-c1")).status).toBe(200);
    const betaAsleep = (await replicas(b.id))[0];
    expect(betaAsleep).toMatchObject({ state: "sleeping", desired: "deep_sleep" });
    expect(betaAsleep.reason).toContain("level 2");
    // alpha again: gamma sleeps, alpha wakes in its own process.
    const before = pids("alpha");
    expect((await chat(a.slug, "turn-a2")).status).toBe(200);
    expect(pids("alpha")).toEqual(before);
    expect((await replicas(a.id))[0].state).toBe("ready");
    // One process per model all along: every switch was a sleep or a wake.
    for (const m of ["alpha", "beta", "gamma"]) expect(pids(m).length).toBe(1);
    // The worker's page shows what the sleeping replicas hold.
    const workers = (await (await s.admin("/admin/workers")).json()) as {
      replicas: { workload: string; state: string; sleep_level: number | null; host_ram_mib: number | null }[];
    }[];
    const asleep = workers[0].replicas.filter((r) => r.state === "sleeping");
    // gamma went to sleep while alpha's weights still held the sleep RAM (alpha wakes only once gamma's
    // GPU memory is free): level 2 too, never more RAM promised than there is.
    expect(asleep.map((r) => [r.workload.split("/")[1], r.sleep_level, r.host_ram_mib])).toEqual([
      ["beta", 2, 0],
      ["gamma", 2, 0],
    ]);
  }, 120_000);

  test("with sleep off (execution_params.sleep: false) an idled replica stops as before", async () => {
    const w = await s.createWorkload({
      name: "insomniac",
      backend: "vllm",
      model_name: "insomniac",
      config: { command: "vllm serve insomniac" },
      execution_policy: "autoscaling",
      execution_params: { min_replicas: 0, max_replicas: 1, idle_timeout_s: 1, sleep: false },
    });
    expect((await chat(w.slug, "insomniac-1")).status).toBe(200);
    await reaches(w.id, "idle", "idle");
    const argv = s.events((e) => e.event === "start" && (e.argv as string[]).includes("insomniac"))[0].argv as string[];
    expect(argv).not.toContain("--enable-sleep-mode");
  }, 90_000);
});
