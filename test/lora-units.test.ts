/**
 * LoRA on the host's side as pure units (issue 39): a replica's adapters (./src/dispatch/lora.ts) —
 * loads once, unloads the least recently used past its slots but never one in use, takes the
 * engines' "already loaded" as done — and the dispatcher's choice of replica for an adapter.
 */
import { describe, expect, test } from "bun:test";
import { VLLM_LORA } from "../agent/engines/vllm";
import { LLAMA_LORA } from "../agent/engines/llamacpp";
import type { RuntimeCall } from "../agent/engines/types";
import { ReplicaLora } from "../src/dispatch/lora";
import { Dispatcher, type Target } from "../src/dispatch/queue";
import { hash32 } from "../src/dispatch/prefix";
import { AppError } from "../src/errors";
import { waitFor } from "./helpers/proc";
import { BUCKET_MS, MetricsStore } from "../src/usage/series";

/** A runtime that answers each call with `answer` (default 200), recording the calls it got. */
function runtime(answer: (c: RuntimeCall) => { status: number; body: string } = () => ({ status: 200, body: "" })) {
  const calls: string[] = [];
  let release: (() => void) | undefined;
  return {
    calls,
    /** Holds the next call until `go()`. */
    hold: () => new Promise<void>((r) => (release = r)),
    go: () => release?.(),
    call: async (c: RuntimeCall) => {
      calls.push(`${c.path} ${(c.body as { lora_name: string }).lora_name}`);
      return answer(c);
    },
  };
}
const known = (...names: string[]) => names.map((name) => ({ name, path: `/adapters/${name}` }));
const signal = new AbortController().signal;

describe("a replica's adapters", () => {
  test("a load happens once however many ask at once; past its slots the least recently used one not in use is unloaded", async () => {
    const rt = runtime();
    const lora = new ReplicaLora(VLLM_LORA, known("a", "b", "c"), 2, rt.call);
    const [x, y] = await Promise.all([lora.acquire("a", signal), lora.acquire("a", signal)]);
    // One load, counted once: the second request waited for it (no hit, no load of its own).
    expect([x.loaded, y.loaded, x.hit, y.hit]).toEqual([true, false, false, false]);
    expect(rt.calls).toEqual(["/v1/load_lora_adapter a"]);
    x.done();
    y.done();
    const b = await lora.acquire("b", signal);
    // b is in use: c takes a's place.
    await lora.acquire("c", signal);
    expect(rt.calls.slice(1)).toEqual([
      "/v1/load_lora_adapter b",
      "/v1/unload_lora_adapter a",
      "/v1/load_lora_adapter c",
    ]);
    expect(lora.held()).toEqual(["b", "c"]);
    b.done();
    expect(await lora.acquire("b", signal)).toMatchObject({ hit: true, loaded: false });
  });

  test("loads under way take slots: a load with every slot in use waits until a request gives one back", async () => {
    const rt = runtime();
    const lora = new ReplicaLora(VLLM_LORA, known("a", "b"), 1, rt.call);
    const a = await lora.acquire("a", signal);
    let got = false;
    const b = lora.acquire("b", signal).then((x) => ((got = true), x));
    // Everything b's acquire can do without a slot freeing has run (microtasks only, no timers involved).
    for (let i = 0; i < 50; i++) await Promise.resolve();
    expect(got).toBe(false);
    a.done();
    (await b).done();
    expect(lora.held()).toEqual(["b"]);
    expect(rt.calls).toEqual(["/v1/load_lora_adapter a", "/v1/unload_lora_adapter a", "/v1/load_lora_adapter b"]);
    // A removed adapter is unloaded from the runtime.
    const kept = lora.held()[0];
    lora.update(known(...["a", "b"].filter((n) => n !== kept)));
    await waitFor(async () => rt.calls.at(-1) === `/v1/unload_lora_adapter ${kept}`, { what: "the unload call" });
  });

  test("the engine's 'already loaded' counts as loaded; a refusal is a 502 naming the runtime's answer", async () => {
    const already = new ReplicaLora(
      VLLM_LORA,
      known("a"),
      8,
      runtime(() => ({ status: 400, body: "The lora adapter 'a' has already been loaded." })).call,
    );
    expect(await already.acquire("a", signal)).toMatchObject({ loaded: true, hit: false });
    expect(already.holds("a")).toBe(true);
    const refused = new ReplicaLora(
      VLLM_LORA,
      known("a"),
      8,
      runtime(() => ({ status: 400, body: "LoRA rank 64 is greater than max_lora_rank 16." })).call,
    );
    const e = (await refused.acquire("a", signal).catch((x) => x)) as AppError;
    expect(e).toBeInstanceOf(AppError);
    expect([e.status, e.code]).toEqual([502, "adapter_load_failed"]);
    expect(e.message).toContain("max_lora_rank 16");
    expect(refused.holds("a")).toBe(false);
    // Not pulled here yet: 503 with a retry.
    expect(((await refused.acquire("zz", signal).catch((x) => x)) as AppError).status).toBe(503);
  });

  test("llama.cpp holds every adapter it was launched with and selects by launch index", async () => {
    const rt = runtime();
    const lora = new ReplicaLora(LLAMA_LORA, known("a", "b"), Number.POSITIVE_INFINITY, rt.call);
    expect(await lora.acquire("b", signal)).toMatchObject({ hit: true, loaded: false });
    expect(rt.calls).toEqual([]);
    expect(lora.select({ model: "m" }, "b")).toEqual({ model: "m", lora: [{ id: 1, scale: 1 }] });
    expect(new ReplicaLora(VLLM_LORA, known("a"), 8, rt.call).select({ model: "m" }, "a")).toEqual({ model: "a" });
  });
});

