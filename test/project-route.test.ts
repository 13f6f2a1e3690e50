import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { ChatOpenAI, OpenAIEmbeddings } from "@langchain/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import { generateText, streamText } from "ai";
import { cleanup, waitFor } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";

/**
 * One base URL for every model of a project (`/endpoint/<project>/v1`): requests routed by `model`
 * (slug, model name, alias), pools, fallbacks, per-key model lists, request ids and retry hints,
 * called with the clients people use (openai, the AI SDK, LangChain, Anthropic's SDK).
 */
let s: Serving;
let alpha: { id: string; slug: string };
let beta: { id: string; slug: string };
let embed: { id: string; slug: string };
let base: string;

/** Counts the HTTP requests a client makes (to see whether an SDK retried). */
function countingFetch(): { calls: number; fetch: typeof fetch } {
  const counter: { calls: number; fetch: typeof fetch } = { calls: 0, fetch };
  counter.fetch = ((url: RequestInfo | URL, init?: RequestInit) => (counter.calls++, fetch(url, init))) as typeof fetch;
  return counter;
}

/** Waits until a workload's counted requests reach `n` (usage is flushed in the background). */
const requestsReach = (id: string, n: number) =>
  waitFor(async () => ((await s.workload(id)).usage.requests >= n ? true : undefined), {
    what: `${n} requests counted on ${id}`,
  });

beforeAll(async () => {
  s = await startServing({ FAKE_DELAY_MS: "30" });
  alpha = await s.createWorkload({
    name: "alpha",
    backend: "vllm",
    model_name: "org/alpha",
    aliases: ["fast"],
    config: { command: "vllm serve org/alpha" },
  });
  beta = await s.createWorkload({
    name: "beta",
    backend: "vllm",
    model_name: "org/beta",
    config: { command: "vllm serve org/beta --enable-log-requests" },
  });
  embed = await s.createWorkload({
    name: "embed",
    task_type: "embedding",
    backend: "vllm",
    model_name: "org/embed",
    config: { command: "vllm serve org/embed" },
  });
  await Promise.all([alpha, beta, embed].map((w) => s.waitState(w.id)));
  base = `${s.url}/endpoint/${s.project}/v1`;
});
afterAll(async () => {
  await s.stop();
  await cleanup();
});

