/**
 * The queue on its own, with fake replicas and a fake timer (no server, no sleeping): slots taken
 * least-loaded first, synchronous requests ahead of jobs with a bounded share for jobs, fair turns
 * between keys, the queue's limits (429 when full — the key with most waiting makes room —, 503
 * when the wait runs out), clients that leave, capacity changes, replicas that go, and the scaler
 * told when a request has to wait.
 */
import { describe, expect, test } from "bun:test";
import { Dispatcher, type Slot, type Target, type Ticket, type Timers } from "../src/dispatch/queue";
import { AppError } from "../src/errors";

/** A timer you advance by hand. */
function fakeTimers(): Timers & { advance(ms: number): void; pending(): number } {
  let now = 0;
  let id = 0;
  const due = new Map<number, { at: number; fn: () => void }>();
  return {
    set: (fn, ms) => (due.set(++id, { at: now + ms, fn }), id),
    clear: (h) => void due.delete(h as number),
    advance(ms) {
      now += ms;
      for (const [k, t] of [...due].sort((a, b) => a[1].at - b[1].at)) {
        if (t.at > now) continue;
        due.delete(k);
        t.fn();
      }
    },
    pending: () => due.size,
  };
}

const target = (id: string, capacity: number, workloadId = "w"): Target => ({
  id,
  workloadId,
  workerId: "wk",
  capacity,
  inFlight: 0,
  send: async () => new Response("ok"),
});
const settle = () => new Promise((r) => setTimeout(r, 0));

function setup(limits = { waitMs: 1000, maxWaiting: 3 }) {
  const timers = fakeTimers();
  const waited: string[] = [];
  let unservable: string | undefined;
  const d = new Dispatcher(
    limits,
    () => unservable,
    (w) => waited.push(w),
    timers,
  );
  return { d, timers, waited, setUnservable: (why: string | undefined) => (unservable = why) };
}

