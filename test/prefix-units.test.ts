/**
 * Prefix-aware routing on its own (no server, no timer): what a prompt's opening hashes to, the
 * consistent-hash ring with bounded loads, cluster hosts agreeing without sharing state, the
 * dispatcher taking the ring's choice and counting hits, and the cost per request (printed).
 */
import { describe, expect, test } from "bun:test";
import { BLOCK_CHARS, MAX_BLOCKS, PrefixRouter, prefixAffinity } from "../src/dispatch/prefix";
import { Dispatcher, type Target } from "../src/dispatch/queue";
import { dispatchWith, withAffinity } from "../src/dataplane/forward";
import { BUCKET_MS, MetricsStore } from "../src/usage/series";

const SYSTEM = `You are the support assistant of a hardware shop. ${"Answer politely and cite the manual. ".repeat(135)}`;
const TOOLS = Array.from({ length: 6 }, (_, i) => ({
  type: "function",
  function: {
    name: `tool_${i}`,
    description: `Looks up thing ${i} in the catalogue. `.repeat(8),
    parameters: { type: "object", properties: { id: { type: "string" } } },
  },
}));

/** Turn `turns` of conversation `c`: system, tools, the history so far and a new user message. */
function chat(c: number, turns: number): Record<string, unknown> {
  const messages: { role: string; content: string }[] = [{ role: "system", content: SYSTEM }];
  for (let t = 0; t < turns; t++) {
    messages.push({ role: "user", content: `Conversation ${c}, question ${t}: does part ${c * 7 + t} fit?` });
    if (t < turns - 1) messages.push({ role: "assistant", content: `Yes, part ${c * 7 + t} fits model ${c}.` });
  }
  return { model: "m", messages, tools: TOOLS, stream: true };
}

const replica = (id: string, inFlight = 0, capacity = 100) => ({ id, inFlight, capacity });
const IDS = ["asg_a", "asg_b", "asg_c", "asg_d"];
const target = (id: string, capacity = 100): Target => ({
  id,
  workloadId: "w",
  workerId: "wk",
  capacity,
  inFlight: 0,
  send: async () => new Response("ok"),
});

describe("a prompt's prefix hashes", () => {
  test("every turn of a conversation has the same key; another conversation, system prompt or tool set has another", () => {
    const keys = [1, 2, 3, 5, 8].map((turns) => prefixAffinity(chat(0, turns)).at(-1));
    expect(new Set(keys).size).toBe(1);
    expect(prefixAffinity(chat(1, 3)).at(-1)).not.toBe(keys[0]);
    const other = chat(0, 3);
    expect(prefixAffinity({ ...other, tools: TOOLS.slice(1) }).at(-1)).not.toBe(keys[0]);
    const messages = (other.messages as { role: string; content: string }[]).map((m) =>
      m.role === "system" ? { ...m, content: `${m.content}!` } : m,
    );
    expect(prefixAffinity({ ...other, messages }).at(-1)).not.toBe(keys[0]);
  });

  test("blocks are chained: one hash per 256 characters, the earlier blocks equal for a shared system prompt", () => {
    const a = prefixAffinity(chat(0, 1));
    const b = prefixAffinity(chat(1, 1));
    const shared = Math.floor(SYSTEM.length / BLOCK_CHARS);
    expect(a.length).toBeGreaterThan(shared);
    expect(a.slice(0, shared)).toEqual(b.slice(0, shared));
    expect(a.at(-1)).not.toBe(b.at(-1));
  });

  test("Messages, Responses, completions and Ollama bodies have a key too; a body without a prompt has none", () => {
    const messages = {
      model: "m",
      system: SYSTEM,
      messages: [{ role: "user", content: [{ type: "text", text: "hello" }] }],
    };
    expect(prefixAffinity(messages).length).toBeGreaterThan(1);
    expect(
      prefixAffinity({
        ...messages,
        messages: [...messages.messages, { role: "assistant", content: "hi" }, { role: "user", content: "more" }],
      }).at(-1),
    ).toBe(prefixAffinity(messages).at(-1));
    const responses = { model: "m", instructions: SYSTEM, input: "hello" };
    expect(prefixAffinity(responses).at(-1)).toBe(
      prefixAffinity({
        ...responses,
        input: [
          { role: "user", content: "hello" },
          { role: "assistant", content: "hi" },
          { role: "user", content: "more" },
        ],
      }).at(-1),
    );
    expect(prefixAffinity({ model: "m", prompt: "Once upon a time" })).toHaveLength(1);
    expect(prefixAffinity({ model: "m", system: "be brief", prompt: "why?" })).toHaveLength(1);
    expect(prefixAffinity({ model: "m", input: 3 })).toEqual([]);
  });

  test("at most 64 blocks are hashed, however long the prompt", () => {
    const long = { model: "m", messages: [{ role: "user", content: "x".repeat(200_000) }] };
    expect(prefixAffinity(long)).toHaveLength(MAX_BLOCKS);
  });
});

