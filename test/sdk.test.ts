import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { join } from "node:path";
import { cleanup, tempDir } from "./helpers/proc";
import { writeTinyGguf } from "./fixtures/gguf";
import { startServing, type Serving } from "./helpers/serving";

/**
 * The official SDKs pointed at inferd, as LAN clients would use them: OpenAI for chat (plain and
 * streaming) and embeddings, Anthropic for Messages with a tool — passed through to a runtime that
 * has /v1/messages (vLLM) and translated for one that has only chat completions (llama-server).
 */
let s: Serving;
let vllm: { id: string; slug: string };
let noTools: { id: string; slug: string };
let llama: { id: string; slug: string };
const base = (w: string) => `${s.url}/endpoint/${s.project}/${w}`;

beforeAll(async () => {
  s = await startServing();
  vllm = await s.createWorkload({
    name: "qwen",
    backend: "vllm",
    model_name: "Qwen/Qwen3-8B",
    config: { command: "vllm serve Qwen/Qwen3-8B --enable-auto-tool-choice --tool-call-parser hermes" },
  });
  noTools = await s.createWorkload({
    name: "plain",
    backend: "vllm",
    model_name: "plain-model",
    config: { command: "vllm serve plain-model" },
  });
  const gguf = join(tempDir("gguf"), "tiny model.gguf");
  writeTinyGguf(gguf);
  llama = await s.createWorkload({
    name: "tiny",
    backend: "llamacpp",
    model_name: "tiny",
    config: { command: `llama-server -m '${gguf}' -a tiny` },
  });
  await Promise.all([s.waitState(vllm.id), s.waitState(noTools.id), s.waitState(llama.id)]);
});
afterAll(async () => {
  await s.stop();
  await cleanup();
});

const weather = {
  name: "get_weather",
  description: "Current weather for a city",
  input_schema: { type: "object" as const, properties: { city: { type: "string" } }, required: ["city"] },
};

describe("OpenAI SDK", () => {
  const client = () => new OpenAI({ baseURL: `${base(vllm.slug)}/v1`, apiKey: s.live });

  test("chat completions", async () => {
    const r = await client().chat.completions.create({
      model: vllm.slug,
      messages: [{ role: "user", content: "hi there" }],
    });
    expect(r.choices[0].message.content).toBe("You said: hi there");
    expect(r.model).toBe("Qwen/Qwen3-8B");
    expect(r.usage!.total_tokens).toBeGreaterThan(0);
  });

  test("streaming chat completions", async () => {
    const stream = await client().chat.completions.create({
      model: "Qwen/Qwen3-8B",
      stream: true,
      messages: [{ role: "user", content: "stream this" }],
    });
    let text = "";
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      text += chunk.choices[0]?.delta?.content ?? "";
    }
    expect(chunks).toBeGreaterThan(2);
    expect(text).toBe("You said: stream this");
  });

  test("embeddings", async () => {
    const r = await client().embeddings.create({ model: vllm.slug, input: ["alpha", "beta"] });
    expect(r.data).toHaveLength(2);
    expect(r.data[0].embedding.length).toBeGreaterThan(0);
  });

  test("models.list names the served model", async () => {
    const list = await client().models.list();
    expect(list.data.map((m) => m.id)).toEqual(["Qwen/Qwen3-8B"]);
  });

  test("errors surface as the SDK's typed errors", async () => {
    const wrongKey = new OpenAI({ baseURL: `${base(vllm.slug)}/v1`, apiKey: s.sdk, maxRetries: 0 });
    const e = await wrongKey.chat.completions
      .create({ model: vllm.slug, messages: [{ role: "user", content: "x" }] })
      .catch((x) => x);
    expect(e).toBeInstanceOf(OpenAI.PermissionDeniedError);
    const bad = await client()
      .chat.completions.create({ model: "gpt-4o", messages: [{ role: "user", content: "x" }] })
      .catch((x) => x);
    expect(bad).toBeInstanceOf(OpenAI.BadRequestError);
    expect(bad.message).toContain("model is not available on this endpoint");
  });
});

