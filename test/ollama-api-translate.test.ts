import { describe, expect, test } from "bun:test";
import { AppError } from "../src/errors";
import { waitFor } from "./helpers/proc";
import { capabilitiesOf, detailsOf, parameterSizeOf, runningOf, showOf, tagOf } from "../src/dataplane/ollama-models";
import { ChatStreamToOllama, meteredNdjson } from "../src/dataplane/ollama-stream";
import {
  chatAnswerOf,
  chatMessagesOf,
  chatRequestOf,
  embedAnswerOf,
  embedRequestOf,
  generateAnswerOf,
  generateRequestOf,
  imageUrlOf,
  loadAnswerOf,
  metricsOf,
  ollamaErrorOf,
  responseFormatOf,
  samplingOf,
} from "../src/dataplane/ollama-translate";
import type { Workload } from "../src/workloads/service";
import type { ModelInfo } from "../src/models/fit";

/** The pure halves of the Ollama API: requests to OpenAI-style bodies, answers and streams back, model details. */

const message = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    expect(e).toBeInstanceOf(AppError);
    expect((e as AppError).status).toBe(400);
    return (e as AppError).message;
  }
  throw new Error("did not throw");
};

describe("requests", () => {
  test("options become OpenAI sampling fields; loading options are ignored; wrong types are 400", () => {
    expect(
      samplingOf({
        temperature: 0.2,
        top_p: 0.9,
        top_k: 40,
        seed: 7,
        num_predict: 64,
        stop: "\n",
        num_ctx: 8192,
        num_gpu: 1,
      }),
    ).toEqual({ temperature: 0.2, top_p: 0.9, top_k: 40, seed: 7, max_tokens: 64, stop: ["\n"] });
    expect(samplingOf({ num_predict: -1, stop: ["a", "b"] })).toEqual({ stop: ["a", "b"] });
    expect(samplingOf(undefined)).toEqual({});
    expect(message(() => samplingOf({ temperature: "hot" }))).toContain("options.temperature");
    expect(message(() => samplingOf({ num_predict: 1.5 }))).toContain("options.num_predict");
    expect(message(() => samplingOf({ stop: [1] }))).toContain("options.stop");
    expect(message(() => samplingOf([]))).toContain("options");
  });

  test("format: json → json_object, a schema → json_schema, anything else is 400", () => {
    expect(responseFormatOf("json")).toEqual({ type: "json_object" });
    const schema = { type: "object", properties: { a: { type: "string" } } };
    expect(responseFormatOf(schema)).toEqual({ type: "json_schema", json_schema: { name: "response", schema } });
    expect(responseFormatOf("")).toBeUndefined();
    expect(message(() => responseFormatOf("yaml"))).toContain("format");
  });

  test("images become data URLs with the type their bytes say", () => {
    expect(imageUrlOf("iVBORw0KGgoAAA", "i")).toBe("data:image/png;base64,iVBORw0KGgoAAA");
    expect(imageUrlOf("/9j/4AAQ", "i")).toBe("data:image/jpeg;base64,/9j/4AAQ");
    expect(imageUrlOf("data:image/gif;base64,R0lGOD", "i")).toBe("data:image/gif;base64,R0lGOD");
    expect(message(() => imageUrlOf(5, "messages[0].images[0]"))).toContain("messages[0].images[0]");
  });

  test("messages: tool calls get ids and string arguments, tool results answer them by name, images go with the user turn", () => {
    const out = chatMessagesOf([
      { role: "system", content: "be brief" },
      { role: "user", content: "look", images: ["iVBORw0KGgoAAA"] },
      {
        role: "assistant",
        content: "",
        thinking: "hmm",
        tool_calls: [{ function: { name: "a", arguments: { x: 1 } } }, { function: { name: "b", arguments: {} } }],
      },
      { role: "tool", content: "B done", tool_name: "b" },
      { role: "tool", content: "A done" },
    ]);
    expect(out).toEqual([
      { role: "system", content: "be brief" },
      {
        role: "user",
        content: [
          { type: "text", text: "look" },
          { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgoAAA" } },
        ],
      },
      {
        role: "assistant",
        content: "",
        tool_calls: [
          { id: "call_0", type: "function", function: { name: "a", arguments: '{"x":1}' } },
          { id: "call_1", type: "function", function: { name: "b", arguments: "{}" } },
        ],
      },
      { role: "tool", content: "B done", tool_call_id: "call_1" },
      { role: "tool", content: "A done", tool_call_id: "call_0" },
    ]);
    expect(message(() => chatMessagesOf([{ role: "user", content: 3 }]))).toContain("messages[0].content");
    expect(message(() => chatMessagesOf([{ role: "assistant", tool_calls: [{ name: "x" }] }]))).toContain(
      "messages[0].tool_calls[0]",
    );
  });

  test("chat streams by default (with usage asked for), not with stream: false; tools and format carried", () => {
    const req = {
      model: "fast",
      messages: [{ role: "user", content: "hi" }],
      tools: [{ type: "function", function: { name: "t", parameters: {} } }],
      format: "json",
      think: true,
      keep_alive: "5m",
    };
    expect(chatRequestOf(req, "org/m")).toEqual({
      path: "/v1/chat/completions",
      body: {
        model: "org/m",
        response_format: { type: "json_object" },
        stream: true,
        stream_options: { include_usage: true },
        messages: [{ role: "user", content: "hi" }],
        tools: [{ type: "function", function: { name: "t", parameters: {} } }],
      },
    });
    expect(chatRequestOf({ messages: [], stream: false }, "m").body).toEqual({ model: "m", messages: [] });
  });

  test("generate: a chat turn (system, images), or raw and suffix prompts as completions", () => {
    expect(generateRequestOf({ prompt: "hi", system: "sys", images: ["/9j/x"], stream: false }, "m")).toEqual({
      path: "/v1/chat/completions",
      body: {
        model: "m",
        messages: [
          { role: "system", content: "sys" },
          {
            role: "user",
            content: [
              { type: "text", text: "hi" },
              { type: "image_url", image_url: { url: "data:image/jpeg;base64,/9j/x" } },
            ],
          },
        ],
      },
    });
    expect(generateRequestOf({ prompt: "def f(", raw: true, options: { num_predict: 8 } }, "m")).toEqual({
      path: "/v1/completions",
      body: { model: "m", max_tokens: 8, stream: true, stream_options: { include_usage: true }, prompt: "def f(" },
    });
    expect(generateRequestOf({ prompt: "a", suffix: "z", stream: false }, "m")).toEqual({
      path: "/v1/completions",
      body: { model: "m", prompt: "a", suffix: "z" },
    });
    expect(message(() => generateRequestOf({ prompt: 4 }, "m"))).toContain("prompt");
  });

  test("embed and embeddings become /v1/embeddings", () => {
    expect(embedRequestOf({ input: ["a", "b"], dimensions: 4, truncate: true }, "m", false)).toEqual({
      path: "/v1/embeddings",
      body: { model: "m", input: ["a", "b"], dimensions: 4 },
    });
    expect(embedRequestOf({ prompt: "a" }, "m", true)).toEqual({
      path: "/v1/embeddings",
      body: { model: "m", input: "a" },
    });
    expect(message(() => embedRequestOf({ input: 5 }, "m", false))).toContain("input");
    expect(message(() => embedRequestOf({ input: ["a"] }, "m", true))).toContain("prompt");
  });
});

describe("answers", () => {
  const t = { arrived: 1000, waited: 10, end: 1110 };
  const at = new Date("2025-01-02T03:04:05.678Z");

  test("metrics in nanoseconds: the wait is the load, prompt and generation split at the first token (or by tokens)", () => {
    expect(metricsOf({ inputTokens: 3, outputTokens: 5 }, { ...t, first: 1030 })).toEqual({
      total_duration: 110e6,
      load_duration: 10e6,
      prompt_eval_count: 3,
      prompt_eval_duration: 20e6,
      eval_count: 5,
      eval_duration: 80e6,
    });
    expect(metricsOf({ inputTokens: 1, outputTokens: 3 }, t)).toMatchObject({
      prompt_eval_duration: 25e6,
      eval_duration: 75e6,
    });
  });

  test("a chat completion as Ollama's chat answer, tool calls with object arguments", () => {
    const answer = {
      choices: [
        {
          message: {
            content: null,
            reasoning_content: "think",
            tool_calls: [{ id: "c1", type: "function", function: { name: "w", arguments: '{"city":"Paris"}' } }],
          },
          finish_reason: "tool_calls",
        },
      ],
      usage: { prompt_tokens: 3, completion_tokens: 5 },
    };
    expect(chatAnswerOf(answer, "fast", t, at)).toEqual({
      model: "fast",
      created_at: "2025-01-02T03:04:05.678Z",
      message: {
        role: "assistant",
        content: "",
        thinking: "think",
        tool_calls: [{ id: "c1", function: { index: 0, name: "w", arguments: { city: "Paris" } } }],
      },
      done_reason: "stop",
      done: true,
      ...metricsOf({ inputTokens: 3, outputTokens: 5 }, t),
    });
  });

  test("generate answers from chat or text completions; embed and legacy embeddings; the load answer", () => {
    expect(generateAnswerOf({ choices: [{ text: "abc", finish_reason: "length" }] }, "m", t, at)).toMatchObject({
      model: "m",
      response: "abc",
      done: true,
      done_reason: "length",
      eval_count: 0,
    });
    expect(
      generateAnswerOf({ choices: [{ message: { content: "hi" }, finish_reason: "stop" }] }, "m", t, at).response,
    ).toBe("hi");
    const emb = {
      data: [
        { index: 1, embedding: [2] },
        { index: 0, embedding: [1] },
      ],
      usage: { prompt_tokens: 4 },
    };
    expect(embedAnswerOf(emb, "m", t, false)).toEqual({
      model: "m",
      embeddings: [[1], [2]],
      total_duration: 110e6,
      load_duration: 10e6,
      prompt_eval_count: 4,
    });
    expect(embedAnswerOf(emb, "m", t, true)).toEqual({ embedding: [1] });
    expect(loadAnswerOf("chat", "m", at)).toEqual({
      model: "m",
      created_at: at.toISOString(),
      message: { role: "assistant", content: "" },
      done_reason: "load",
      done: true,
    });
  });

  test("a runtime's error in any dialect becomes one string", () => {
    expect(
      ollamaErrorOf(400, JSON.stringify({ error: { message: "too long", type: "BadRequestError", code: 400 } })),
    ).toEqual({ error: "too long" });
    expect(ollamaErrorOf(400, JSON.stringify({ object: "error", message: "flat" }))).toEqual({ error: "flat" });
    expect(ollamaErrorOf(404, JSON.stringify({ error: 'model "x" not found' }))).toEqual({
      error: 'model "x" not found',
    });
    expect(ollamaErrorOf(502, "Bad Gateway")).toEqual({ error: "Bad Gateway" });
  });
});

describe("streams", () => {
  const sse = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`;
  const chunk = (delta: unknown, finish: string | null = null) =>
    sse({ object: "chat.completion.chunk", choices: [{ index: 0, delta, finish_reason: finish }] });
  const lines = (s: string) =>
    s
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l));
  const clock = () => new Date("2025-01-01T00:00:00.000Z");

  test("chat chunks become message lines as they arrive; the done line carries the usage and durations", () => {
    let now = 100;
    const tr = new ChatStreamToOllama("chat", "fast", { arrived: 50, waited: 10 }, () => now, clock);
    const text =
      chunk({ role: "assistant", content: "" }) +
      chunk({ content: "Hel" }) +
      chunk({ content: "lo" }, "stop") +
      sse({ choices: [], usage: { prompt_tokens: 2, completion_tokens: 2 } }) +
      "data: [DONE]\n\n";
    const bytes = new TextEncoder().encode(text);
    let out = tr.push(bytes.slice(0, 70));
    now = 120;
    out += tr.push(bytes.slice(70));
    out += tr.end();
    const got = lines(out);
    expect(got.slice(0, 2)).toEqual([
      {
        model: "fast",
        created_at: "2025-01-01T00:00:00.000Z",
        message: { role: "assistant", content: "Hel" },
        done: false,
      },
      {
        model: "fast",
        created_at: "2025-01-01T00:00:00.000Z",
        message: { role: "assistant", content: "lo" },
        done: false,
      },
    ]);
    expect(got[2]).toMatchObject({
      message: { role: "assistant", content: "" },
      done_reason: "stop",
      done: true,
      prompt_eval_count: 2,
      eval_count: 2,
      total_duration: 70e6,
      load_duration: 10e6,
    });
    expect(tr.done).toBe(true);
  });

  test("tool call fragments go out whole in one line, before the done line", () => {
    const tr = new ChatStreamToOllama("chat", "m", { arrived: 0, waited: 0 });
    let out = tr.push(
      chunk({ tool_calls: [{ index: 0, id: "c1", type: "function", function: { name: "get_", arguments: '{"ci' } }] }),
    );
    out += tr.push(chunk({ tool_calls: [{ index: 0, function: { name: "weather", arguments: 'ty":"Rome"}' } }] }));
    out += tr.push(chunk({}, "tool_calls") + "data: [DONE]\n\n");
    const got = lines(out);
    expect(got).toHaveLength(2);
    expect(got[0].message.tool_calls).toEqual([
      { id: "c1", function: { index: 0, name: "get_weather", arguments: { city: "Rome" } } },
    ]);
    expect(got[1]).toMatchObject({ done: true, done_reason: "stop" });
  });

  test("generate reads text completions; a stream cut short or an error chunk ends with an error line", () => {
    const gen = new ChatStreamToOllama("generate", "m", { arrived: 0, waited: 0 });
    const got = lines(gen.push(sse({ choices: [{ index: 0, text: "abc", finish_reason: "length" }] })) + gen.end());
    expect(got[0]).toMatchObject({ response: "abc", done: false });
    expect(got[1]).toMatchObject({ response: "", done: true, done_reason: "length" });
    const cut = new ChatStreamToOllama("chat", "m", { arrived: 0, waited: 0 });
    expect(lines(cut.push(chunk({ content: "a" })) + cut.end()).at(-1)).toEqual({
      error: "the model runtime's stream ended before it was complete",
    });
    const failed = new ChatStreamToOllama("chat", "m", { arrived: 0, waited: 0 });
    expect(lines(failed.push(sse({ error: { message: "engine died", code: 500 } })))).toEqual([
      { error: "engine died" },
    ]);
  });

  const streamOf = (parts: string[], failAfter = false) =>
    new ReadableStream<Uint8Array>({
      start(c) {
        for (const p of parts) c.enqueue(new TextEncoder().encode(p));
        if (failAfter) c.error(new Error("connection reset"));
        else c.close();
      },
    });

  test("the NDJSON meter renames the model, reads the done line's counts and reports the end once", async () => {
    const ends: unknown[] = [];
    let firsts = 0;
    const body = meteredNdjson(
      streamOf([
        '{"model":"llama3.2","response":"a","done":false}\n{"model":"lla',
        'ma3.2","response":"","done":true,"prompt_eval_count":3,"eval_count":1}\n',
      ]),
      {
        model: "local",
        onFirst: () => firsts++,
        onEnd: (usage, outcome) => ends.push({ usage, outcome }),
      },
    );
    const got = lines(await new Response(body).text());
    expect(got.map((l) => l.model)).toEqual(["local", "local"]);
    expect(firsts).toBe(1);
    expect(ends).toEqual([{ usage: { inputTokens: 3, outputTokens: 1 }, outcome: "done" }]);
  });

  test("a runtime breaking off ends the client's stream with an error line; a client leaving aborts the runtime", async () => {
    const ends: string[] = [];
    const broken = meteredNdjson(streamOf(['{"response":"a","done":false}\n'], true), {
      onFirst: () => {},
      onEnd: (_u, o) => ends.push(o),
    });
    expect(lines(await new Response(broken).text()).at(-1).error).toContain("broke off mid-answer");
    let cancelled = false;
    const open = meteredNdjson(new ReadableStream({ pull() {}, cancel: () => void (cancelled = true) }), {
      onFirst: () => {},
      onEnd: (_u, o) => ends.push(o),
    });
    await open.cancel();
    // The cancel reaches the runtime's side through the pipe a moment later.
    await waitFor(() => cancelled, { what: "the runtime's answer cancelled" });
    expect(ends).toEqual(["error", "cancelled"]);
  });
});

describe("model details", () => {
  const w = {
    id: "w1",
    backend: "vllm",
    model_name: "Qwen/Qwen3-8B",
    project_slug: "p",
    slug: "qwen",
    task_type: "text2text",
    config: { command: "vllm serve Qwen/Qwen3-8B --enable-auto-tool-choice --tool-call-parser hermes" },
    updated_at: "2025-01-01T00:00:00.000Z",
  } as unknown as Workload;
  const info = {
    format: "gguf",
    architecture: "llama",
    parameters: 3_212_749_888,
    quantization: "Q4_K_M",
    context_length: 131072,
    embedding_length: 3072,
    weights_bytes: 2_000_000_000,
  } as ModelInfo;

  test("parameter size from the store's count, else from the name", () => {
    expect(parameterSizeOf(8_030_261_248, "x")).toBe("8.0B");
    expect(parameterSizeOf(494_032_768, "x")).toBe("494.03M");
    expect(parameterSizeOf(null, "Qwen/Qwen2.5-0.5B-Instruct")).toBe("0.5B");
    expect(parameterSizeOf(null, "llama3.2:1b")).toBe("1B");
    expect(parameterSizeOf(null, "org/model-Q4_K_M")).toBe("");
  });

  test("details, tags and ps entries from what is known", () => {
    expect(detailsOf(w, { info: null })).toEqual({
      parent_model: "",
      format: "",
      family: "",
      families: null,
      parameter_size: "8B",
      quantization_level: "",
    });
    expect(detailsOf({ backend: "llamacpp", model_name: "m-Q8_0" }, { info: null })).toMatchObject({
      format: "gguf",
      quantization_level: "Q8_0",
    });
    expect(detailsOf(w, { info })).toEqual({
      parent_model: "",
      format: "gguf",
      family: "llama",
      families: ["llama"],
      parameter_size: "3.2B",
      quantization_level: "Q4_K_M",
    });
    const tag = tagOf("fast", w, { info });
    expect(tag).toMatchObject({
      name: "fast",
      model: "fast",
      size: 2_000_000_000,
      modified_at: "2025-01-01T00:00:00.000Z",
    });
    expect(tagOf("fast", w, { info }).digest).toBe(tag.digest as string);
    const running = runningOf("fast", w, { info, context: 4096 }, Date.parse("2025-01-01T00:00:00Z"));
    expect(running).toMatchObject({ name: "fast", size_vram: 2_000_000_000, context_length: 4096 });
    expect(String(running.expires_at).slice(0, 4)).toBe("2317");
  });

  test("show: capabilities from the task and the engine's tool flag, model_info from what is known", () => {
    expect(capabilitiesOf(w)).toEqual(["completion", "tools"]);
    expect(capabilitiesOf({ ...w, config: { command: "vllm serve x" } })).toEqual(["completion"]);
    expect(capabilitiesOf({ ...w, task_type: "embedding" })).toEqual(["embedding"]);
    expect(showOf(w, { info, context: 8192 })).toMatchObject({
      model_info: {
        "general.architecture": "llama",
        "general.parameter_count": 3_212_749_888,
        "llama.context_length": 8192,
        "llama.embedding_length": 3072,
      },
      capabilities: ["completion", "tools"],
    });
  });
});
