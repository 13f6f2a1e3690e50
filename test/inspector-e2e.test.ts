import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";
import { Ollama } from "ollama";
import { cleanup, waitFor } from "./helpers/proc";
import { servingPool, type Serving } from "./helpers/serving";

/**
 * The request inspector fed by real traffic (tracing off, as by default): a streamed chat through
 * the `openai` SDK shows up in its workload's list with the figures a user reads (key, model,
 * status, tokens, TTFT, replica, request id) and its timeline; with capture on, the request and the
 * streamed answer are kept and shown (Ollama's API's answers too); with capture off, nothing of the bodies is kept.
 */
const pool = servingPool();
let s: Serving;
let wl: { id: string; slug: string; assignment: string; port: string };

beforeAll(async () => {
  s = await pool.serve({});
  const w = await s.createWorkload({
    name: "inspected",
    backend: "vllm",
    model_name: "org/inspected",
    config: { command: "vllm serve org/inspected" },
  });
  const ready = await s.waitState(w.id);
  wl = {
    id: w.id,
    slug: w.slug,
    assignment: ready.assignments[0].id,
    port: new URL(ready.assignments[0].base_url!).port,
  };
});
afterAll(async () => {
  await pool.stopAll();
  await cleanup();
});

type Row = {
  id: string;
  request_id: string | null;
  route: string;
  status: number;
  error_code: string | null;
  model: string;
  tokens_in: number;
  tokens_out: number;
  ttft_ms: number;
  total_ms: number;
  captured: boolean;
  key: { name: string } | null;
  replica: { assignment_id: string } | null;
};

async function chat(requestId: string, text: string): Promise<string> {
  const client = new OpenAI({
    baseURL: `${s.url}/endpoint/${s.project}/${wl.slug}/v1`,
    apiKey: s.live,
    defaultHeaders: { "x-request-id": requestId },
  });
  const stream = await client.chat.completions.create({
    model: "org/inspected",
    stream: true,
    stream_options: { include_usage: true },
    messages: [{ role: "user", content: text }],
  });
  let answer = "";
  for await (const chunk of stream) answer += chunk.choices[0]?.delta?.content ?? "";
  return answer;
}

/** The request's row once the inspector's batch has been written. */
const rowOf = (id: string, workloadId = wl.id) =>
  waitFor(
    async () => {
      const r = await s.admin(`/admin/workloads/${workloadId}/requests?q=${encodeURIComponent(id)}`);
      // Records are keyed on inferd's own id; the client's x-request-id is kept beside it and searched.
      return ((await r.json()) as { requests: Row[] }).requests.find((x) => x.request_id === id);
    },
    { what: `request ${id} in the inspector`, timeoutMs: 30_000 },
  );

