/**
 * The background loops' logic on a fake clock, a SQLite store and fake neighbours (a fleet of one
 * fake replica, a fake webhook receiver): no process, no HTTP server, no real timer in the loops.
 * The job runner claims and finishes a job (and runs one again after its replica was lost), the
 * delivery loop retries on the schedule, the scaler starts a replica for a waiting request and
 * stops it after its idle timeout.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { openStore, type Store } from "../src/db";
import { deliveries, jobs, webhooks } from "../src/db/schema";
import { Dispatcher, type Target } from "../src/dispatch/queue";
import { newId } from "../src/ids";
import { JobRunner } from "../src/jobs/runner";
import { getJob } from "../src/jobs/service";
import { createProject } from "../src/projects/service";
import { Scaler } from "../src/scaling/scaler";
import { Metering } from "../src/usage/meter";
import { DeliveryLoop } from "../src/webhooks/deliver";
import type { PostResult } from "../src/webhooks/post";
import { autoAssign } from "../src/workers/placing";
import { listAssignments, setAssignmentState, upsertLocalWorker } from "../src/workers/service";
import { createWorkload, updateWorkload, type Workload } from "../src/workloads/service";
import type { WorkloadCreate } from "../src/workloads/schema";
import { fakeClock, until } from "./helpers/clock";

let dir: string;
let store: Store;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "inferd-loops-"));
  store = openStore(join(dir, "inferd.db"));
});
afterAll(async () => {
  await store.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A workload of a new project (in `db`, the shared store by default). */
async function workload(name: string, extra: Partial<WorkloadCreate> = {}, db = store.db): Promise<Workload> {
  const p = await createProject(db, { name });
  return createWorkload(db, p, {
    name,
    backend: "vllm",
    model_name: name,
    config: { command: `vllm serve ${name}` },
    ...extra,
  });
}

/** A dispatcher whose queue timers never fire (they stay on a clock of their own nobody moves). */
function dispatcher(onWait: (workloadId: string) => void = () => {}): Dispatcher {
  const still = fakeClock();
  return new Dispatcher({ waitMs: 60_000, maxWaiting: 10 }, undefined, onWait, {
    set: still.setTimeout,
    clear: still.clearTimeout,
  });
}

/** Meters that count nowhere. */
const metering = () =>
  new Metering({
    usage: { record() {}, recordWorkload() {}, recordDaily() {} },
    series: { observe() {} },
    timelines: { finished() {} },
  });

/** The local worker of `db`: a box with `gpus` NVIDIA L4s, free, probed at `t0`, and `sleepRamMib` of sleep RAM when given. */
async function gpuBox(db: Store["db"], t0: number, gpus: number, sleepRamMib?: number): Promise<void> {
  await upsertLocalWorker(
    db,
    {
      hostname: "gpu-box",
      cpu_cores: 8,
      ram_bytes: 64 << 30,
      ram_free_bytes: 32 << 30,
      gpus: Array.from({ length: gpus }, (_, index) => ({
        index,
        uuid: `GPU-${index}`,
        name: "NVIDIA L4",
        vendor: "nvidia" as const,
        memory_total_mib: 23034,
        memory_used_mib: 0,
        utilization_percent: 0,
        temperature_c: null,
      })),
      load_avg: [0, 0, 0],
      probed_at: new Date(t0).toISOString(),
      ...(sleepRamMib !== undefined ? { sleep_ram_mib: sleepRamMib } : {}),
    },
    "test",
  );
}

/** Runs the clock to its next timer and waits until the pass it started has ended (the next timer is set). */
async function step(clock: ReturnType<typeof fakeClock>): Promise<void> {
  const at = clock.next()!;
  clock.advance(at - clock.now());
  await until(() => (clock.next() ?? 0) > at, "the pass to end");
}

