import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { cleanup } from "./helpers/proc";
import { sseEvents, startServing, type Serving } from "./helpers/serving";

/** Every synchronous data-plane route against a (fake) vLLM runtime: happy paths and errors. */
let s: Serving;
let chat: { id: string; slug: string };
beforeAll(async () => {
  s = await startServing();
  chat = await s.createWorkload({
    name: "chat",
    backend: "vllm",
    model_name: "org/model-7b",
    config: { command: "vllm serve org/model-7b --enable-auto-tool-choice --tool-call-parser hermes" },
  });
  await s.waitState(chat.id);
});
afterAll(async () => {
  await s.stop();
  await cleanup();
});

describe("chat completions", () => {
  test("non-stream: the served model answers, usage is passed through and counted", async () => {
    const r = await s.data(chat.slug, "/v1/chat/completions", {
      body: { model: "org/model-7b", messages: [{ role: "user", content: "one two three" }], max_tokens: 50 },
    });
    expect(r.status).toBe(200);
    const body = await r.json();
    expect(body).toMatchObject({
      object: "chat.completion",
      model: "org/model-7b",
      choices: [
        { index: 0, message: { role: "assistant", content: "You said: one two three" }, finish_reason: "stop" },
      ],
    });
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens + body.usage.completion_tokens);
    const keys = await (await s.admin(`/admin/projects/${s.project}/keys`)).json();
    const live = keys.find((k: { name: string }) => k.name === "live");
    expect(live.usage.output_tokens).toBeGreaterThanOrEqual(body.usage.completion_tokens);
    const detail = await s.workload(chat.id);
    expect(detail.usage.requests).toBeGreaterThanOrEqual(1);
    expect(detail.usage.output_tokens).toBeGreaterThanOrEqual(body.usage.completion_tokens);
  });

  test("stream: chunks pass through as data lines ending with [DONE]; usage is counted but not injected", async () => {
    const r = await s.data(chat.slug, "/v1/chat/completions", {
      body: { model: chat.slug, stream: true, messages: [{ role: "user", content: "stream me please" }] },
    });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toContain("text/event-stream");
    const events = await sseEvents(r);
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1) as {
      object: string;
      choices: { delta: { content?: string }; finish_reason: string | null }[];
    }[];
    expect(chunks.every((c) => c.object === "chat.completion.chunk" && c.choices.length === 1)).toBe(true);
    expect(chunks.map((c) => c.choices[0].delta.content ?? "").join("")).toBe("You said: stream me please");
    expect(chunks.at(-1)!.choices[0].finish_reason).toBe("stop");
    const before = (await s.workload(chat.id)).usage.output_tokens;
    expect(before).toBeGreaterThan(0);
  });

  test("stream with include_usage asked by the client keeps the usage chunk", async () => {
    const r = await s.data(chat.slug, "/v1/chat/completions", {
      body: {
        model: "default",
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: "user", content: "count" }],
      },
    });
    const events = (await sseEvents(r)).slice(0, -1) as { choices: unknown[]; usage?: { completion_tokens: number } }[];
    expect(events.at(-1)!.choices).toEqual([]);
    expect(events.at(-1)!.usage!.completion_tokens).toBeGreaterThan(0);
  });

  test("a model that is not this workload's is refused with model_not_available", async () => {
    const r = await s.data(chat.slug, "/v1/chat/completions", {
      body: { model: "gpt-4o", messages: [{ role: "user", content: "x" }] },
    });
    expect(r.status).toBe(400);
    const e = (await r.json()).error;
    expect(e.code).toBe("model_not_available");
    expect(e.message).toStartWith("model is not available on this endpoint");
    expect(e.message).toContain(`${s.project}/${chat.slug}`);
    expect(e.message).toContain('"default"');
  });

  test("the runtime's own 400 passes through with its message", async () => {
    const r = await s.data(chat.slug, "/v1/chat/completions", { body: { model: chat.slug, messages: "not a list" } });
    expect(r.status).toBe(400);
    expect(JSON.stringify(await r.json())).toMatch(/messages/);
  });

  test("malformed JSON and a non-object body are 400 in the data plane's shape", async () => {
    const bad = await s.data(chat.slug, "/v1/chat/completions", {
      raw: "{nope",
      headers: { "content-type": "application/json" },
    });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error).toMatchObject({ code: "invalid_json", type: "invalid_request_error" });
    const arr = await s.data(chat.slug, "/v1/chat/completions", {
      raw: "[1]",
      headers: { "content-type": "application/json" },
    });
    expect(arr.status).toBe(400);
  });

  test("an unknown workload is 404", async () => {
    const r = await s.data("nope", "/v1/chat/completions", { body: { messages: [] } });
    expect(r.status).toBe(404);
  });
});

