/**
 * Issue 32, items 10, 15, 19 and 20, against a real inferd with the fake vLLM:
 * - 10: the inspector keys its records on inferd's own id, so a client's chosen `x-request-id` can
 *   neither hide a request nor take another's record (the client's id is kept beside it);
 * - 15: `count_tokens` waits for a slot in the workload's queue like any request;
 * - 19: the HF token setting refuses line breaks, the webhook retry schedule refuses `1ms`;
 * - 20: with `HF_HUB_OFFLINE=1` a model search contacts no hub at all.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startFakeHub, type FakeHub } from "./fixtures/hf-hub";
import { cleanup, waitFor } from "./helpers/proc";
import { servingPool, startServing, type Serving } from "./helpers/serving";

const pool = servingPool();
let s: Serving;
let wl: { id: string; slug: string; runtime: string; assignment: string };

beforeAll(async () => {
  // Every request holds its slot for a while, so a second one has to wait in the queue.
  s = await pool.serve({ FAKE_DELAY_MS: "1500" });
  const w = await s.createWorkload({
    name: "probed",
    backend: "vllm",
    model_name: "org/probed",
    config: { command: "vllm serve org/probed" },
  });
  const ready = await s.waitState(w.id);
  wl = { id: w.id, slug: w.slug, runtime: ready.assignments[0].base_url!, assignment: ready.assignments[0].id };
}, 120_000);
afterAll(async () => {
  await pool.stopAll();
  await cleanup();
});

type Row = { id: string; request_id: string | null; status: number; route: string };

/** The inspector's rows of the workload whose client request id is `rid`, once `n` are written. */
const rowsWith = (rid: string, n: number) =>
  waitFor(
    async () => {
      const r = await s.admin(`/admin/workloads/${wl.id}/requests?q=${encodeURIComponent(rid)}`);
      const rows = ((await r.json()) as { requests: Row[] }).requests.filter((x) => x.request_id === rid);
      return rows.length >= n ? rows : undefined;
    },
    { what: `${n} records of ${rid}`, timeoutMs: 30_000 },
  );

const chat = (content: string, headers: Record<string, string> = {}) =>
  s.data(wl.slug, "/v1/chat/completions", { body: { messages: [{ role: "user", content }] }, headers });

describe("item 10: a client's x-request-id is not the inspector's key", () => {
  test("two requests with the same chosen id are both recorded, each under inferd's own id", async () => {
    const [a, b] = await Promise.all([
      chat("first", { "x-request-id": "chosen-1" }),
      chat("second", { "x-request-id": "chosen-1" }),
    ]);
    expect([a.status, b.status]).toEqual([200, 200]);
    expect(a.headers.get("x-request-id")).toBe("chosen-1");
    const rows = await rowsWith("chosen-1", 2);
    expect(rows).toHaveLength(2);
    expect(new Set(rows.map((r) => r.id)).size).toBe(2);
    for (const r of rows) expect(r.id).toMatch(/^req_[0-9a-f]{32}$/);
  }, 60_000);

  test("a request that sends another request's record id as its x-request-id gets a record of its own; the other is untouched", async () => {
    expect((await chat("the victim's prompt")).status).toBe(200);
    const victim = await waitFor(
      async () => {
        const r = await s.admin(`/admin/workloads/${wl.id}/requests?limit=50`);
        return ((await r.json()) as { requests: Row[] }).requests.find((x) => x.request_id === x.id);
      },
      { what: "the victim's record", timeoutMs: 30_000 },
    );
    const before = await (await s.admin(`/admin/requests/${victim.id}`)).json();
    expect((await chat("the attacker's prompt", { "x-request-id": victim.id })).status).toBe(200);
    const mine = await rowsWith(victim.id, 2);
    const attacker = mine.find((r) => r.id !== victim.id)!;
    expect(attacker.id).toMatch(/^req_/);
    expect(await (await s.admin(`/admin/requests/${victim.id}`)).json()).toEqual(before);
  }, 60_000);
});

