import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import { ChatAnthropic } from "@langchain/anthropic";
import { join } from "node:path";
import { cleanup, tempDir, waitFor } from "./helpers/proc";
import { writeTinyGguf } from "./fixtures/gguf";
import { startServing, type Serving } from "./helpers/serving";
import { Dispatcher, type Upstream } from "../src/dispatch/queue";
import { countPromptTokens } from "../src/dataplane/anthropic-count";

/**
 * Anthropic extras on both base URLs, with the official SDK and LangChain's ChatAnthropic:
 * `messages.countTokens` counted by the runtime's tokenizer (vLLM's chat-aware /tokenize,
 * llama-server's /apply-template + /tokenize) and equal to the usage a real request reports; every
 * error under /v1/messages in Anthropic's shape; a translated stream's `message_start` carrying
 * the real input tokens.
 */
let s: Serving;
let vllm: { id: string; slug: string };
let llama: { id: string; slug: string };
const workloadBase = (w: string) => `${s.url}/endpoint/${s.project}/${w}`;
const projectBase = () => `${s.url}/endpoint/${s.project}`;
const client = (baseURL: string, apiKey = s.live) => new Anthropic({ baseURL, apiKey, maxRetries: 0 });
const ask = {
  messages: [{ role: "user" as const, content: "count these five words please" }],
  system: "be brief today",
};

/** A small data-plane body limit, so a 413 needs no large upload. */
const BODY_LIMIT = 1 << 20;

beforeAll(async () => {
  s = await startServing({ INFERD_MAX_DATA_BODY_BYTES: String(BODY_LIMIT) });
  vllm = await s.createWorkload({
    name: "qwen",
    backend: "vllm",
    model_name: "Qwen/Qwen3-8B",
    aliases: ["claude-local"],
    config: { command: "vllm serve Qwen/Qwen3-8B" },
  });
  const gguf = join(tempDir("gguf"), "tiny.gguf");
  writeTinyGguf(gguf);
  llama = await s.createWorkload({
    name: "tiny",
    backend: "llamacpp",
    model_name: "tiny",
    config: { command: `llama-server -m '${gguf}' -a tiny` },
  });
  await Promise.all([s.waitState(vllm.id), s.waitState(llama.id)]);
});
afterAll(async () => {
  await s.stop();
  await cleanup();
});

describe("messages.countTokens", () => {
  test("per-workload base: vLLM and llama-server counts equal the input tokens a real request reports", async () => {
    for (const w of [vllm, llama]) {
      const c = client(workloadBase(w.slug));
      const counted = await c.messages.countTokens({ model: "default", ...ask });
      const sent = await c.messages.create({ model: "default", max_tokens: 20, ...ask });
      expect(counted.input_tokens).toBe(8);
      expect(counted.input_tokens).toBe(sent.usage.input_tokens);
    }
    const tools = [
      { name: "get_weather", input_schema: { type: "object" as const, properties: { city: { type: "string" } } } },
    ];
    expect(
      (await client(workloadBase(llama.slug)).messages.countTokens({ model: "tiny", tools, ...ask })).input_tokens,
    ).toBe(8);
    const tokenized = s.events((e) => e.event === "request" && e.path === "/tokenize");
    expect(tokenized.length).toBeGreaterThanOrEqual(3);
    expect(s.events((e) => e.event === "request" && e.path === "/apply-template").length).toBeGreaterThanOrEqual(2);
  });

  test("project base: routed by model name, alias or slug; an unknown model is 404 not_found_error naming the models", async () => {
    const c = client(projectBase());
    for (const model of ["Qwen/Qwen3-8B", "claude-local", "tiny", llama.slug])
      expect((await c.messages.countTokens({ model, ...ask })).input_tokens).toBe(8);
    const e = await c.messages.countTokens({ model: "claude-opus-4", ...ask }).catch((x) => x);
    expect(e).toBeInstanceOf(Anthropic.NotFoundError);
    expect(e.error).toMatchObject({ type: "error", error: { type: "not_found_error" } });
    expect(e.error.error.message).toContain("claude-local");
    expect(e.headers.get("x-should-retry")).toBe("false");
  });

  test("no messages, bad JSON, a wrong model, a key of the wrong type, an untranslatable block: all in Anthropic's shape", async () => {
    const c = client(workloadBase(vllm.slug));
    const noMessages = await fetch(`${workloadBase(vllm.slug)}/v1/messages/count_tokens`, {
      method: "POST",
      headers: { "x-api-key": s.live, "content-type": "application/json" },
      body: JSON.stringify({ model: "default" }),
    });
    expect(noMessages.status).toBe(400);
    expect(await noMessages.json()).toMatchObject({
      type: "error",
      error: { type: "invalid_request_error", message: expect.stringContaining("messages") },
    });
    const notJson = await fetch(`${workloadBase(vllm.slug)}/v1/messages/count_tokens`, {
      method: "POST",
      headers: { "x-api-key": s.live },
      body: "{nope",
    });
    expect(notJson.status).toBe(400);
    expect((await notJson.json()).type).toBe("error");
    const wrong = await c.messages.countTokens({ model: "gpt-4o", ...ask }).catch((x) => x);
    expect(wrong).toBeInstanceOf(Anthropic.BadRequestError);
    expect(wrong.error.error.message).toStartWith("model is not available on this endpoint");
    const forbidden = await client(workloadBase(vllm.slug), s.sdk)
      .messages.countTokens({ model: "default", ...ask })
      .catch((x) => x);
    expect(forbidden.status).toBe(403);
    expect(forbidden.error.error.type).toBe("permission_error");
    const pdf = await c.messages
      .countTokens({
        model: "default",
        ...ask,
        messages: [
          {
            role: "user",
            content: [
              { type: "document", source: { type: "base64", media_type: "application/pdf", data: "JVBERi0=" } },
            ],
          },
        ],
      })
      .catch((x) => x);
    expect(pdf.status).toBe(400);
    expect(pdf.error.error.message).toContain("plain-text documents");
  });
});