describe("the request inspector with real traffic", () => {
  test("a streamed chat is listed with its figures and its timeline; no bodies while capture is off", async () => {
    expect(await chat("insp-off-1", "inspect me")).toContain("inspect me");
    const row = await rowOf("insp-off-1");
    expect(row).toMatchObject({
      status: 200,
      model: "org/inspected",
      captured: false,
      key: { name: "live" },
      replica: { assignment_id: wl.assignment },
    });
    expect(row.tokens_out).toBeGreaterThan(0);
    expect(row.ttft_ms).toBeLessThanOrEqual(row.total_ms);
    expect(row.id).toMatch(/^req_[0-9a-f]{32}$/);
    const detail = (await (await s.admin(`/admin/requests/${row.id}`)).json()) as {
      spans: { name: string; start: number; end: number }[];
    };
    const names = detail.spans.map((x) => x.name);
    for (const n of ["auth", "queue", "dispatch", "upstream", "ttft", "stream", "meter"]) expect(names).toContain(n);
    for (const sp of detail.spans) expect(sp.end).toBeGreaterThanOrEqual(sp.start);
    expect((await s.admin(`/admin/requests/${row.id}/bodies`)).status).toBe(404);
  }, 60_000);

  test("Messages and Responses requests refused before any runtime answered are listed with their status and code", async () => {
    // A runtime told to listen on a port another runtime holds never gets ready: the workload fails.
    const broken = await s.createWorkload({
      name: "broken",
      backend: "vllm",
      model_name: "org/broken",
      config: { command: `vllm serve org/broken --port ${wl.port}` },
    });
    await s.waitState(broken.id, "failed");
    const anthropic = new Anthropic({
      baseURL: `${s.url}/endpoint/${s.project}/${broken.slug}`,
      apiKey: s.live,
      maxRetries: 0,
      defaultHeaders: { "x-request-id": "insp-msg-503" },
    });
    const refused = await anthropic.messages
      .create({ model: "org/broken", max_tokens: 8, messages: [{ role: "user", content: "hi" }] })
      .catch((e) => e);
    expect(refused).toBeInstanceOf(Anthropic.APIError);
    expect(refused.status).toBe(503);
    const openai = new OpenAI({
      baseURL: `${s.url}/endpoint/${s.project}/${broken.slug}/v1`,
      apiKey: s.live,
      maxRetries: 0,
      defaultHeaders: { "x-request-id": "insp-resp-503" },
    });
    const refusedToo = await openai.responses.create({ model: "org/broken", input: "hi" }).catch((e) => e);
    expect(refusedToo).toBeInstanceOf(OpenAI.APIError);
    expect(refusedToo.status).toBe(503);
    expect(await rowOf("insp-msg-503", broken.id)).toMatchObject({
      route: "POST /v1/messages",
      status: 503,
      error_code: "workload_unavailable",
      tokens_out: 0,
      key: { name: "live" },
    });
    expect(await rowOf("insp-resp-503", broken.id)).toMatchObject({
      route: "POST /v1/responses",
      status: 503,
      error_code: "workload_unavailable",
      tokens_out: 0,
    });
  }, 60_000);

  test("with capture on, the request and the streamed answer are kept; turned off, the next one is not", async () => {
    const until = new Date(Date.now() + 15 * 60_000).toISOString();
    const on = await s.admin(`/admin/workloads/${wl.id}`, { method: "PATCH", body: { capture_until: until } });
    expect(on.status).toBe(200);
    expect(await chat("insp-cap-1", "keep this body")).toContain("keep this body");
    const cap1 = await rowOf("insp-cap-1");
    expect(cap1.captured).toBe(true);
    const bodies = (await (await s.admin(`/admin/requests/${cap1.id}/bodies`)).json()) as {
      request: { data: string; encoding: string };
      response: { data: string; type: string };
    };
    expect(bodies.request.encoding).toBe("text");
    expect(JSON.parse(bodies.request.data).messages[0].content).toBe("keep this body");
    expect(bodies.response.type).toContain("text/event-stream");
    expect(bodies.response.data).toContain("data: ");
    // The answer as it was streamed: its events put back together say what the client read.
    const said = bodies.response.data
      .split("\n")
      .filter((l) => l.startsWith("data: {"))
      .map((l) => JSON.parse(l.slice(6)).choices[0]?.delta?.content ?? "")
      .join("");
    expect(said).toBe("You said: keep this body");
    expect(bodies.response.data.trimEnd().endsWith("data: [DONE]")).toBe(true);

    // Ollama's API too: the NDJSON stream as the client read it, and a whole JSON answer.
    const ollama = new Ollama({
      host: `${s.url}/endpoint/${s.project}`,
      headers: { Authorization: `Bearer ${s.live}`, "x-request-id": "insp-cap-ollama" },
    });
    let streamed = "";
    for await (const part of await ollama.chat({
      model: "org/inspected",
      stream: true,
      messages: [{ role: "user", content: "keep ollama" }],
    }))
      streamed += part.message.content;
    expect(streamed).toBe("You said: keep ollama");
    const capOllama = await rowOf("insp-cap-ollama");
    expect(capOllama.captured).toBe(true);
    const nd = (await (await s.admin(`/admin/requests/${capOllama.id}/bodies`)).json()) as typeof bodies;
    expect(nd.response.type).toBe("application/x-ndjson");
    const lines = nd.response.data
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.message?.content ?? "").join("")).toBe(streamed);
    expect(lines.at(-1).done).toBe(true);
    const whole = new Ollama({
      host: `${s.url}/endpoint/${s.project}`,
      headers: { Authorization: `Bearer ${s.live}`, "x-request-id": "insp-cap-ollama-2" },
    });
    const answer = await whole.generate({ model: "org/inspected", prompt: "keep generate", stream: false });
    const capOllama2 = await rowOf("insp-cap-ollama-2");
    expect(capOllama2.captured).toBe(true);
    const kept = (await (await s.admin(`/admin/requests/${capOllama2.id}/bodies`)).json()) as typeof bodies;
    expect(kept.response.type).toContain("application/json");
    expect(JSON.parse(kept.response.data)).toMatchObject({
      model: "org/inspected",
      response: answer.response,
      done: true,
    });

    expect(
      (await s.admin(`/admin/workloads/${wl.id}`, { method: "PATCH", body: { capture_until: null } })).status,
    ).toBe(200);
    await chat("insp-cap-2", "forget this body");
    const cap2 = await rowOf("insp-cap-2");
    expect(cap2.captured).toBe(false);
    expect((await s.admin(`/admin/requests/${cap2.id}/bodies`)).status).toBe(404);
  }, 60_000);
});