describe("Anthropic SDK", () => {
  const client = (w: string, apiKey = s.live) => new Anthropic({ baseURL: base(w), apiKey, maxRetries: 0 });

  test("messages with a tool: the runtime's tool_use block comes back (x-api-key accepted)", async () => {
    const m = await client(vllm.slug).messages.create({
      model: vllm.slug,
      max_tokens: 100,
      tools: [weather],
      messages: [{ role: "user", content: "Weather in Paris?" }],
    });
    expect(m.type).toBe("message");
    const use = m.content.find((b) => b.type === "tool_use");
    expect(use).toMatchObject({ type: "tool_use", name: "get_weather" });
    expect((use as { input: Record<string, unknown> }).input).toHaveProperty("city");
    expect(m.stop_reason).toBe("tool_use");
  });

  test("messages streamed", async () => {
    const stream = client(vllm.slug).messages.stream({
      model: "default",
      max_tokens: 50,
      messages: [{ role: "user", content: "say something" }],
    });
    const final = await stream.finalMessage();
    expect(final.content[0]).toMatchObject({ type: "text", text: "You said: say something" });
  });

  test("a tool request to a runtime without the tool flags: its 400 and message pass through", async () => {
    const e = await client(noTools.slug)
      .messages.create({
        model: "default",
        max_tokens: 10,
        tools: [weather],
        messages: [{ role: "user", content: "x" }],
      })
      .catch((x) => x);
    expect(e).toBeInstanceOf(Anthropic.BadRequestError);
    expect(e.status).toBe(400);
    expect(e.error.error.type).toBe("invalid_request_error");
    expect(e.error.error.message).toContain("--enable-auto-tool-choice");
  });

  test("a runtime without /v1/messages is served by translation to chat completions", async () => {
    const m = await client(llama.slug).messages.create({
      model: "tiny",
      max_tokens: 20,
      system: "be brief",
      messages: [{ role: "user", content: "translated please" }],
    });
    expect(m.content[0]).toMatchObject({ type: "text" });
    expect((m.content[0] as { text: string }).text).toContain("translated please");
    expect(m.usage.output_tokens).toBeGreaterThan(0);
    const streamed = await client(llama.slug)
      .messages.stream({ model: "default", max_tokens: 20, messages: [{ role: "user", content: "stream translated" }] })
      .finalMessage();
    expect((streamed.content[0] as { text: string }).text).toContain("stream translated");
  });

  test("contract errors: model_not_available 400, 401, 403, 409, all in the Messages shape", async () => {
    const notAvail = await client(vllm.slug)
      .messages.create({ model: "claude-opus", max_tokens: 5, messages: [{ role: "user", content: "x" }] })
      .catch((x) => x);
    expect(notAvail.status).toBe(400);
    expect(notAvail.error).toMatchObject({ type: "error", error: { type: "invalid_request_error" } });
    expect(notAvail.error.error.message).toStartWith("model is not available on this endpoint");
    expect(notAvail.error.error.message).toContain("default");

    const noKey = await fetch(`${base(vllm.slug)}/v1/messages`, {
      method: "POST",
      body: JSON.stringify({ max_tokens: 5, messages: [] }),
    });
    expect(noKey.status).toBe(401);
    expect(await noKey.json()).toMatchObject({ type: "error", error: { type: "authentication_error" } });

    const wrong = await client(vllm.slug, s.sdk)
      .messages.create({ model: "default", max_tokens: 5, messages: [{ role: "user", content: "x" }] })
      .catch((x) => x);
    expect(wrong.status).toBe(403);
    expect(wrong.error.error.type).toBe("permission_error");

    await s.admin(`/admin/workloads/${noTools.id}/endpoints`, { method: "PATCH", body: { chat: false } });
    const off = await client(noTools.slug)
      .messages.create({ model: "default", max_tokens: 5, messages: [{ role: "user", content: "x" }] })
      .catch((x) => x);
    expect(off.status).toBe(409);
    expect(off.error.error.type).toBe("invalid_request_error");
  });
});