describe("the ring with bounded loads", () => {
  test("idle replicas: a conversation always goes to the same replica, and conversations spread over all of them", () => {
    const router = new PrefixRouter();
    const replicas = IDS.map((id) => replica(id));
    for (let c = 0; c < 8; c++) {
      const picks = [1, 2, 4, 6].map((turns) => router.choose("w", replicas, prefixAffinity(chat(c, turns)))!.id);
      expect(new Set(picks).size).toBe(1);
    }
    const per = new Map<string, number>();
    for (let c = 0; c < 200; c++) {
      const id = router.choose("w", replicas, prefixAffinity(chat(c, 1)))!.id;
      per.set(id, (per.get(id) ?? 0) + 1);
    }
    expect([...per.keys()].sort()).toEqual(IDS);
    for (const n of per.values()) expect(n).toBeGreaterThan(20); // 50 each on average
  });

  test("a hot conversation stays on its replica below the bound and spills to the ring's next replica at it", () => {
    const router = new PrefixRouter();
    const replicas = IDS.map((id) => replica(id));
    const key = prefixAffinity(chat(3, 2));
    const home = router.choose("w", replicas, key)!;
    // Load bound with 4 replicas: ⌈1.25 × (in flight + 1) / 4⌉.
    home.inFlight = 1; // bound ⌈1.25 × 2 / 4⌉ = 1: at it
    const spill = router.choose("w", replicas, key)!;
    expect(spill.id).not.toBe(home.id);
    expect(router.choose("w", replicas, key)!.id).toBe(spill.id); // the spill is the ring's next, the same every time
    for (const r of replicas) r.inFlight = 4; // everyone busy: bound ⌈1.25 × 17 / 4⌉ = 6
    expect(router.choose("w", replicas, key)!.id).toBe(home.id);
    home.inFlight = 100; // full: never chosen, whatever the bound
    expect(router.choose("w", replicas, key)!.id).not.toBe(home.id);
    for (const r of replicas) r.inFlight = r.capacity;
    expect(router.choose("w", replicas, key)).toBeUndefined();
  });

  test("removing a replica moves only the conversations it had (consistent hashing)", () => {
    const router = new PrefixRouter();
    const four = IDS.map((id) => replica(id));
    const keys = Array.from({ length: 400 }, (_, c) => prefixAffinity(chat(c, 1)));
    const before = keys.map((k) => router.choose("w", four, k)!.id);
    const three = four.filter((r) => r.id !== "asg_c");
    const after = keys.map((k) => router.choose("w", three, k)!.id);
    let moved = 0;
    before.forEach((id, i) => {
      if (id === "asg_c") moved++;
      else expect(after[i]).toBe(id);
    });
    expect(moved).toBeGreaterThan(50);
  });

  test("two hosts fed the same replicas (in any order) pick the same replica for every conversation", async () => {
    const one = new Dispatcher({ waitMs: 1000, maxWaiting: 10 });
    const two = new Dispatcher({ waitMs: 1000, maxWaiting: 10 });
    for (const id of IDS) one.upsertTarget(target(id));
    for (const id of [...IDS].reverse()) two.upsertTarget(target(id));
    for (let c = 0; c < 50; c++) {
      const ticket = { kind: "sync" as const, affinity: prefixAffinity(chat(c, 1)) };
      const [a, b] = await Promise.all([one.acquire("w", undefined, ticket), two.acquire("w", undefined, ticket)]);
      expect(a.target.id).toBe(b.target.id);
      a.release();
      b.release();
    }
  });
});

