import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cleanup, waitFor } from "./helpers/proc";
import { servingPool, type Serving } from "./helpers/serving";

/**
 * Priorities and fair share through a real server and a slow fake vLLM with one slot: key limits
 * `priority` and `weight` set, refused at their field, shown and audited; a trickle key served
 * beside a flooding key's queue, a `priority: "batch"` key behind interactive requests, and jobs
 * completing beside a synchronous flood. Orders are read from the requests the runtime received
 * (each with its `x-request-id`), never from timings.
 */
const { serve, stopAll } = servingPool();
let s: Serving;
let w: { id: string; slug: string };
const keys: Record<string, { id: string; secret: string }> = {};

beforeAll(async () => {
  s = await serve({ FAKE_DELAY_MS: "150" });
  w = await s.createWorkload({
    name: "shared",
    backend: "vllm",
    model_name: "shared",
    config: { command: "vllm serve shared" },
  });
  const ready = await s.waitState(w.id);
  await s.admin(`/admin/assignments/${ready.assignments[0].id}`, { method: "PATCH", body: { concurrency: 1 } });
  for (const name of ["flood", "trickle", "bulk"]) {
    const k = await (await s.admin(`/admin/projects/${s.project}/keys`, { body: { name, type: "live" } })).json();
    keys[name] = { id: k.id, secret: k.secret };
  }
}, 60_000);
afterAll(async () => {
  await stopAll();
  await cleanup();
});

/** A chat request of key `who` tagged `id` (the runtime records the tag). */
const ask = (who: string, id: string) =>
  s.data(w.slug, "/v1/chat/completions", {
    body: { messages: [{ role: "user", content: id }] },
    token: keys[who].secret,
    headers: { "x-request-id": id },
  });

/** The tags of the requests the runtime received, in the order it received them, from `since` on. */
const received = (since: number) =>
  s
    .events((e) => e.event === "request")
    .slice(since)
    .map((e) => String(e.request_id));
const receivedCount = () => s.events((e) => e.event === "request").length;

/** Waits until `n` requests wait in the workload's queue. */
const queued = (n: number) =>
  waitFor(async () => (await s.workload(w.id)).queue_depth === n || undefined, { what: `${n} request(s) queued` });

/** Starts `n` requests of `who` tagged `<tag>-<i>`, after the first one runs (so the rest wait in order). */
async function flood(who: string, tag: string, n: number, alreadyQueued = 0): Promise<Response[]> {
  const first = ask(who, `${tag}-0`);
  await waitFor(async () => (await s.workload(w.id)).assignments[0].in_flight === 1 || undefined, {
    what: "the slot taken",
  });
  const rest = Array.from({ length: n - 1 }, (_, i) => ask(who, `${tag}-${i + 1}`));
  await queued(alreadyQueued + n - 1);
  return Promise.all([first, ...rest]);
}

const limitsOf = async (id: string) =>
  (
    (await (await s.admin(`/admin/projects/${s.project}/keys`)).json()) as {
      id: string;
      limits: Record<string, unknown>;
    }[]
  ).find((k) => k.id === id)!.limits;

