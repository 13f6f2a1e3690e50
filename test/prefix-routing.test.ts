/**
 * Prefix-aware routing on a real server: a chat workload of three replicas (fake vLLM processes,
 * each with its own prefix cache) keeps every turn of a conversation on one replica, where the
 * later turns find their prefix cached; "least_loaded" scatters them; `/metrics` counts the routed
 * requests and the hits; `routing` is set, reset and refused at its field on both APIs.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { sseEvents, startServing, type Serving } from "./helpers/serving";
import { waitFor } from "./helpers/proc";
import { defaultRouting } from "../src/workloads/schema";

const SYSTEM = `You answer questions about the shop's catalogue. ${"Be precise, be brief, cite the page. ".repeat(40)}`;

let s: Serving;
let w: { id: string; slug: string; [k: string]: unknown };

/** The pid of the fake runtime that served request `rid` (from its FAKE_RECORD line). */
const served = (rid: string) =>
  s.events((e) => e.event === "request" && e.request_id === rid)[0] as unknown as
    | { pid: number; prompt_chars: number; cached_chars: number }
    | undefined;

/**
 * Runs conversation `c` for `turns` turns, one after another (streamed), returning the request ids;
 * `before(t)` runs before turn `t` is sent.
 */
async function converse(
  c: string,
  turns: number,
  before: (t: number) => Promise<unknown> = async () => {},
): Promise<string[]> {
  const messages: { role: string; content: string }[] = [{ role: "system", content: SYSTEM }];
  const rids: string[] = [];
  for (let t = 0; t < turns; t++) {
    await before(t);
    messages.push({ role: "user", content: `(${c}) question ${t}: which drawer holds part ${c}-${t}?` });
    const rid = `${c}-turn-${t}`;
    const r = await s.data(w.slug, "/v1/chat/completions", {
      body: { model: "chat-model", messages, max_tokens: 4, stream: true },
      headers: { "x-request-id": rid },
    });
    expect(r.status).toBe(200);
    const chunks = (await sseEvents(r)) as { choices?: { delta?: { content?: string } }[] }[];
    messages.push({ role: "assistant", content: chunks.map((e) => e.choices?.[0]?.delta?.content ?? "").join("") });
    rids.push(rid);
  }
  return rids;
}

/** The pids that served some requests (waiting for their record lines). */
const pidsOf = (rids: string[]) =>
  waitFor(() => (rids.every((r) => served(r)) ? rids.map((r) => served(r)!.pid) : undefined), {
    what: "record lines of the requests",
  });

/** A counter of `/metrics` for this workload. */
async function metric(name: string): Promise<number> {
  const text = await (await s.admin("/metrics")).text();
  const m = new RegExp(`^${name}\\{workload="${s.project}/${w.slug}"\\} (\\d+)$`, "m").exec(text);
  return m ? Number(m[1]) : NaN;
}

beforeAll(async () => {
  s = await startServing({
    FAKE_GPUS: "3x NVIDIA GeForce RTX 4090:24564",
    FAKE_PREFILL_MS_PER_KCHAR: "2",
    FAKE_DELAY_MS: "3000",
  });
  w = await s.createWorkload({
    name: "chat",
    backend: "vllm",
    model_name: "chat-model",
    config: { command: "vllm serve chat-model" },
    execution_params: { replicas: 3 },
  });
  await waitFor(
    async () =>
      (await s.workload(w.id)).assignments.filter((a) => a.state === "ready").length === 3 ? true : undefined,
    { what: "three ready replicas", timeoutMs: 60_000, detail: () => s.output() },
  );
  // Every replica takes requests once one-off prompts have reached all three processes.
  let n = 0;
  await waitFor(
    async () => {
      const rids = await converse(`probe${n++}`, 1);
      await pidsOf(rids);
      return new Set(
        s.events((e) => e.event === "request" && String(e.request_id).startsWith("probe")).map((e) => e.pid),
      ).size === 3
        ? true
        : undefined;
    },
    { what: "requests on all three replicas", timeoutMs: 30_000 },
  );
}, 120_000);

afterAll(() => s?.stop());