describe("other routes", () => {
  test("embeddings", async () => {
    const r = await s.data(chat.slug, "/v1/embeddings", { body: { model: chat.slug, input: ["a", "b"] } });
    expect(r.status).toBe(200);
    const body = await r.json();
    expect(body.object).toBe("list");
    expect(body.data).toHaveLength(2);
    expect(body.data[1]).toMatchObject({ object: "embedding", index: 1 });
    expect(body.data[0].embedding.length).toBeGreaterThan(0);
    expect(body.data[0].embedding).not.toEqual(body.data[1].embedding);
  });

  test("completions, rerank, forecast, image generation and audio generation are forwarded", async () => {
    const cases: [string, unknown, (b: any) => void][] = [
      ["/v1/completions", { prompt: "hello", max_tokens: 5 }, (b) => expect(b.choices[0].text).toBeString()],
      ["/v1/rerank", { query: "q", documents: ["a", "b", "c"] }, (b) => expect(b.results).toHaveLength(3)],
      ["/v1/forecast", { series: [1, 2, 3], horizon: 2 }, (b) => expect(b).toBeObject()],
      ["/v1/images/generations", { prompt: "a cat" }, (b) => expect(b.data[0].b64_json).toBeString()],
    ];
    for (const [path, body, check] of cases) {
      const r = await s.data(chat.slug, path, { body });
      expect({ path, status: r.status }).toEqual({ path, status: 200 });
      check(await r.json());
    }
  });

  test("audio speech answers the runtime's bytes and content type", async () => {
    const r = await s.data(chat.slug, "/v1/audio/speech", { body: { input: "hello", voice: "alloy" } });
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toContain("audio/");
    const bytes = new Uint8Array(await r.arrayBuffer());
    expect(new TextDecoder().decode(bytes.slice(0, 4))).toBe("RIFF");
  });

  test("multipart uploads reach the runtime byte for byte with their boundary", async () => {
    for (const [path, field] of [
      ["/v1/audio/transcriptions", "file"],
      ["/v1/images/edits", "image"],
      ["/v1/images/variations", "image"],
    ]) {
      const boundary = "----inferd-test-" + Math.random().toString(16).slice(2);
      const file = crypto.getRandomValues(new Uint8Array(4096));
      const head = `--${boundary}\r\nContent-Disposition: form-data; name="prompt"\r\n\r\nmake it blue\r\n--${boundary}\r\nContent-Disposition: form-data; name="${field}"; filename="clip.bin"\r\nContent-Type: application/octet-stream\r\n\r\n`;
      const raw = Buffer.concat([Buffer.from(head), file, Buffer.from(`\r\n--${boundary}--\r\n`)]);
      const type = `multipart/form-data; boundary=${boundary}`;
      const r = await s.data(chat.slug, path, { raw, headers: { "content-type": type } });
      const echo = await r.json();
      expect({ path, status: r.status, echo }).toEqual({ path, status: 200, echo: expect.anything() });
      expect(echo.sha256).toBe(createHash("sha256").update(raw).digest("hex"));
      expect(echo.bytes ?? echo.length ?? echo.size).toBe(raw.byteLength);
      expect(echo.content_type).toBe(type);
    }
  });
});

describe("toggles and task types", () => {
  test("a toggle that is off refuses its routes with 409 and leaves the others open", async () => {
    const w = await s.createWorkload({
      name: "toggled",
      backend: "vllm",
      model_name: "t",
      config: { command: "vllm serve t" },
    });
    await s.waitState(w.id);
    await s.admin(`/admin/workloads/${w.id}/endpoints`, { method: "PATCH", body: { chat: false } });
    const r = await s.data(w.slug, "/v1/chat/completions", { body: { messages: [{ role: "user", content: "x" }] } });
    expect(r.status).toBe(409);
    expect((await r.json()).error.code).toBe("endpoint_disabled");
    expect((await s.data(w.slug, "/v1/embeddings", { body: { input: "x" } })).status).toBe(200);
    await s.admin(`/admin/workloads/${w.id}/endpoints`, { method: "PATCH", body: { chat: true } });
    expect(
      (await s.data(w.slug, "/v1/chat/completions", { body: { messages: [{ role: "user", content: "x" }] } })).status,
    ).toBe(200);
  });

  test("reranker, classification and reward workloads refuse the synchronous routes", async () => {
    for (const task_type of ["reranker", "classification", "reward"]) {
      const w = await s.createWorkload({
        name: `jobs-${task_type}`,
        backend: "vllm",
        model_name: "r",
        task_type,
        config: { command: "vllm serve r" },
      });
      const r = await s.data(w.slug, "/v1/rerank", { body: { query: "q", documents: ["a"] } });
      expect(r.status).toBe(400);
      const e = (await r.json()).error;
      expect(e.code).toBe("async_only");
      expect(e.message).toContain("/jobs");
    }
  });
});

describe("runtimes with their own API key", () => {
  test("a command's --api-key is sent to the runtime, and never shown by the admin API", async () => {
    const w = await s.createWorkload({
      name: "keyed",
      backend: "vllm",
      model_name: "keyed",
      config: { command: "vllm serve keyed --api-key runtime-secret-123" },
    });
    const ready = await s.waitState(w.id);
    expect(ready.assignments[0].served_model).toBe("keyed");
    const direct = await fetch(`${ready.assignments[0].base_url}/v1/chat/completions`, {
      method: "POST",
      body: JSON.stringify({ messages: [{ role: "user", content: "x" }] }),
    });
    expect(direct.status).toBe(401);
    const r = await s.data(w.slug, "/v1/chat/completions", {
      body: { messages: [{ role: "user", content: "with a key" }] },
    });
    expect(r.status).toBe(200);
    const shown = await (await s.admin(`/admin/workloads/${w.id}`)).text();
    expect(shown.replace(/"command":"[^"]*"/, "")).not.toContain("runtime-secret-123");
  });
});