describe("the job runner", () => {
  const answer = {
    id: "chatcmpl-1",
    object: "chat.completion",
    choices: [{ index: 0, message: { role: "assistant", content: "hi" }, finish_reason: "stop" }],
    usage: { prompt_tokens: 3, completion_tokens: 1, total_tokens: 4 },
  };

  /** A queued chat job of `w`. */
  async function queueJob(w: Workload, at: number): Promise<string> {
    const id = newId("job");
    const body = Buffer.from(JSON.stringify({ model: w.model_name, messages: [{ role: "user", content: "hello" }] }));
    await store.db.insert(jobs).values({
      id,
      workloadId: w.id,
      kind: "chat",
      body,
      contentType: "application/json",
      status: "queued",
      createdAt: new Date(at).toISOString(),
    });
    return id;
  }

  /** A ready replica of `w` with one slot; `send` answers its requests. */
  function replica(w: Workload, send: Target["send"]): Target {
    return { id: `asg_${w.slug}`, workloadId: w.id, workerId: "wrk_fake", capacity: 1, inFlight: 0, send };
  }

  test("claims a queued job for a ready replica, runs it through the queue and stores its result", async () => {
    const clock = fakeClock(Date.parse("2026-03-02T10:00:00Z"));
    const w = await workload("claims");
    const id = await queueJob(w, clock.now() - 250);
    const sent: string[] = [];
    const fleet = { dispatcher: dispatcher() };
    fleet.dispatcher.upsertTarget(replica(w, async (req) => (sent.push(req.path), Response.json(answer))));
    let finished = 0;
    const runner = new JobRunner(store.db, fleet, metering(), () => finished++, 3, null, undefined, clock);
    await runner.start();
    await until(() => finished === 1, "the job to finish");
    expect(sent).toEqual(["/v1/chat/completions"]);
    const job = await getJob(store.db, w.id, id);
    expect(job).toMatchObject({ status: "completed", runs: 1 });
    expect(JSON.stringify(job)).toContain('"queue_ms":250');
    await runner.stop();
  });

  test("a job whose replica was lost runs again after the back-off, on the clock", async () => {
    const t0 = Date.parse("2026-03-02T11:00:00Z");
    const clock = fakeClock(t0);
    const w = await workload("reruns");
    const id = await queueJob(w, t0);
    const sentAt: number[] = [];
    const fleet = { dispatcher: dispatcher() };
    fleet.dispatcher.upsertTarget(
      replica(w, async () => {
        sentAt.push(clock.now());
        if (sentAt.length === 1) throw new Error("connection refused");
        return Response.json(answer);
      }),
    );
    let finished = 0;
    const runner = new JobRunner(store.db, fleet, metering(), () => finished++, 3, null, undefined, clock);
    await runner.start();
    // The first run fails; its job waits 500 ms (the back-off of a first run) before it is queued again.
    await until(() => clock.next() === t0 + 500, "the back-off");
    clock.advance(499);
    expect(sentAt).toEqual([t0]);
    clock.advance(1);
    await until(() => finished === 1, "the second run to finish");
    expect(sentAt).toEqual([t0, t0 + 500]);
    expect(await getJob(store.db, w.id, id)).toMatchObject({ status: "completed", runs: 2 });
    await runner.stop();
  });
});