describe("item 15: count_tokens takes a place in the queue", () => {
  test("while the only slot is busy, a count waits in the queue and is answered after the slot frees", async () => {
    expect(
      (await s.admin(`/admin/assignments/${wl.assignment}`, { method: "PATCH", body: { concurrency: 1 } })).status,
    ).toBe(200);
    const order: string[] = [];
    const busy = chat("hold the slot").then((r) => (order.push("chat"), r));
    await waitFor(
      async () =>
        ((await (await fetch(`${wl.runtime}/fake/stats`)).json()) as { in_flight: number }).in_flight === 1 ||
        undefined,
      { what: "the slot taken" },
    );
    const count = fetch(`${s.url}/endpoint/${s.project}/${wl.slug}/v1/messages/count_tokens`, {
      method: "POST",
      headers: { "x-api-key": s.live, "content-type": "application/json" },
      body: JSON.stringify({ model: "org/probed", messages: [{ role: "user", content: "count these words please" }] }),
    }).then((r) => (order.push("count"), r));
    await waitFor(async () => (await s.workload(wl.id)).queue_depth === 1 || undefined, {
      what: "the count waiting in the queue",
    });
    const [c, b] = await Promise.all([count, busy]);
    expect(b.status).toBe(200);
    expect(c.status).toBe(200);
    expect((await c.json()).input_tokens).toBeGreaterThan(0);
    expect(order).toEqual(["chat", "count"]);
  }, 60_000);
});

describe("item 19: settings that reach a header or a timer are checked", () => {
  const refused = async (body: Record<string, unknown>, field: string, words: string) => {
    const r = await s.admin("/admin/settings", { method: "PATCH", body });
    expect(r.status).toBe(400);
    const { error } = await r.json();
    expect(error).toMatchObject({ code: "validation_error", field });
    expect(error.message).toContain(words);
  };

  test("an HF token with a line break is refused; a plain one is taken", async () => {
    await refused({ hfToken: "hf_abc\r\nX-Injected: 1" }, "hfToken", "no spaces, line breaks");
    await refused({ hfToken: "hf abc" }, "hfToken", "no spaces, line breaks");
    expect((await s.admin("/admin/settings", { method: "PATCH", body: { hfToken: "hf_AbC123" } })).status).toBe(200);
    expect((await s.admin("/admin/settings", { method: "PATCH", body: { hfToken: null } })).status).toBe(200);
  });

  test("a retry schedule of 1ms, of weeks or of a hundred retries is refused", async () => {
    await refused({ webhookRetrySchedule: "1ms" }, "webhookRetrySchedule", "shorter than the shortest delay, 100ms");
    await refused({ webhookRetrySchedule: "1s,0s" }, "webhookRetrySchedule", "shorter than the shortest delay");
    await refused({ webhookRetrySchedule: "30000h" }, "webhookRetrySchedule", "longer than the longest delay");
    await refused(
      { webhookRetrySchedule: Array(100).fill("1s").join(",") },
      "webhookRetrySchedule",
      "at most 20 delays",
    );
    expect(
      (await s.admin("/admin/settings", { method: "PATCH", body: { webhookRetrySchedule: "100ms,1s" } })).status,
    ).toBe(200);
  });
});

describe("item 20: HF_HUB_OFFLINE means no lookup at all", () => {
  let hub: FakeHub;
  let offline: Serving;
  beforeAll(async () => {
    hub = await startFakeHub({ repos: {} });
    offline = await startServing({ HF_ENDPOINT: hub.url, HF_HUB_OFFLINE: "1" });
  }, 60_000);
  afterAll(async () => {
    await offline?.stop().catch(() => 0);
    await hub?.stop();
  });

  test("a hub search answers 503 naming HF_HUB_OFFLINE and the hub hears nothing", async () => {
    hub.clearRequests();
    for (const backend of ["llamacpp", "vllm"]) {
      const r = await offline.admin(`/admin/models/search?q=qwen&backend=${backend}`);
      expect(r.status).toBe(503);
      expect((await r.json()).error.message).toContain("HF_HUB_OFFLINE=1 is set");
    }
    expect(hub.requests()).toHaveLength(0);
  });
});