describe("errors under /v1/messages", () => {
  test("401, 413, 429, a GET, and a runtime's error relayed: Anthropic's shape on both bases", async () => {
    for (const base of [workloadBase(vllm.slug), projectBase()]) {
      const noKey = await fetch(`${base}/v1/messages/count_tokens`, { method: "POST", body: "{}" });
      expect(noKey.status).toBe(401);
      expect(await noKey.json()).toMatchObject({ type: "error", error: { type: "authentication_error" } });
      const get = await fetch(`${base}/v1/messages`, { headers: { "x-api-key": s.live } });
      expect(get.status).toBe(404);
      expect(await get.json()).toMatchObject({ type: "error", error: { type: "not_found_error" } });
    }
    for (const path of ["/v1/messages", "/v1/messages/count_tokens"]) {
      const huge = await fetch(`${projectBase()}${path}`, {
        method: "POST",
        headers: { "x-api-key": s.live, "content-type": "application/json" },
        body: JSON.stringify({ model: "tiny", padding: "x".repeat(BODY_LIMIT) }),
      });
      expect(huge.status).toBe(413);
      expect(await huge.json()).toMatchObject({ type: "error", error: { type: "request_too_large" } });
    }
    // The runtime's own error (vLLM without its tool flags): status and message relayed, Anthropic's type.
    const tools = [{ name: "get_weather", input_schema: { type: "object" as const, properties: {} } }];
    const refused = await client(projectBase())
      .messages.create({ model: "claude-local", max_tokens: 10, tools, ...ask })
      .catch((x) => x);
    expect(refused.status).toBe(400);
    expect(refused.error).toMatchObject({
      type: "error",
      error: { type: "invalid_request_error", message: expect.stringContaining("--enable-auto-tool-choice") },
    });

    const made = await (
      await s.admin(`/admin/projects/${s.project}/keys`, { body: { name: "limited", type: "live" } })
    ).json();
    await s.admin(`/admin/keys/${made.id}`, { method: "PATCH", body: { limits: { rpm: 1 } } });
    const limited = client(workloadBase(vllm.slug), made.secret);
    await limited.messages.countTokens({ model: "default", ...ask });
    const over = await limited.messages.countTokens({ model: "default", ...ask }).catch((x) => x);
    expect(over).toBeInstanceOf(Anthropic.RateLimitError);
    expect(over.error).toMatchObject({ type: "error", error: { type: "rate_limit_error" } });
  });
});

describe("a translated stream's message_start", () => {
  test("carries the real input tokens: the Anthropic SDK's message_start and LangChain's usage_metadata", async () => {
    for (const base of [workloadBase(llama.slug), projectBase()]) {
      const stream = client(base).messages.stream({ model: "tiny", max_tokens: 20, ...ask });
      let started: number | undefined;
      stream.on("streamEvent", (e) => {
        if (e.type === "message_start") started = e.message.usage.input_tokens;
      });
      const final = await stream.finalMessage();
      expect(started).toBe(8);
      expect(final.usage.input_tokens).toBe(8);
    }
    const chat = new ChatAnthropic({
      model: "tiny",
      anthropicApiUrl: workloadBase(llama.slug),
      apiKey: s.live,
      maxTokens: 20,
      maxRetries: 0,
      streaming: true,
    });
    let input = 0;
    for await (const chunk of await chat.stream("count these five words please"))
      input += chunk.usage_metadata?.input_tokens ?? 0;
    expect(input).toBe(5);
    await waitFor(async () => (await s.workload(llama.id)).usage.input_tokens > 0, {
      what: "the streams' input tokens metered",
    });
  });
});

describe("counting on a runtime without a chat tokenizer", () => {
  test("a tokenizer route answering 404 falls back to a one-token generation on a slot, its prompt_tokens the count", async () => {
    const sent: string[] = [];
    let busy = 0;
    const d = new Dispatcher({ waitMs: 1000, maxWaiting: 4 });
    const target = {
      id: "r1",
      workloadId: "w1",
      workerId: "k",
      capacity: 1,
      inFlight: 0,
      send: async (req: Upstream) => {
        sent.push(req.path);
        busy = target.inFlight;
        if (req.path !== "/v1/chat/completions") return Response.json({ detail: "Not Found" }, { status: 404 });
        return Response.json({ choices: [], usage: { prompt_tokens: 42, completion_tokens: 1 } });
      },
    };
    d.upsertTarget(target);
    const chat = { model: "m", messages: [{ role: "user", content: "hi" }] };
    expect(await countPromptTokens(d, "w1", "vllm", chat, new AbortController().signal)).toBe(42);
    expect(sent).toEqual(["/tokenize", "/v1/chat/completions"]);
    expect(busy).toBe(1);
    expect(target.inFlight).toBe(0);
    expect(await countPromptTokens(d, "w1", "generate", chat, new AbortController().signal)).toBe(42);
  });
});
