/**
 * The fair waiting line on its own (src/dispatch/fair.ts; no server, no timers): deficit
 * round-robin between keys with their weights, a trickle key not held up by a flood's queue (a key
 * that starts waiting goes first for one turn), the
 * bounded share of the batch class beside interactive requests, waiters leaving from the middle,
 * the counts, and which key makes room when the queue is full.
 */
import { describe, expect, test } from "bun:test";
import { BATCH_EVERY, FairQueue, quantumOf, type Joining } from "../src/dispatch/fair";

const sync = (key: string, weight?: number): Joining => ({ cls: "interactive", key, weight, bounded: true });
const job = (key: string): Joining => ({ cls: "batch", key, bounded: false });

/** Grants `n` waiters (or all) and returns them in grant order. */
function grant<T>(q: FairQueue<T>, n = Infinity): T[] {
  const out: T[] = [];
  while (out.length < n && q.size > 0) {
    const next = q.peek();
    const got = q.shift()!;
    expect(got).toBe(next!); // peek names the waiter shift grants
    out.push(got);
  }
  return out;
}

describe("the fair queue", () => {
  test("keys take turns, one grant each with weight 1, three to one with weight 3; each key stays FIFO", () => {
    const q = new FairQueue<string>();
    for (let i = 1; i <= 6; i++) q.push(`a${i}`, sync("a"));
    for (let i = 1; i <= 6; i++) q.push(`b${i}`, sync("b"));
    expect(grant(q, 6)).toEqual(["a1", "b1", "a2", "b2", "a3", "b3"]);

    const w = new FairQueue<string>();
    for (let i = 1; i <= 8; i++) w.push(`h${i}`, sync("heavy", 3));
    for (let i = 1; i <= 4; i++) w.push(`l${i}`, sync("light", 1));
    expect(grant(w)).toEqual(["h1", "h2", "h3", "l1", "h4", "h5", "h6", "l2", "h7", "h8", "l3", "l4"]);
  });

  test("a flood of 10,000 from one key does not delay a trickle key: it is served at the next grant", () => {
    const q = new FairQueue<string>();
    for (let i = 0; i < 10_000; i++) q.push(`F${i}`, sync("F"));
    grant(q, 3);
    q.push("Q1", sync("Q"));
    expect(grant(q, 2)).toEqual(["Q1", "F3"]);
    grant(q, 100);
    q.push("Q2", sync("Q"));
    expect(grant(q, 1)).toEqual(["Q2"]);
    expect(q.size).toBe(10_000 - 3 - 1 - 100);
    // A key that builds a backlog of its own has its one fresh turn, then alternates with the flood.
    for (let i = 3; i <= 5; i++) q.push(`Q${i}`, sync("Q"));
    expect(grant(q, 5)).toEqual(["Q3", "F104", "Q4", "F105", "Q5"]);
  });

  test("interactive goes first, but while both wait batch gets one grant in ten", () => {
    const q = new FairQueue<string>();
    for (let i = 0; i < 5; i++) q.push(`job${i}`, job("J"));
    for (let i = 0; i < 100; i++) q.push(`s${i}`, sync(`k${i % 4}`));
    const first = grant(q, 50);
    const jobs = first.filter((x) => x.startsWith("job"));
    expect(jobs.length).toBe(50 / BATCH_EVERY);
    expect(first.slice(0, BATCH_EVERY - 1).every((x) => x.startsWith("s"))).toBe(true);
    expect(first[BATCH_EVERY - 1]).toBe("job0");
    // With only interactive waiting nothing is saved up for batch: a new job waits its ten grants again.
    const rest = grant(q);
    expect(rest.filter((x) => x.startsWith("job")).length).toBe(0);
    expect(q.size).toBe(0);
    expect(BATCH_EVERY).toBe(10);
  });

  test("batch alone is served at once, and a batch-priority key waits behind interactive ones", () => {
    const q = new FairQueue<string>();
    q.push("job", job("J"));
    expect(q.peek()).toBe("job");
    q.push("bulk", { cls: "batch", key: "B", bounded: true });
    q.push("chat", sync("I"));
    expect(grant(q)).toEqual(["chat", "job", "bulk"]);
  });

  test("waiters leave from the middle of the line; the counts follow", () => {
    const q = new FairQueue<string>();
    const places = Array.from({ length: 10_000 }, (_, i) => q.push(`F${i}`, sync("F")));
    const qPlace = q.push("Q", sync("Q"));
    q.push("J", job("J"));
    expect([q.size, q.bounded, q.sizeOf("interactive"), q.sizeOf("batch"), q.boundedOf("interactive", "F")]).toEqual([
      10_002, 10_001, 10_001, 1, 10_000,
    ]);
    for (let i = 1; i < 10_000; i += 2) expect(q.remove(places[i])).toBe(true);
    expect(q.remove(places[1])).toBe(false); // twice is harmless
    expect(q.remove(qPlace)).toBe(true);
    expect([q.size, q.bounded, q.boundedOf("interactive", "Q")]).toEqual([5_001, 5_000, 0]);
    expect(grant(q, 4)).toEqual(["F0", "F2", "F4", "F6"]);
    // The granted one cannot be removed again, and a key whose last waiter left is gone from the ring.
    expect(q.remove(places[0])).toBe(false);
    for (let i = 8; i < 10_000; i += 2) q.remove(places[i]);
    expect(grant(q)).toEqual(["J"]);
    expect([q.size, q.bounded, q.sizeOf("interactive"), q.sizeOf("batch")]).toEqual([0, 0, 0, 0]);
    expect([...q.values()]).toEqual([]);
  });

  test("removing the key at the head of the ring hands the turn to the next key", () => {
    const q = new FairQueue<string>();
    const a = q.push("a1", sync("a", 5));
    q.push("b1", sync("b"));
    q.remove(a);
    expect(grant(q)).toEqual(["b1"]);
  });

  test("the fattest key, and its newest request, make room when the queue is full", () => {
    const q = new FairQueue<string>();
    for (let i = 0; i < 5; i++) q.push(`F${i}`, sync("F"));
    q.push("Fjob", { cls: "batch", key: "F", bounded: false });
    q.push("Q0", sync("Q"));
    expect(q.fattest()).toEqual({ key: "F", cls: "interactive", count: 5, newest: "F4" });
    expect(new FairQueue<string>().fattest()).toBeUndefined();
    const onlyJobs = new FairQueue<string>();
    onlyJobs.push("j", job("J"));
    expect(onlyJobs.fattest()).toBeUndefined();
  });

  test("weights are whole numbers from 1 to 1000", () => {
    expect([quantumOf(undefined), quantumOf(0), quantumOf(2.7), quantumOf(5000), quantumOf(NaN)]).toEqual([
      1, 1, 2, 1000, 1,
    ]);
  });
});