describe("the dispatcher", () => {
  test("a free slot is granted at once, on the least-loaded replica", async () => {
    const { d, waited } = setup();
    d.upsertTarget(target("a", 2));
    d.upsertTarget(target("b", 2));
    const s1 = await d.acquire("w");
    const s2 = await d.acquire("w");
    expect([s1.target.id, s2.target.id].sort()).toEqual(["a", "b"]);
    expect(waited).toEqual([]);
  });

  test("waiters are served in order, synchronous requests ahead of jobs, when slots free", async () => {
    const { d, waited } = setup();
    d.upsertTarget(target("a", 1));
    const first = await d.acquire("w");
    const order: string[] = [];
    const job = d.acquire("w", undefined, { kind: "job" }).then((s) => (order.push("job"), s));
    const sync1 = d.acquire("w").then((s) => (order.push("sync1"), s));
    const sync2 = d.acquire("w").then((s) => (order.push("sync2"), s));
    expect(d.depth("w")).toBe(3);
    expect(waited).toEqual(["w", "w", "w"]);
    first.release();
    (await sync1).release();
    (await sync2).release();
    (await job).release();
    expect(order).toEqual(["sync1", "sync2", "job"]);
  });

  test("a full queue answers 429 at once; a wait that runs out answers 503, both with Retry-After", async () => {
    const { d, timers } = setup({ waitMs: 1000, maxWaiting: 2 });
    d.upsertTarget(target("a", 1));
    await d.acquire("w");
    const waiting = [d.acquire("w").catch((e) => e), d.acquire("w").catch((e) => e)];
    const full = (await d.acquire("w").catch((e) => e)) as AppError;
    expect([full.status, full.code, full.headers["retry-after"]]).toEqual([429, "queue_full", "1"]);
    timers.advance(999);
    await settle();
    expect(d.depth("w")).toBe(2);
    timers.advance(1);
    const [e1, e2] = (await Promise.all(waiting)) as AppError[];
    expect([e1.status, e1.code, e2.code]).toEqual([503, "queue_timeout", "queue_timeout"]);
    expect(d.depth("w")).toBe(0);
    expect(timers.pending()).toBe(0);
  });

  test("a client that leaves is taken out of the queue and its timer cleared", async () => {
    const { d, timers } = setup();
    d.upsertTarget(target("a", 1));
    await d.acquire("w");
    const ctl = new AbortController();
    const gone = d.acquire("w", ctl.signal).catch((e) => e);
    ctl.abort();
    expect(((await gone) as AppError).status).toBe(499);
    expect(d.depth("w")).toBe(0);
    expect(timers.pending()).toBe(0);
  });

  test("more capacity, or a new replica, serves waiters at once; a release is idempotent", async () => {
    const { d } = setup();
    const a = target("a", 1);
    d.upsertTarget(a);
    const held = await d.acquire("w");
    const next = d.acquire("w");
    d.upsertTarget({ ...a, capacity: 2 });
    expect(((await next) as Slot).target.id).toBe("a");
    expect(a.inFlight).toBe(2);
    held.release();
    held.release();
    expect(a.inFlight).toBe(1);
  });

  test("a workload that cannot be served fails its waiters with the reason; jobs are judged on their own", async () => {
    const { d, setUnservable } = setup();
    const t = target("a", 1);
    d.upsertTarget(t);
    await d.acquire("w");
    const waiting = d.acquire("w").catch((e) => e);
    setUnservable("every replica of this workload failed to start");
    d.removeTarget("a");
    const e = (await waiting) as AppError;
    expect([e.status, e.code, e.message]).toEqual([
      503,
      "workload_unavailable",
      "every replica of this workload failed to start",
    ]);
    expect(((await d.acquire("w").catch((x) => x)) as AppError).code).toBe("workload_unavailable");
  });

  test("while synchronous requests keep coming, a waiting job gets one slot in ten", async () => {
    const { d } = setup({ waitMs: 1000, maxWaiting: 1000 });
    d.upsertTarget(target("a", 1));
    let held = await d.acquire("w");
    const order: string[] = [];
    const job = d.acquire("w", undefined, { kind: "job", keyId: "J" }).then((s) => (order.push("job"), s));
    const syncs = Array.from({ length: 30 }, (_, i) =>
      d.acquire("w", undefined, { kind: "sync", keyId: `k${i % 3}` }).then((s) => (order.push(`s${i}`), s)),
    );
    expect(d.depthByClass("w")).toEqual({ interactive: 30, batch: 1 });
    for (const p of [...syncs, job]) void p.then((s) => (held = s));
    for (let i = 0; i < 12; i++) {
      held.release();
      await settle();
    }
    expect(order.indexOf("job")).toBe(9);
  });

  test("a flooding key does not hold up another key: its request is served after at most one of the flood's", async () => {
    const { d } = setup({ waitMs: 1000, maxWaiting: 1000 });
    d.upsertTarget(target("a", 2));
    const running = [await d.acquire("w"), await d.acquire("w")];
    const order: string[] = [];
    const take = (who: string, t: Ticket) =>
      d.acquire("w", undefined, t).then((s) => (order.push(who), running.push(s)));
    for (let i = 0; i < 200; i++) void take(`F${i}`, { kind: "sync", keyId: "F" });
    await settle();
    void take("Q", { kind: "sync", keyId: "Q" });
    for (let i = 0; i < 2; i++) {
      running.shift()!.release();
      await settle();
    }
    expect(order).toEqual(["F0", "Q"]);
  });

  test("a heavier key gets more turns: weight 3 against 1", async () => {
    const { d } = setup({ waitMs: 1000, maxWaiting: 1000 });
    d.upsertTarget(target("a", 1));
    let held = await d.acquire("w");
    const order: string[] = [];
    for (let i = 0; i < 6; i++)
      void d
        .acquire("w", undefined, { kind: "sync", keyId: "H", weight: 3 })
        .then((s) => (order.push("H"), (held = s)));
    for (let i = 0; i < 6; i++)
      void d.acquire("w", undefined, { kind: "sync", keyId: "L" }).then((s) => (order.push("L"), (held = s)));
    for (let i = 0; i < 8; i++) {
      held.release();
      await settle();
    }
    expect(order.join("")).toBe("HHHLHHHL");
  });

  test("a batch-priority key's requests wait behind interactive ones, yet count against the queue's limit", async () => {
    const { d } = setup({ waitMs: 1000, maxWaiting: 2 });
    d.upsertTarget(target("a", 1));
    let held = await d.acquire("w");
    const order: string[] = [];
    void d
      .acquire("w", undefined, { kind: "sync", keyId: "B", priority: "batch" })
      .then((s) => (order.push("bulk"), (held = s)));
    void d.acquire("w", undefined, { kind: "sync", keyId: "I" }).then((s) => (order.push("chat"), (held = s)));
    expect(d.depthByClass("w")).toEqual({ interactive: 1, batch: 1 });
    const full = (await d
      .acquire("w", undefined, { kind: "sync", keyId: "B", priority: "batch" })
      .catch((e) => e)) as AppError;
    expect(full.code).toBe("queue_full");
    for (let i = 0; i < 2; i++) {
      held.release();
      await settle();
    }
    expect(order).toEqual(["chat", "bulk"]);
  });

  test("a full queue makes room for another key by refusing the flooding key's newest request", async () => {
    const { d, timers } = setup({ waitMs: 1000, maxWaiting: 3 });
    d.upsertTarget(target("a", 1));
    await d.acquire("w");
    const flood = Array.from({ length: 3 }, () =>
      d.acquire("w", undefined, { kind: "sync", keyId: "F" }).catch((e) => e as AppError),
    );
    const fromF = (await d.acquire("w", undefined, { kind: "sync", keyId: "F" }).catch((e) => e)) as AppError;
    expect(fromF.code).toBe("queue_full");
    const q = d.acquire("w", undefined, { kind: "sync", keyId: "Q" }).catch((e) => e as AppError);
    const pushedOut = (await flood[2]) as AppError;
    expect([pushedOut.status, pushedOut.code, pushedOut.headers["retry-after"]]).toEqual([429, "queue_full", "1"]);
    expect(d.depth("w")).toBe(3);
    // Now F has 2 waiting and Q 1: neither side gives way again.
    expect(((await d.acquire("w", undefined, { kind: "sync", keyId: "Q" }).catch((e) => e)) as AppError).code).toBe(
      "queue_full",
    );
    timers.advance(1000);
    expect(((await q) as AppError).code).toBe("queue_timeout");
    expect(timers.pending()).toBe(0);
  });

  test("a client that leaves from the middle of a long queue is taken out; the others keep their turns", async () => {
    const { d, timers } = setup({ waitMs: 1000, maxWaiting: 10_000 });
    d.upsertTarget(target("a", 1));
    let held = await d.acquire("w");
    const ctls = Array.from({ length: 5000 }, () => new AbortController());
    const order: number[] = [];
    const waits = ctls.map((c, i) =>
      d.acquire("w", c.signal, { kind: "sync", keyId: "F" }).then(
        (s) => (order.push(i), (held = s)),
        (e: AppError) => e.status,
      ),
    );
    for (let i = 1; i < 5000; i += 2) ctls[i].abort();
    expect(d.depth("w")).toBe(2500);
    expect(timers.pending()).toBe(2500);
    for (let i = 0; i < 3; i++) {
      held.release();
      await settle();
    }
    expect(order).toEqual([0, 2, 4]);
    expect(await waits[1]).toBe(499);
  });
});