describe("routing between replicas", () => {
  test("a chat workload routes by prefix by default: each conversation stays on one replica, conversations spread, later turns are cached", async () => {
    const view = await (await s.admin(`/admin/workloads/${w.id}`)).json();
    expect(view).toMatchObject({ routing: "prefix", routing_is_default: true });
    const routed = await metric("inferd_prefix_routed_total");
    const hits = await metric("inferd_prefix_hits_total");
    const homes = new Set<number>();
    for (let c = 0; c < 10; c++) {
      const rids = await converse(`conv${c}`, 4);
      const pids = await pidsOf(rids);
      expect(new Set(pids).size).toBe(1);
      homes.add(pids[0]);
      // Each later turn starts with the earlier one's prompt: the replica has most of it cached.
      for (const [t, rid] of rids.entries()) {
        const line = served(rid)!;
        if (t === 0) expect(line.cached_chars).toBeLessThan(line.prompt_chars);
        else expect(line.cached_chars).toBeGreaterThan(served(rids[t - 1])!.prompt_chars - 64);
      }
    }
    expect(homes.size).toBeGreaterThan(1);
    // One at a time, nothing spills: every request went to the replica its ring point names.
    expect(await metric("inferd_prefix_routed_total")).toBe(routed + 40);
    expect(await metric("inferd_prefix_hits_total")).toBe(hits + 40);
  }, 120_000);

  test("routing least_loaded: a conversation's next turn goes to whichever replica is least busy, nothing is counted as routed by prefix", async () => {
    const r = await s.admin(`/admin/workloads/${w.id}`, { method: "PATCH", body: { routing: "least_loaded" } });
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ routing: "least_loaded", routing_is_default: false });
    const routed = await metric("inferd_prefix_routed_total");
    const busy = async () => (await s.workload(w.id)).assignments.reduce((n, a) => n + a.in_flight, 0);
    // Before the second turn another client's request (non-stream: FAKE_DELAY_MS long) holds the
    // replica every request goes to while all are idle: the one that took the first turn.
    const holders: Promise<Response>[] = [];
    const rids = await converse("scatter", 2, async (t) => {
      if (t === 0) return;
      holders.push(
        s.data(w.slug, "/v1/chat/completions", {
          body: { model: "chat-model", messages: [{ role: "user", content: "a slow one-off" }], max_tokens: 2 },
        }),
      );
      await waitFor(async () => ((await busy()) === 1 ? true : undefined), {
        what: "the other client's request in flight",
      });
    });
    expect(new Set(await pidsOf(rids)).size).toBe(2);
    expect(await metric("inferd_prefix_routed_total")).toBe(routed);
    expect((await Promise.all(holders)).map((h) => h.status)).toEqual([200]);
    const back = await s.admin(`/admin/workloads/${w.id}`, { method: "PATCH", body: { routing: null } });
    expect(await back.json()).toMatchObject({ routing: "prefix", routing_is_default: true });
  }, 120_000);

  test("routing is checked at its field on the admin API and the control plane; the default follows the task type", async () => {
    for (const routing of ["round_robin", 3, ""]) {
      const r = await s.admin(`/admin/workloads/${w.id}`, { method: "PATCH", body: { routing } });
      expect(r.status).toBe(400);
      expect((await r.json()).error).toMatchObject({ code: "validation_error", field: "routing" });
    }
    const api = (path: string, init: { method?: string; body?: unknown }) =>
      fetch(s.url + path, {
        method: init.method,
        headers: { authorization: `Bearer ${s.sdk}`, "content-type": "application/json" },
        body: JSON.stringify(init.body),
      });
    const bad = await api(`/api/workloads/${w.id}`, { method: "PATCH", body: { routing: "sticky" } });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error).toMatchObject({ field: "routing" });
    const ok = await api(`/api/workloads/${w.id}`, { method: "PATCH", body: { routing: "prefix" } });
    expect(ok.status).toBe(200);
    expect(await ok.json()).toMatchObject({ routing: "prefix", routing_is_default: false });
    expect([
      defaultRouting("text2text"),
      defaultRouting("image2text"),
      defaultRouting("embedding"),
      defaultRouting("text2image"),
    ]).toEqual(["prefix", "prefix", "least_loaded", "least_loaded"]);
  });
});