describe("routing by model on the project base URL", () => {
  test("openai: slug, model name and alias each reach their workload; usage lands on it", async () => {
    const openai = new OpenAI({ baseURL: base, apiKey: s.live, maxRetries: 0 });
    const before = (await s.workload(beta.id)).usage.requests;
    const byName = await openai.chat.completions.create({
      model: "org/beta",
      messages: [{ role: "user", content: "to beta" }],
    });
    expect(byName.model).toBe("org/beta");
    expect(byName.choices[0].message.content).toBe("You said: to beta");
    const bySlug = await openai.chat.completions.create({
      model: alpha.slug,
      messages: [{ role: "user", content: "by slug" }],
    });
    expect(bySlug.model).toBe("org/alpha");
    const byAlias = await openai.chat.completions.create({
      model: "fast",
      messages: [{ role: "user", content: "by alias" }],
    });
    expect(byAlias.model).toBe("org/alpha");
    const stream = await openai.chat.completions.create({
      model: "fast",
      stream: true,
      messages: [{ role: "user", content: "streamed here" }],
    });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? "";
    expect(text).toBe("You said: streamed here");
    await requestsReach(beta.id, before + 1);
  });

  test("models.list shows what the key may call; an endpoint-scoped key sees and reaches only its endpoints", async () => {
    const openai = new OpenAI({ baseURL: base, apiKey: s.live, maxRetries: 0 });
    const ids = [];
    for await (const m of openai.models.list()) ids.push(m.id);
    expect(ids.sort()).toEqual(["fast", "org/alpha", "org/beta", "org/embed"]);
    const scoped = (
      await (
        await s.admin(`/admin/projects/${s.project}/keys`, {
          body: { name: "beta only", type: "live", scope: "endpoints", endpoints: [`${s.project}/${beta.slug}`] },
        })
      ).json()
    ).secret;
    const narrow = new OpenAI({ baseURL: base, apiKey: scoped, maxRetries: 0 });
    const mine = [];
    for await (const m of narrow.models.list()) mine.push(m.id);
    expect(mine).toEqual(["org/beta"]);
    const err = await narrow.chat.completions
      .create({ model: "org/alpha", messages: [{ role: "user", content: "x" }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.NotFoundError);
    expect(err.code).toBe("model_not_found");
    expect(err.message).toContain('"org/beta"');
    expect(err.message).not.toContain('org/alpha",');
    // "default" means the key's only model.
    const only = await narrow.chat.completions.create({
      model: "default",
      messages: [{ role: "user", content: "the one" }],
    });
    expect(only.model).toBe("org/beta");
  });

  test("an unknown model is 404 model_not_found naming the models the key may use; never retried", async () => {
    const counter = countingFetch();
    const openai = new OpenAI({ baseURL: base, apiKey: s.live, fetch: counter.fetch });
    const err = await openai.chat.completions
      .create({ model: "gpt-4o", messages: [{ role: "user", content: "x" }] })
      .catch((e) => e);
    expect(err.status).toBe(404);
    expect(err.code).toBe("model_not_found");
    expect(err.message).toContain('"org/alpha"');
    expect(err.message).toContain('"fast"');
    expect(counter.calls).toBe(1);
  });

  test("embeddings through LangChain's OpenAIEmbeddings, chat through ChatOpenAI and the AI SDK's openai-compatible provider", async () => {
    const embeddings = new OpenAIEmbeddings({ model: "org/embed", apiKey: s.live, configuration: { baseURL: base } });
    const vectors = await embeddings.embedDocuments(["one", "two"]);
    expect(vectors).toHaveLength(2);
    expect(vectors[0].length).toBeGreaterThan(0);
    const chat = new ChatOpenAI({ model: "fast", apiKey: s.live, configuration: { baseURL: base }, maxRetries: 0 });
    const answer = await chat.invoke("hello langchain");
    expect(answer.content).toBe("You said: hello langchain");
    expect(answer.usage_metadata?.input_tokens).toBeGreaterThan(0);
    const provider = createOpenAICompatible({ name: "inferd", baseURL: base, apiKey: s.live, includeUsage: true });
    const got = await generateText({ model: provider("org/beta"), prompt: "hello ai sdk" });
    expect(got.text).toBe("You said: hello ai sdk");
    const streamed = streamText({ model: provider(alpha.slug), prompt: "stream ai sdk" });
    let text = "";
    for await (const part of streamed.textStream) text += part;
    expect(text).toBe("You said: stream ai sdk");
    expect((await streamed.usage).outputTokens).toBeGreaterThan(0);
  });

  test("the Anthropic SDK on the project base URL: routed by model, request id set", async () => {
    const anthropic = new Anthropic({ baseURL: `${s.url}/endpoint/${s.project}`, apiKey: s.live, maxRetries: 0 });
    const msg = await anthropic.messages.create({
      model: "fast",
      max_tokens: 50,
      messages: [{ role: "user", content: "hi claude sdk" }],
    });
    expect(msg.content[0]).toMatchObject({ type: "text", text: "You said: hi claude sdk" });
    expect(msg._request_id).toMatch(/^req_/);
    const err = await anthropic.messages
      .create({ model: "nope", max_tokens: 5, messages: [{ role: "user", content: "x" }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.NotFoundError);
    expect(err.error).toMatchObject({ type: "error", error: { type: "not_found_error" } });
    // Any path under /v1/messages answers in Anthropic's shape, with x-api-key as with Bearer.
    for (const path of [
      `/endpoint/${s.project}/v1/messages/batches`,
      `/endpoint/${s.project}/${alpha.slug}/v1/messages/batches`,
    ]) {
      const r = await fetch(s.url + path, {
        method: "POST",
        headers: { "x-api-key": s.live, "content-type": "application/json" },
        body: "{}",
      });
      expect(r.status).toBe(404);
      expect(await r.json()).toMatchObject({ type: "error", error: { type: "not_found_error" } });
    }
  });
});

describe("pools and fallbacks", () => {
  test("workloads answering to the same name are one pool: concurrent requests use both", async () => {
    const [p1, p2] = await Promise.all(
      ["pool-1", "pool-2"].map((name) =>
        s.createWorkload({
          name,
          backend: "vllm",
          model_name: "org/pooled",
          config: { command: "vllm serve org/pooled" },
        }),
      ),
    );
    await Promise.all([p1, p2].map((w) => s.waitState(w.id)));
    const openai = new OpenAI({ baseURL: base, apiKey: s.live, maxRetries: 0 });
    await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        openai.chat.completions.create({ model: "org/pooled", messages: [{ role: "user", content: `n${i}` }] }),
      ),
    );
    let u1 = 0;
    let u2 = 0;
    await waitFor(
      async () => {
        [u1, u2] = await Promise.all([p1, p2].map(async (w) => (await s.workload(w.id)).usage.requests));
        return u1 + u2 === 8 ? true : undefined;
      },
      { what: "8 requests counted over the pool" },
    );
    expect(u1).toBeGreaterThan(0);
    expect(u2).toBeGreaterThan(0);
  });

  test("a fallback takes over when the first workload is stopped; the answer comes from the fallback", async () => {
    const main = await s.createWorkload({
      name: "main",
      backend: "vllm",
      model_name: "org/main",
      fallbacks: [beta.slug],
      config: { command: "vllm serve org/main" },
    });
    await s.waitState(main.id);
    const openai = new OpenAI({ baseURL: base, apiKey: s.live, maxRetries: 0 });
    expect(
      (await openai.chat.completions.create({ model: "org/main", messages: [{ role: "user", content: "first" }] }))
        .model,
    ).toBe("org/main");
    expect((await s.admin(`/admin/workloads/${main.id}/stop`, { method: "POST" })).status).toBe(200);
    await waitFor(
      async () => ((await s.workload(main.id)).assignments.every((a) => a.state !== "ready") ? true : undefined),
      { what: "main stopped" },
    );
    const got = await openai.chat.completions.create({
      model: "org/main",
      messages: [{ role: "user", content: "covered" }],
    });
    expect(got.model).toBe("org/beta");
    expect(got.choices[0].message.content).toBe("You said: covered");
    // Streams fall back too while nothing has been sent.
    const stream = await openai.chat.completions.create({
      model: "org/main",
      stream: true,
      messages: [{ role: "user", content: "still covered" }],
    });
    let text = "";
    for await (const c of stream) text += c.choices[0]?.delta?.content ?? "";
    expect(text).toBe("You said: still covered");
    // The per-workload base URL names its workload: no fallback there.
    const direct = await s.data(main.slug, "/v1/chat/completions", {
      body: { messages: [{ role: "user", content: "x" }] },
    });
    expect(direct.status).toBe(503);
  });

  test("aliases are unique in the project, fallbacks name other workloads, v1 and api are not slugs", async () => {
    const taken = await s.admin(`/admin/projects/${s.project}/workloads`, {
      body: {
        name: "dup",
        backend: "vllm",
        model_name: "org/dup",
        aliases: ["fast"],
        config: { command: "vllm serve org/dup" },
      },
    });
    expect(taken.status).toBe(409);
    expect((await taken.json()).error).toMatchObject({ code: "alias_taken", field: "aliases.0" });
    const slugAlias = await s.admin(`/admin/projects/${s.project}/workloads`, {
      body: {
        name: "dup",
        backend: "vllm",
        model_name: "org/dup",
        aliases: [beta.slug],
        config: { command: "vllm serve org/dup" },
      },
    });
    expect(slugAlias.status).toBe(409);
    const badFallback = await s.admin(`/admin/workloads/${alpha.id}`, {
      method: "PATCH",
      body: { fallbacks: ["no-such"] },
    });
    expect(badFallback.status).toBe(400);
    expect((await badFallback.json()).error).toMatchObject({ code: "validation_error", field: "fallbacks.0" });
    const self = await s.admin(`/admin/workloads/${alpha.id}`, { method: "PATCH", body: { fallbacks: [alpha.slug] } });
    expect(self.status).toBe(400);
    for (const slug of ["v1", "api"]) {
      const r = await s.admin(`/admin/projects/${s.project}/workloads`, {
        body: { name: "x", slug, backend: "vllm", model_name: "x", config: { command: "vllm serve x" } },
      });
      expect(r.status).toBe(400);
    }
    const named = await s.createWorkload({
      name: "V1",
      backend: "vllm",
      model_name: "org/v",
      config: { command: "vllm serve org/v" },
      execution_policy: "autoscaling",
      execution_params: { min_replicas: 0, max_replicas: 1 },
    });
    expect(named.slug).not.toBe("v1");
    const ok = await s.admin(`/admin/workloads/${alpha.id}`, { method: "PATCH", body: { aliases: ["fast", "quick"] } });
    expect(ok.status).toBe(200);
    expect((await ok.json()).aliases).toEqual(["fast", "quick"]);
  });
});

describe("request ids and retry hints", () => {
  test("every answer carries x-request-id; the SDK reports it; a client's own id is kept and reaches the runtime's log", async () => {
    const openai = new OpenAI({ baseURL: base, apiKey: s.live, maxRetries: 0 });
    const got = await openai.chat.completions.create({
      model: "org/beta",
      messages: [{ role: "user", content: "id please" }],
    });
    expect(got._request_id).toMatch(/^req_[0-9a-f]{32}$/);
    const mine = "trace-1234.abc";
    const r = await fetch(`${base}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${s.live}`, "content-type": "application/json", "x-request-id": mine },
      body: JSON.stringify({ model: "org/beta", messages: [{ role: "user", content: "x" }] }),
    });
    expect(r.status).toBe(200);
    expect(r.headers.get("x-request-id")).toBe(mine);
    expect(s.events((e) => e.event === "request" && e.request_id === mine)).toHaveLength(1);
    const logs = await (await s.admin(`/admin/workloads/${beta.id}/logs`)).json();
    expect(logs.replicas.map((x: { text: string }) => x.text).join("")).toContain(`Received request chatcmpl-${mine}`);
    const bad = await fetch(`${base}/models`, {
      headers: { authorization: `Bearer ${s.live}`, "x-request-id": "has spaces in it" },
    });
    expect(bad.headers.get("x-request-id")).toMatch(/^req_/);
    const unauth = await fetch(`${base}/models`);
    expect(unauth.status).toBe(401);
    expect(unauth.headers.get("x-request-id")).toMatch(/^req_/);
    expect(unauth.headers.get("x-should-retry")).toBe("false");
  });

  test("a job keeps its submission's request id; an admin change's audit entry keeps its request id", async () => {
    const r = await fetch(`${s.url}/endpoint/${s.project}/${beta.slug}/jobs`, {
      method: "POST",
      headers: { authorization: `Bearer ${s.live}`, "content-type": "application/json", "x-request-id": "job-req-1" },
      body: JSON.stringify({ kind: "chat", body: { messages: [{ role: "user", content: "job" }] } }),
    });
    expect(r.status).toBe(202);
    const { job_id } = await r.json();
    const job = await waitFor(
      async () => {
        const j = await (await s.data(beta.slug, `/jobs/${job_id}`)).json();
        return j.status === "completed" ? j : undefined;
      },
      { what: "job done" },
    );
    expect(job.request_id).toBe("job-req-1");
    expect(s.events((e) => e.event === "request" && e.request_id === "job-req-1")).toHaveLength(1);
    const patch = await fetch(`${s.url}/admin/workloads/${beta.id}`, {
      method: "PATCH",
      headers: {
        authorization: `Bearer ${s.adminToken}`,
        "content-type": "application/json",
        "x-request-id": "admin-change-7",
      },
      body: JSON.stringify({ description: "changed" }),
    });
    expect(patch.status).toBe(200);
    const { entries } = await (await s.admin(`/admin/audit?action=workload.update`)).json();
    expect(entries.find((e: { request_id: string }) => e.request_id === "admin-change-7")).toBeDefined();
  });

  test("a 409 (endpoint switched off) is not retried by either SDK; 429/503 say retry", async () => {
    expect(
      (await s.admin(`/admin/workloads/${alpha.id}/endpoints`, { method: "PATCH", body: { chat: false } })).status,
    ).toBe(200);
    try {
      const o = countingFetch();
      const openai = new OpenAI({ baseURL: base, apiKey: s.live, fetch: o.fetch });
      const e1 = await openai.chat.completions
        .create({ model: "org/alpha", messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(e1.status).toBe(409);
      expect(o.calls).toBe(1);
      const a = countingFetch();
      const anthropic = new Anthropic({
        baseURL: `${s.url}/endpoint/${s.project}/${alpha.slug}`,
        apiKey: s.live,
        fetch: a.fetch,
      });
      const e2 = await anthropic.messages
        .create({ model: "default", max_tokens: 5, messages: [{ role: "user", content: "x" }] })
        .catch((e) => e);
      expect(e2.status).toBe(409);
      expect(a.calls).toBe(1);
    } finally {
      await s.admin(`/admin/workloads/${alpha.id}/endpoints`, { method: "PATCH", body: { chat: true } });
    }
    const stopped = await s.createWorkload({
      name: "parked",
      backend: "vllm",
      model_name: "org/parked",
      config: { command: "vllm serve org/parked" },
    });
    await s.admin(`/admin/workloads/${stopped.id}/stop`, { method: "POST" });
    const r = await s.data(stopped.slug, "/v1/chat/completions", {
      body: { messages: [{ role: "user", content: "x" }] },
    });
    expect(r.status).toBe(503);
    expect(r.headers.get("x-should-retry")).toBe("true");
    expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
  });
});