describe("the dispatcher's choice for an adapter", () => {
  const target = (id: string, lora: ReplicaLora, inFlight = 0): Target => ({
    id,
    workloadId: "w",
    workerId: "k",
    capacity: 8,
    inFlight,
    lora,
    send: async () => new Response("{}"),
  });
  const adapter = (name: string, aware = true) => ({ kind: "sync" as const, adapter: { name, aware } });

  test("a request goes where its adapter is loaded, else to the adapter's own replica, the same every time", async () => {
    const d = new Dispatcher({ waitMs: 1000, maxWaiting: 10 });
    const [a, b] = [
      new ReplicaLora(VLLM_LORA, known("x", "y"), 8, runtime().call),
      new ReplicaLora(VLLM_LORA, known("x", "y"), 8, runtime().call),
    ];
    d.upsertTarget(target("r1", a, 0));
    d.upsertTarget(target("r2", b, 1));
    await b.acquire("x", signal);
    // r2 holds x: it takes it although r1 is less busy (within the load bound).
    const s1 = await d.acquire("w", undefined, adapter("x"));
    expect(s1.target.id).toBe("r2");
    s1.release();
    // Nobody holds y: its home on the ring, the same replica each time.
    const homes = new Set<string>();
    for (let i = 0; i < 5; i++) {
      const s = await d.acquire("w", undefined, adapter("y"));
      homes.add(s.target.id);
      s.release();
    }
    expect(homes.size).toBe(1);
    // Least-loaded routing ignores where adapters are.
    const s2 = await d.acquire("w", undefined, adapter("x", false));
    expect(s2.target.id).toBe("r1");
    s2.release();
  });

  test("when both hold the adapter, a conversation stays on the replica its prefix names (its earlier turns are cached there)", async () => {
    const d = new Dispatcher({ waitMs: 1000, maxWaiting: 10 });
    const loras = [0, 1, 2].map(() => new ReplicaLora(VLLM_LORA, known("x"), 8, runtime().call));
    for (const l of loras) await l.acquire("x", signal);
    loras.forEach((l, i) => d.upsertTarget(target(`r${i}`, l)));
    // For many conversations: each goes to its prefix's replica (the one prefix routing alone picks).
    for (let c = 0; c < 20; c++) {
      const affinity = [hash32(`conversation ${c}`)];
      const home = d.prefix.home("w", d.targetsOf("w"), affinity);
      for (let turn = 0; turn < 3; turn++) {
        const s = await d.acquire("w", undefined, { ...adapter("x"), affinity });
        expect(s.target.id).toBe(home!);
        s.release();
      }
    }
  });

  test("a replica holding the adapter but far busier than the rest hands the request on (bounded load)", async () => {
    const d = new Dispatcher({ waitMs: 1000, maxWaiting: 10 });
    const [a, b] = [
      new ReplicaLora(VLLM_LORA, known("x"), 8, runtime().call),
      new ReplicaLora(VLLM_LORA, known("x"), 8, runtime().call),
    ];
    await b.acquire("x", signal);
    d.upsertTarget(target("r1", a, 0));
    d.upsertTarget(target("r2", b, 6));
    const s = await d.acquire("w", undefined, adapter("x"));
    expect(s.target.id).toBe("r1");
  });
});

describe("the LoRA hit rate in the workload's series", () => {
  test("each 10 s bucket gets the share of adapter requests that found their adapter loaded; none is a gap", () => {
    const t0 = Date.UTC(2026, 0, 1, 12, 0, 0);
    const m = new MetricsStore(t0);
    m.sampleLora("w", { requests: 8, hits: 6 }, t0 + 1000);
    m.sampleLora("w", { requests: 8, hits: 6 }, t0 + BUCKET_MS + 1000);
    m.sampleLora("w", { requests: 10, hits: 7 }, t0 + 2 * BUCKET_MS + 1000);
    const points = m.points("w", 1, t0 + 3 * BUCKET_MS);
    expect(points.slice(-3).map((p) => p.lora_hit_rate)).toEqual([0.75, null, 0.5]);
  });
});
