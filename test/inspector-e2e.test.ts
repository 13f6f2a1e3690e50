import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { cleanup, waitFor } from "./helpers/proc";
import { servingPool, type Serving } from "./helpers/serving";

/**
 * The request inspector fed by real traffic (tracing off, as by default): a streamed chat through
 * the `openai` SDK shows up in its workload's list with the figures a user reads (key, model,
 * status, tokens, TTFT, replica, request id) and its timeline; with capture on, the request and the
 * streamed answer are kept and shown; with capture off, nothing of the bodies is kept.
 */
const pool = servingPool();
let s: Serving;
let wl: { id: string; slug: string; assignment: string };

beforeAll(async () => {
  s = await pool.serve({});
  const w = await s.createWorkload({ name: "inspected", backend: "vllm", model_name: "org/inspected", config: { command: "vllm serve org/inspected" } });
  const ready = await s.waitState(w.id);
  wl = { id: w.id, slug: w.slug, assignment: ready.assignments[0].id };
});
afterAll(async () => {
  await pool.stopAll();
  await cleanup();
});

type Row = { id: string; status: number; model: string; tokens_in: number; tokens_out: number; ttft_ms: number; total_ms: number; captured: boolean; key: { name: string } | null; replica: { assignment_id: string } | null };

async function chat(requestId: string, text: string): Promise<string> {
  const client = new OpenAI({ baseURL: `${s.url}/endpoint/${s.project}/${wl.slug}/v1`, apiKey: s.live, defaultHeaders: { "x-request-id": requestId } });
  const stream = await client.chat.completions.create({ model: "org/inspected", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: text }] });
  let answer = "";
  for await (const chunk of stream) answer += chunk.choices[0]?.delta?.content ?? "";
  return answer;
}

/** The request's row once the inspector's batch has been written. */
const rowOf = (id: string) =>
  waitFor(async () => {
    const r = await s.admin(`/admin/workloads/${wl.id}/requests?q=${encodeURIComponent(id)}`);
    return ((await r.json()) as { requests: Row[] }).requests.find((x) => x.id === id);
  }, { what: `request ${id} in the inspector`, timeoutMs: 30_000 });

describe("the request inspector with real traffic", () => {
  test("a streamed chat is listed with its figures and its timeline; no bodies while capture is off", async () => {
    expect(await chat("insp-off-1", "inspect me")).toContain("inspect me");
    const row = await rowOf("insp-off-1");
    expect(row).toMatchObject({ status: 200, model: "org/inspected", captured: false, key: { name: "live" }, replica: { assignment_id: wl.assignment } });
    expect(row.tokens_out).toBeGreaterThan(0);
    expect(row.ttft_ms).toBeLessThanOrEqual(row.total_ms);
    const detail = (await (await s.admin("/admin/requests/insp-off-1")).json()) as { spans: { name: string; start: number; end: number }[] };
    const names = detail.spans.map((x) => x.name);
    for (const n of ["auth", "queue", "dispatch", "upstream", "ttft", "stream", "meter"]) expect(names).toContain(n);
    for (const sp of detail.spans) expect(sp.end).toBeGreaterThanOrEqual(sp.start);
    expect((await s.admin("/admin/requests/insp-off-1/bodies")).status).toBe(404);
  }, 60_000);

  test("with capture on, the request and the streamed answer are kept; turned off, the next one is not", async () => {
    const until = new Date(Date.now() + 15 * 60_000).toISOString();
    const on = await s.admin(`/admin/workloads/${wl.id}`, { method: "PATCH", body: { capture_until: until } });
    expect(on.status).toBe(200);
    expect(await chat("insp-cap-1", "keep this body")).toContain("keep this body");
    expect((await rowOf("insp-cap-1")).captured).toBe(true);
    const bodies = (await (await s.admin("/admin/requests/insp-cap-1/bodies")).json()) as { request: { data: string; encoding: string }; response: { data: string; type: string } };
    expect(bodies.request.encoding).toBe("text");
    expect(JSON.parse(bodies.request.data).messages[0].content).toBe("keep this body");
    expect(bodies.response.type).toContain("text/event-stream");
    expect(bodies.response.data).toContain("data: ");
    // The answer as it was streamed: its events put back together say what the client read.
    const said = bodies.response.data.split("\n").filter((l) => l.startsWith("data: {")).map((l) => JSON.parse(l.slice(6)).choices[0]?.delta?.content ?? "").join("");
    expect(said).toBe("You said: keep this body");
    expect(bodies.response.data.trimEnd().endsWith("data: [DONE]")).toBe(true);

    expect((await s.admin(`/admin/workloads/${wl.id}`, { method: "PATCH", body: { capture_until: null } })).status).toBe(200);
    await chat("insp-cap-2", "forget this body");
    expect((await rowOf("insp-cap-2")).captured).toBe(false);
    expect((await s.admin("/admin/requests/insp-cap-2/bodies")).status).toBe(404);
  }, 60_000);
});