describe("the delivery loop", () => {
  test("retries a failing delivery on the schedule, then records it delivered", async () => {
    const t0 = Date.parse("2026-03-02T12:00:00Z");
    const clock = fakeClock(t0);
    const w = await workload("hooks");
    const jobId = newId("job");
    await store.db.insert(jobs).values({
      id: jobId,
      workloadId: w.id,
      kind: "chat",
      body: Buffer.from("{}"),
      contentType: "application/json",
      status: "completed",
      data: '{"status":"ok"}',
      createdAt: new Date(t0).toISOString(),
    });
    const hookId = newId("whk");
    await store.db.insert(webhooks).values({
      id: hookId,
      workloadId: w.id,
      url: "https://hooks.example/in",
      secret: "whsec_test",
      secretPrefix: "whsec_test",
      createdAt: new Date(t0).toISOString(),
    });
    const id = newId("dlv");
    await store.db.insert(deliveries).values({
      id,
      jobId,
      webhookId: hookId,
      event: "job.completed",
      state: "pending",
      nextAttemptAt: t0,
      createdAt: new Date(t0).toISOString(),
    });
    const posts: { at: number; url: string; body: string }[] = [];
    const post = async (url: string, body: string): Promise<PostResult> => {
      posts.push({ at: clock.now(), url, body });
      const ok = posts.length === 3;
      return { ok, status_code: ok ? 200 : 500, body: "", error: null, duration_ms: 1 };
    };
    const loop = new DeliveryLoop(store.db, {
      schedule: () => [200, 1000],
      concurrency: 2,
      policy: { allowPrivate: false, resolve: async () => [] },
      ca: undefined,
      clock,
      post,
    });
    const row = async () => (await store.db.select().from(deliveries).where(eq(deliveries.id, id)))[0];
    loop.start();
    await until(async () => (await row()).attempts === 1, "the first attempt to be recorded");
    expect(posts[0]).toMatchObject({ at: t0, url: "https://hooks.example/in" });
    expect(JSON.parse(posts[0].body)).toMatchObject({ event: "job.completed", job_id: jobId, data: { status: "ok" } });
    expect((await row()).nextAttemptAt).toBe(t0 + 200);
    // Nothing goes out before the retry falls due; it goes out as soon as it has.
    await until(() => clock.next()! <= t0 + 205, "the retry's wake-up");
    clock.advance(clock.next()! - clock.now() - 1);
    expect(posts.length).toBe(1);
    await step(clock);
    await until(async () => (await row()).attempts === 2, "the second attempt to be recorded");
    const second = posts[1].at;
    expect(second - t0).toBeGreaterThanOrEqual(200);
    expect(second - t0).toBeLessThanOrEqual(205);
    expect((await row()).nextAttemptAt).toBe(second + 1000);
    while (posts.length < 3 && clock.now() < t0 + 5000) await step(clock);
    expect(posts[2].at - second).toBeGreaterThanOrEqual(1000);
    expect(posts[2].at - second).toBeLessThanOrEqual(1005);
    await until(async () => (await row()).state === "delivered", "the delivery to be recorded");
    expect(await row()).toMatchObject({ attempts: 3, lastStatusCode: 200, nextAttemptAt: null });
    await loop.stop();
    expect(clock.pending()).toBe(0);
  });
});