describe("priorities and fair share", () => {
  test("a key's priority and weight: set with its limits, shown in the key view, refused at their field when wrong, audited", async () => {
    const set = await s.admin(`/admin/keys/${keys.bulk.id}`, {
      method: "PATCH",
      body: { limits: { priority: "batch", weight: 3 } },
    });
    expect(set.status).toBe(200);
    expect((await set.json()).limits).toMatchObject({ priority: "batch", weight: 3, rpm: null });
    expect(await limitsOf(keys.bulk.id)).toMatchObject({ priority: "batch", weight: 3 });
    expect(await limitsOf(keys.trickle.id)).toMatchObject({ priority: null, weight: null });
    for (const [limits, field] of [
      [{ priority: "urgent" }, "limits.priority"],
      [{ weight: 0 }, "limits.weight"],
      [{ weight: 1001 }, "limits.weight"],
      [{ weight: 2.5 }, "limits.weight"],
      [{ weight: "3" }, "limits.weight"],
    ] as const) {
      const r = await s.admin(`/admin/keys/${keys.bulk.id}`, { method: "PATCH", body: { limits } });
      expect(r.status).toBe(400);
      expect((await r.json()).error).toMatchObject({ code: "validation_error", field });
    }
    const made = await s.admin(`/admin/projects/${s.project}/keys`, {
      body: { name: "heavy", type: "live", limits: { weight: 1000, priority: "interactive" } },
    });
    expect((await made.json()).limits).toMatchObject({ weight: 1000, priority: "interactive" });
    const entries = (await (await s.admin("/admin/audit?limit=100")).json()).entries as {
      action: string;
      target: { id: string };
      diff: unknown;
    }[];
    expect(entries.find((e) => e.action === "key.limits" && e.target.id === keys.bulk.id)?.diff).toEqual({
      priority: { from: null, to: "batch" },
      weight: { from: null, to: 3 },
    });
    // null removes the weight again (1, the default); the priority stays.
    await s.admin(`/admin/keys/${keys.bulk.id}`, { method: "PATCH", body: { limits: { weight: null } } });
    expect(await limitsOf(keys.bulk.id)).toMatchObject({ priority: "batch", weight: null });
  });

  test("beside a flooding key's queue, a trickle key's request is served after at most one of the flood's", async () => {
    const since = receivedCount();
    const flooding = flood("flood", "F", 8);
    await queued(7);
    const q = await ask("trickle", "Q-1");
    const statuses = (await flooding).map((r) => r.status);
    expect(q.status).toBe(200);
    const order = received(since);
    // F-0 was running when Q-1 came; one more of F's had the turn; then Q-1, before the other six.
    expect(order[0]).toBe("F-0");
    expect(order[1]).toStartWith("F-");
    expect(order[2]).toBe("Q-1");
    expect(statuses).toEqual(Array(8).fill(200));
  });

  test("a priority: batch key's requests wait behind interactive ones", async () => {
    const since = receivedCount();
    const running = ask("flood", "F-run");
    await waitFor(async () => (await s.workload(w.id)).assignments[0].in_flight === 1 || undefined, {
      what: "the slot taken",
    });
    const bulk = [ask("bulk", "B-1"), ask("bulk", "B-2")];
    await queued(2);
    const chat = [ask("trickle", "Q-1"), ask("trickle", "Q-2")];
    await queued(4);
    expect((await Promise.all([running, ...bulk, ...chat])).map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
    const order = received(since);
    expect([order[0], [...order.slice(1, 3)].sort(), [...order.slice(3)].sort()]).toEqual([
      "F-run",
      ["Q-1", "Q-2"],
      ["B-1", "B-2"],
    ]);
  });

  test("jobs keep completing beside a synchronous flood: one slot in ten goes to them", async () => {
    const since = receivedCount();
    const flooding = flood("flood", "S", 30);
    const submit = await s.data(w.slug, "/jobs", {
      body: { kind: "chat", body: { messages: [{ role: "user", content: "a job" }] } },
      token: keys.trickle.secret,
      headers: { "x-request-id": "job-1" },
    });
    expect(submit.status).toBe(202);
    const { job_id } = await submit.json();
    const done = await waitFor(
      async () => {
        const j = await (await s.data(w.slug, `/jobs/${job_id}`, { token: keys.trickle.secret })).json();
        return j.status === "completed" || j.status === "failed" ? j : undefined;
      },
      { what: "the job finished", timeoutMs: 30_000 },
    );
    expect(done.status).toBe("completed");
    const order = received(since);
    const at = order.indexOf("job-1");
    // It ran while the flood still waited: within a dozen grants, with most of the flood after it.
    expect(at).toBeGreaterThan(0);
    expect(at).toBeLessThanOrEqual(12);
    expect((await flooding).map((r) => r.status)).toEqual(Array(30).fill(200));
    expect(
      received(since)
        .slice(at + 1)
        .filter((id) => id.startsWith("S-")).length,
    ).toBeGreaterThanOrEqual(30 - 12);
  });

  test("/metrics shows the queue per class", async () => {
    const text = await (await s.admin("/metrics")).text();
    expect(text).toContain("# TYPE inferd_queue_class_depth gauge");
    expect(text).toContain(`inferd_queue_class_depth{workload="${s.project}/${w.slug}",class="interactive"} 0`);
    expect(text).toContain(`inferd_queue_class_depth{workload="${s.project}/${w.slug}",class="batch"} 0`);
  });
});