describe("the dispatcher routing by prefix", () => {
  test("a ticket with an affinity takes the ring's replica; hits and spills are counted; without one, least-loaded", async () => {
    const d = new Dispatcher({ waitMs: 1000, maxWaiting: 10 });
    for (const id of IDS) d.upsertTarget(target(id));
    const w = { id: "w", routing: "prefix" };
    const ticket = withAffinity(d, w, chat(5, 1));
    expect(ticket.affinity?.length).toBeGreaterThan(0);
    expect(withAffinity(d, { ...w, routing: "least_loaded" }, chat(5, 1)).affinity).toBeUndefined();
    const held = [];
    for (let i = 0; i < 3; i++)
      held.push(
        await dispatchWith(
          d,
          "w",
          new AbortController().signal,
          async () => new Response("ok"),
          withAffinity(d, w, chat(5, i + 1)),
        ),
      );
    // First turn on its replica; the second while the first holds a slot: bound ⌈1.25 × 2 / 4⌉ = 1, so it spills.
    expect(held[0].slot.target.id).toBe(d.prefix.owner("w", ticket.affinity!)!);
    expect(held[1].slot.target.id).not.toBe(held[0].slot.target.id);
    expect(d.prefix.counts.get("w")).toEqual({ routed: 3, hits: 1 });
    for (const h of held) h.slot.release();
    const again = await dispatchWith(
      d,
      "w",
      new AbortController().signal,
      async () => new Response("ok"),
      withAffinity(d, w, chat(5, 4)),
    );
    expect(again.slot.target.id).toBe(held[0].slot.target.id);
    expect(d.prefix.counts.get("w")).toEqual({ routed: 4, hits: 2 });
  });

  test("one replica: nothing is hashed (the cheap path)", () => {
    const d = new Dispatcher({ waitMs: 1000, maxWaiting: 10 });
    d.upsertTarget(target("only"));
    expect(withAffinity(d, { id: "w", routing: "prefix" }, chat(0, 1)).affinity).toBeUndefined();
  });

  test("cost per request for an 8 KB chat body (printed, not asserted)", () => {
    const body = chat(9, 4);
    expect(JSON.stringify(body).length).toBeGreaterThan(8000);
    const d = new Dispatcher({ waitMs: 1000, maxWaiting: 10 });
    for (const id of IDS) d.upsertTarget(target(id));
    const w = { id: "w", routing: "prefix" };
    const N = 5000;
    for (let i = 0; i < 500; i++) d.prefix.choose("w", d.targetsOf("w"), withAffinity(d, w, body).affinity!);
    const t0 = performance.now();
    for (let i = 0; i < N; i++) d.prefix.choose("w", d.targetsOf("w"), withAffinity(d, w, body).affinity!);
    const us = ((performance.now() - t0) * 1000) / N;
    console.log(
      `prefix routing cost: ${us.toFixed(1)} µs per request (${JSON.stringify(body).length} byte chat body: hash the opening + pick on the ring)`,
    );
    expect(us).toBeGreaterThan(0);
  });
});

describe("the hit rate in the workload's series", () => {
  test("each 10 s bucket gets the share of requests routed by prefix that went to their ring replica; none routed is a gap in that line only", () => {
    const t0 = Date.UTC(2026, 0, 1, 12, 0, 0);
    const m = new MetricsStore(t0);
    m.samplePrefix("w", { routed: 4, hits: 3 }, t0 + 1000);
    m.samplePrefix("w", { routed: 10, hits: 9 }, t0 + 5000); // totals since start: this bucket got 10 routed, 9 hits
    m.samplePrefix("w", { routed: 10, hits: 9 }, t0 + BUCKET_MS + 1000); // nothing new
    m.samplePrefix("w", { routed: 12, hits: 9 }, t0 + 2 * BUCKET_MS + 1000);
    const points = m.points("w", 1, t0 + 3 * BUCKET_MS);
    expect(points.slice(-3).map((p) => p.prefix_hit_rate)).toEqual([0.9, null, 0]);
    expect(points.slice(-3).map((p) => p.rps)).toEqual([0, 0, 0]);
  });
});