describe("the scaler", () => {
  test("starts a replica for a waiting request at once, puts it to sleep after the idle timeout, wakes it for the next; stops it with sleep off", async () => {
    const t0 = Date.parse("2026-03-02T13:00:00Z");
    const clock = fakeClock(t0);
    // A store of its own: the other tests' workloads would be placed on its one GPU too.
    const own = openStore(join(dir, "scaler.db"));
    const db = own.db;
    // Room for the weights of one vLLM replica asleep (the host counts its GPU share: 0.9 × 23034 MiB).
    await gpuBox(db, t0, 1, 30_000);
    const w = await workload(
      "ondemand",
      { execution_policy: "autoscaling", execution_params: { min_replicas: 0, max_replicas: 1, idle_timeout_s: 2 } },
      db,
    );
    await autoAssign(db);
    const desired = async () => (await listAssignments(db, w.id)).map((a) => a.desired);
    expect(await desired()).toEqual(["idle"]);
    let reconciles = 0;
    const fleet = {
      dispatcher: dispatcher((id) => scaler.wake(id)),
      exclusively: <T>(place: () => Promise<T>) => place(),
      reconcile: async () => void reconciles++,
    };
    const scaler: Scaler = new Scaler(db, fleet, clock);
    scaler.start();
    await until(() => clock.pending() === 1, "the first look to end");
    expect(scaler.view(w)).toMatchObject({ desired: 0, running: 0 });

    // A request waits: the replica starts at once, not at the next tick.
    const leave = new AbortController();
    const waiting = fleet.dispatcher.acquire(w.id, leave.signal).catch(() => undefined);
    await until(async () => (await desired())[0] === "run", "the replica to start");
    expect(clock.now()).toBe(t0);
    await until(() => scaler.view(w).last_decision !== null, "the look to end");
    expect(scaler.view(w).last_decision?.action).toContain("started replica");
    expect(scaler.view(w).last_decision?.reason).toContain("cold start");
    expect(reconciles).toBeGreaterThan(0);

    // The request leaves; the replica stops once the workload has been idle for 2 s.
    leave.abort();
    await waiting;
    await step(clock);
    expect(clock.now()).toBe(t0 + 1000);
    expect(await desired()).toEqual(["run"]);
    await step(clock);
    expect(clock.now()).toBe(t0 + 2000);
    // vLLM can sleep: the replica is put to sleep at level 1 (its process kept), not stopped.
    expect(await desired()).toEqual(["sleep"]);
    expect(scaler.view(w)).toMatchObject({ desired: 0, last_decision: { action: "put 1 replica to sleep" } });
    expect((await listAssignments(db, w.id))[0].reason).toContain("asleep (level 1");

    // The next request wakes it (the agent says `sleeping` once it slept).
    const [a] = await listAssignments(db, w.id);
    await setAssignmentState(db, a.id, "sleeping");
    const again = new AbortController();
    const second = fleet.dispatcher.acquire(w.id, again.signal).catch(() => undefined);
    await until(async () => (await desired())[0] === "run", "the replica to wake");
    await until(() => scaler.view(w).last_decision?.action.startsWith("waking") === true, "the wake decided");
    again.abort();
    await second;

    // With sleep off it stops at the idle timeout, as before.
    await updateWorkload(db, w, {
      execution_params: { min_replicas: 0, max_replicas: 1, idle_timeout_s: 2, sleep: false },
    });
    await setAssignmentState(db, a.id, "ready");
    await step(clock);
    await step(clock);
    await step(clock);
    expect(await desired()).toEqual(["idle"]);
    expect(scaler.view(w).last_decision?.action).toBe("stopped 1 replica");
    await scaler.stop();
    expect(clock.pending()).toBe(0);
    await own.close();
  });
  test("warm_with: a request for one model starts the related one too; it idles once neither is used", async () => {
    const t0 = Date.parse("2026-03-02T15:00:00Z");
    const clock = fakeClock(t0);
    const own = openStore(join(dir, "preload.db"));
    const db = own.db;
    await gpuBox(db, t0, 2);
    const p = await createProject(db, { name: "team" });
    const make = (name: string, params: Record<string, unknown>) =>
      createWorkload(db, p, {
        name,
        backend: "vllm",
        model_name: name,
        config: { command: `vllm serve ${name}` },
        execution_policy: "autoscaling",
        execution_params: { min_replicas: 0, max_replicas: 1, idle_timeout_s: 3, sleep: false, ...params },
      });
    const chat = await make("chat", {});
    const draft = await make("draft", { warm_with: ["chat"] });
    const lone = await make("lone", {});
    await autoAssign(db);
    const desired = async (w: Workload) => (await listAssignments(db, w.id)).map((a) => a.desired);
    const fleet = {
      dispatcher: dispatcher((id) => scaler.wake(id)),
      exclusively: <T>(place: () => Promise<T>) => place(),
      reconcile: async () => {},
    };
    const scaler: Scaler = new Scaler(db, fleet, clock);
    scaler.start();
    await until(() => clock.pending() === 1, "the first look to end");
    // Nothing was used yet: nothing preloads (a workload's creation is not a use).
    expect([await desired(chat), await desired(draft), await desired(lone)]).toEqual([["idle"], ["idle"], ["idle"]]);

    // A request for chat waits: chat starts, and draft with it (before any request of its own); lone does not.
    const leave = new AbortController();
    const waiting = fleet.dispatcher.acquire(chat.id, leave.signal).catch(() => undefined);
    await until(async () => (await desired(draft))[0] === "run", "draft to be preloaded");
    expect(clock.now()).toBe(t0);
    expect(await desired(chat)).toEqual(["run"]);
    expect(await desired(lone)).toEqual(["idle"]);
    expect(scaler.view(draft).reason).toBe("preloading: chat is in use (warm_with)");

    // Chat's use ends; both idle out 3 s later (draft's timer counts from chat's use).
    leave.abort();
    await waiting;
    await step(clock);
    await step(clock);
    expect(await desired(draft)).toEqual(["run"]);
    await step(clock);
    expect(clock.now()).toBe(t0 + 3000);
    expect(await desired(chat)).toEqual(["idle"]);
    expect(await desired(draft)).toEqual(["idle"]);
    await scaler.stop();
    await own.close();
  });
});
