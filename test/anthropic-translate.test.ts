import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import { chatErrorToAnthropic, chatToMessage, messagesToChat } from "../src/dataplane/anthropic";
import { ChatStreamToMessages, translateChatStream } from "../src/dataplane/anthropic-stream";

type Obj = Record<string, unknown>;
type Event = { event: string; data: Obj };

/** One upstream `data:` line per chunk, then `[DONE]` unless `done` is false. */
const sse = (chunks: Obj[], done = true) =>
  chunks.map((c) => `data: ${JSON.stringify(c)}\n\n`).join("") + (done ? "data: [DONE]\n\n" : "");
const chunk = (delta: Obj, finish: string | null = null, extra: Obj = {}): Obj => ({
  id: "chatcmpl-abc",
  object: "chat.completion.chunk",
  choices: [{ index: 0, delta, finish_reason: finish, ...extra }],
});
const call = (index: number, args: string, head?: { id: string; name: string }): Obj => ({
  index,
  ...(head ? { id: head.id, type: "function" } : {}),
  function: { ...(head ? { name: head.name } : {}), arguments: args },
});
const usageChunk = (prompt: number, completion: number): Obj => ({
  id: "chatcmpl-abc",
  object: "chat.completion.chunk",
  choices: [],
  usage: { prompt_tokens: prompt, completion_tokens: completion, total_tokens: prompt + completion },
});

/** A reply with text, then a tool call whose arguments arrive in three fragments, then usage. */
const TOOL_STREAM = sse([
  chunk({ role: "assistant", content: "" }),
  chunk({ content: "Let me check " }),
  chunk({ content: "the weather ☀️." }),
  chunk({ tool_calls: [call(0, "", { id: "call_1", name: "get_weather" })] }),
  chunk({ tool_calls: [call(0, '{"city": "Par')] }),
  chunk({ tool_calls: [call(0, 'is", "unit"')] }),
  chunk({ tool_calls: [call(0, ': "C"}')] }, "tool_calls"),
  usageChunk(12, 9),
]);

/** Parses Anthropic SSE text into events, checking every event's `event:` name matches its `type`. */
function events(text: string): Event[] {
  return text
    .split("\n\n")
    .filter(Boolean)
    .map((block) => {
      const [ev, data] = block.split("\n");
      const e = { event: ev.replace(/^event: /, ""), data: JSON.parse(data.replace(/^data: /, "")) as Obj };
      expect(e.data.type).toBe(e.event);
      return e;
    });
}
const translateAll = (input: string | Uint8Array[], model = "m") => {
  const t = new ChatStreamToMessages(model);
  const pieces = typeof input === "string" ? [input] : input;
  return pieces.map((p) => t.push(p)).join("") + t.end();
};

describe("messagesToChat", () => {
  test("translates a full tool conversation, sampling fields and streaming", () => {
    const png = { type: "base64", media_type: "image/png", data: "iVBORw0K" };
    const req = {
      model: "whatever",
      max_tokens: 256,
      system: [
        { type: "text", text: "Be brief." },
        { type: "text", text: "Use tools." },
      ],
      messages: [
        {
          role: "user",
          content: [
            { type: "text", text: "Weather?" },
            { type: "image", source: png },
            { type: "image", source: { type: "url", url: "https://x.test/a.jpg" } },
          ],
        },
        {
          role: "assistant",
          content: [
            { type: "thinking", thinking: "hmm", signature: "s" },
            { type: "text", text: "Checking." },
            { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } },
            { type: "tool_use", id: "toolu_2", name: "get_time", input: {} },
          ],
        },
        {
          role: "user",
          content: [
            { type: "text", text: "Thanks" },
            {
              type: "tool_result",
              tool_use_id: "toolu_1",
              content: [
                { type: "text", text: "21C" },
                { type: "image", source: png },
                { type: "search_result", x: 1 },
              ],
            },
            { type: "tool_result", tool_use_id: "toolu_2", is_error: true },
          ],
        },
      ],
      tools: [
        {
          name: "get_weather",
          description: "Weather now",
          input_schema: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        },
        { type: "custom", name: "get_time", input_schema: { type: "object" }, strict: true },
      ],
      tool_choice: { type: "tool", name: "get_weather", disable_parallel_tool_use: true },
      temperature: 0.2,
      top_p: 0.9,
      top_k: 40,
      stop_sequences: ["END"],
      stream: true,
      metadata: { user_id: "u-7" },
      thinking: { type: "disabled" },
    };
    const image = { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0K" } };
    expect(messagesToChat(req, "org/served-model")).toEqual({
      body: {
        model: "org/served-model",
        max_tokens: 256,
        messages: [
          { role: "system", content: "Be brief.\nUse tools." },
          {
            role: "user",
            content: [
              { type: "text", text: "Weather?" },
              image,
              { type: "image_url", image_url: { url: "https://x.test/a.jpg" } },
            ],
          },
          {
            role: "assistant",
            content: "Checking.",
            tool_calls: [
              { id: "toolu_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
              { id: "toolu_2", type: "function", function: { name: "get_time", arguments: "{}" } },
            ],
          },
          { role: "tool", tool_call_id: "toolu_1", content: '21C\n{"type":"search_result","x":1}' },
          { role: "tool", tool_call_id: "toolu_2", content: "" },
          { role: "user", content: [{ type: "text", text: "Thanks" }, image] },
        ],
        tools: [
          {
            type: "function",
            function: {
              name: "get_weather",
              description: "Weather now",
              parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
            },
          },
          { type: "function", function: { name: "get_time", parameters: { type: "object" }, strict: true } },
        ],
        tool_choice: { type: "function", function: { name: "get_weather" } },
        parallel_tool_calls: false,
        temperature: 0.2,
        top_p: 0.9,
        top_k: 40,
        stop: ["END"],
        stream: true,
        stream_options: { include_usage: true },
        user: "u-7",
      },
    });
  });

  test("plain strings stay strings; no stream options without stream; text-only blocks are joined", () => {
    const r = messagesToChat(
      {
        max_tokens: 1,
        system: "S",
        messages: [
          {
            role: "user",
            content: [
              { type: "text", text: "a" },
              { type: "document", source: { type: "text", media_type: "text/plain", data: "doc" } },
            ],
          },
          { role: "assistant", content: "b" },
        ],
        stop_sequences: [],
      },
      "m",
    );
    expect(r).toEqual({
      body: {
        model: "m",
        max_tokens: 1,
        messages: [
          { role: "system", content: "S" },
          { role: "user", content: "a\ndoc" },
          { role: "assistant", content: "b" },
        ],
      },
    });
  });

  test.each([
    [{ type: "auto" }, { tool_choice: "auto" }],
    [{ type: "any" }, { tool_choice: "required" }],
    [{ type: "none" }, { tool_choice: "none" }],
    [{ type: "tool", name: "f" }, { tool_choice: { type: "function", function: { name: "f" } } }],
    [
      { type: "auto", disable_parallel_tool_use: true },
      { tool_choice: "auto", parallel_tool_calls: false },
    ],
  ])("tool_choice %j", (choice, expected) => {
    const r = messagesToChat(
      { max_tokens: 5, messages: [], tools: [{ name: "f", input_schema: { type: "object" } }], tool_choice: choice },
      "m",
    );
    expect("body" in r && r.body).toMatchObject(expected);
  });

  test("an empty tool list sends neither tools nor tool_choice", () => {
    expect(messagesToChat({ max_tokens: 5, messages: [], tools: [], tool_choice: { type: "auto" } }, "m")).toEqual({
      body: { model: "m", max_tokens: 5, messages: [] },
    });
  });

  const ok = { max_tokens: 5, messages: [{ role: "user", content: "hi" }] };
  test.each([
    ["not an object", [], "request body must be a JSON object"],
    ["messages missing", { max_tokens: 5 }, "messages: required"],
    ["messages not an array", { max_tokens: 5, messages: "hi" }, "messages: required"],
    [
      "unknown role",
      { max_tokens: 5, messages: [{ role: "tool", content: "x" }] },
      'messages.0.role: unknown role "tool"',
    ],
    ["max_tokens missing", { messages: [] }, "max_tokens: required, must be a positive integer"],
    ["max_tokens zero", { ...ok, max_tokens: 0 }, "max_tokens: required, must be a positive integer"],
    ["max_tokens fractional", { ...ok, max_tokens: 1.5 }, "max_tokens: required"],
    ["max_tokens a string", { ...ok, max_tokens: "5" }, "max_tokens: required"],
    [
      "content a number",
      { max_tokens: 5, messages: [{ role: "user", content: 3 }] },
      "messages.0.content: must be a string or an array",
    ],
    [
      "block not an object",
      { max_tokens: 5, messages: [{ role: "user", content: ["x"] }] },
      "messages.0.content.0: must be a content block object",
    ],
    [
      "unsupported block",
      { max_tokens: 5, messages: [{ role: "user", content: [{ type: "server_tool_use" }] }] },
      'messages.0.content.0.type: content block "server_tool_use" is not supported',
    ],
    [
      "file image source",
      {
        max_tokens: 5,
        messages: [{ role: "user", content: [{ type: "image", source: { type: "file", file_id: "f" } }] }],
      },
      'image source "file" is not supported',
    ],
    [
      "tool_use without id",
      { max_tokens: 5, messages: [{ role: "assistant", content: [{ type: "tool_use", name: "f", input: {} }] }] },
      "messages.0.content.0.id: must be a string",
    ],
    [
      "server tool",
      { ...ok, tools: [{ type: "web_search_20250305", name: "web_search" }] },
      'tools.0.type: tool type "web_search_20250305" is not supported',
    ],
    ["tool without schema", { ...ok, tools: [{ name: "f" }] }, "tools.0.input_schema: required"],
    [
      "unknown tool_choice",
      { ...ok, tools: [{ name: "f", input_schema: {} }], tool_choice: { type: "sometimes" } },
      'tool_choice.type: unknown type "sometimes"',
    ],
    ["temperature a string", { ...ok, temperature: "hot" }, "temperature: must be a number"],
    ["system a number", { ...ok, system: 1 }, "system: must be a string or an array of text blocks"],
  ])("rejects %s", (_name, req, message) => {
    const r = messagesToChat(req, "m");
    expect("error" in r && r.error).toContain(message);
  });
});

describe("chatToMessage", () => {
  const completion = (message: Obj, finish: string, extra: Obj = {}) => ({
    id: "chatcmpl-9f3",
    object: "chat.completion",
    model: "served",
    choices: [{ index: 0, message: { role: "assistant", ...message }, finish_reason: finish, ...extra }],
    usage: { prompt_tokens: 11, completion_tokens: 4, total_tokens: 15 },
  });

  test("text reply", () => {
    expect(chatToMessage(completion({ content: "Hello!" }, "stop"), "asked")).toEqual({
      id: "msg_9f3",
      type: "message",
      role: "assistant",
      model: "asked",
      content: [{ type: "text", text: "Hello!" }],
      stop_reason: "end_turn",
      stop_sequence: null,
      usage: { input_tokens: 11, output_tokens: 4 },
    });
  });

  test("tool calls become tool_use blocks; unparsable arguments keep their raw text", () => {
    const calls = [
      { id: "call_1", type: "function", function: { name: "f", arguments: '{"x": [1, 2]}' } },
      { id: "call_2", type: "function", function: { name: "g", arguments: "{oops" } },
      { type: "function", function: { name: "h", arguments: "" } },
    ];
    const m = chatToMessage(completion({ content: null, tool_calls: calls }, "tool_calls"), "asked");
    expect(m.content).toEqual([
      { type: "tool_use", id: "call_1", name: "f", input: { x: [1, 2] } },
      { type: "tool_use", id: "call_2", name: "g", input: {}, raw_arguments: "{oops" },
      { type: "tool_use", id: "toolu_2", name: "h", input: {} },
    ]);
    expect(m.stop_reason).toBe("tool_use");
  });

  test.each([
    ["length", {}, false, "max_tokens", null],
    ["stop", { stop_reason: "###" }, false, "stop_sequence", "###"],
    ["stop", { stop_reason: 128001 }, false, "end_turn", null],
    ["stop", {}, true, "tool_use", null],
    ["content_filter", {}, false, "refusal", null],
  ])("finish_reason %s %j (tools: %p) → %s", (finish, extra, tools, reason, sequence) => {
    const message = tools
      ? { content: "", tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{}" } }] }
      : { content: "x" };
    const m = chatToMessage(completion(message, finish, extra), "asked");
    expect([m.stop_reason, m.stop_sequence]).toEqual([reason as never, sequence]);
  });

  test("cached prompt tokens are reported apart; missing usage counts zero", () => {
    expect(
      chatToMessage(
        {
          choices: [],
          usage: { prompt_tokens: 100, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 64 } },
        },
        "m",
      ).usage,
    ).toEqual({ input_tokens: 36, output_tokens: 2, cache_read_input_tokens: 64 });
    const m = chatToMessage({}, "m");
    expect([m.usage, m.content, m.stop_reason, m.id.startsWith("msg_")]).toEqual([
      { input_tokens: 0, output_tokens: 0 },
      [],
      "end_turn",
      true,
    ]);
  });
});

describe("chatErrorToAnthropic", () => {
  test.each([
    [
      400,
      {
        error: { message: '"auto" tool choice requires --enable-auto-tool-choice', type: "BadRequestError", code: 400 },
      },
      "invalid_request_error",
      '"auto" tool choice requires --enable-auto-tool-choice',
    ],
    [
      400,
      { object: "error", message: "old vLLM shape", type: "BadRequestError", code: 400 },
      "invalid_request_error",
      "old vLLM shape",
    ],
    [
      401,
      { error: { code: 401, message: "Invalid API Key", type: "authentication_error" } },
      "authentication_error",
      "Invalid API Key",
    ],
    [403, { error: "forbidden" }, "permission_error", "forbidden"],
    [404, "404 page not found", "not_found_error", "404 page not found"],
    [404, { detail: "Not Found" }, "not_found_error", "Not Found"],
    [413, '{"error":{"message":"too big"}}', "request_too_large", "too big"],
    [
      422,
      { detail: [{ loc: ["body", "messages"], msg: "Field required" }] },
      "invalid_request_error",
      '[{"loc":["body","messages"],"msg":"Field required"}]',
    ],
    [429, { error: { message: "slow down" } }, "rate_limit_error", "slow down"],
    [500, null, "api_error", "the model runtime answered HTTP 500"],
    [503, { object: "error", message: "loading" }, "overloaded_error", "loading"],
    [529, "", "overloaded_error", "the model runtime answered HTTP 529"],
  ])("%d %j", (status, body, type, message) => {
    expect(chatErrorToAnthropic(status, body)).toEqual({ status, body: { type: "error", error: { type, message } } });
  });
});

describe("ChatStreamToMessages", () => {
  test("text then a streamed tool call, in the order the Anthropic SDK expects", () => {
    const out = events(translateAll(TOOL_STREAM, "asked"));
    expect(out.map((e) => e.event)).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "content_block_start",
      "content_block_delta",
      "content_block_delta",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    expect(out[0].data.message).toEqual({
      id: "msg_abc",
      type: "message",
      role: "assistant",
      model: "asked",
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 0, output_tokens: 0 },
    });
    expect(out[5].data).toEqual({
      type: "content_block_start",
      index: 1,
      content_block: { type: "tool_use", id: "call_1", name: "get_weather", input: {} },
    });
    expect(out.slice(6, 9).map((e) => (e.data.delta as Obj).partial_json)).toEqual([
      '{"city": "Par',
      'is", "unit"',
      ': "C"}',
    ]);
    expect(out[10].data).toEqual({
      type: "message_delta",
      delta: { stop_reason: "tool_use", stop_sequence: null },
      usage: { output_tokens: 9, input_tokens: 12 },
    });
  });

  test("emits each event as soon as its input arrives", () => {
    const t = new ChatStreamToMessages("m");
    expect(events(t.push(sse([chunk({ role: "assistant", content: "Hi" })], false))).map((e) => e.event)).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
    ]);
    expect(t.push("data: " + JSON.stringify(chunk({ content: " there" })))).toBe(""); // no line end yet
    expect(events(t.push("\n\n")).map((e) => e.event)).toEqual(["content_block_delta"]);
    expect(events(t.push(sse([chunk({}, "stop")], false))).map((e) => e.event)).toEqual(["content_block_stop"]);
    expect(events(t.push("data: [DONE]\n\n")).map((e) => e.event)).toEqual(["message_delta", "message_stop"]);
    expect([t.done, t.end()]).toEqual([true, ""]);
  });

  test("any split of the bytes (CRLF, comments, multi-byte characters) gives the same events", () => {
    const twoLines = 'data: {"id": "chatcmpl-abc", "choices":\ndata: [{"index": 0, "delta": {"content": "Hi. "}}]}\n\n'; // one event, two data lines
    const crlf = (": keep-alive\n\n" + twoLines + TOOL_STREAM).replaceAll("\n", "\r\n");
    const bytes = new TextEncoder().encode(crlf);
    const whole = translateAll(crlf);
    expect(
      events(whole)
        .slice(0, 4)
        .map((e) => e.event),
    ).toEqual(["ping", "message_start", "content_block_start", "content_block_delta"]);
    expect(events(whole)[3].data.delta).toEqual({ type: "text_delta", text: "Hi. " });
    for (let i = 1; i < bytes.length; i++) expect(translateAll([bytes.subarray(0, i), bytes.subarray(i)])).toBe(whole);
    expect(translateAll(Array.from(bytes, (b) => Uint8Array.of(b)))).toBe(whole);
    let seed = 7;
    const rand = () => (seed = (seed * 48271) % 2147483647) / 2147483647;
    for (let round = 0; round < 50; round++) {
      const cuts = [
        0,
        ...Array.from({ length: 12 }, () => Math.floor(rand() * bytes.length)).sort((a, b) => a - b),
        bytes.length,
      ];
      expect(translateAll(cuts.slice(1).map((c, k) => bytes.subarray(cuts[k], c)))).toBe(whole);
    }
    expect(translateAll(crlf.replaceAll("\r\n", "\n"))).toBe(whole);
    expect(translateAll(crlf.replaceAll("\r\n", "\r"))).toBe(whole);
  });

  test("parallel tool calls, a name that arrives late, input usage up front and a stop sequence", () => {
    const input = sse([
      { ...chunk({ role: "assistant" }), usage: { prompt_tokens: 30, completion_tokens: 0 } },
      chunk({ tool_calls: [{ index: 0, id: "call_a", function: { arguments: '{"q":' } }] }),
      chunk({ tool_calls: [{ index: 0, function: { name: "search", arguments: "1}" } }] }),
      chunk({ tool_calls: [call(1, '{"q":2}', { id: "call_b", name: "search" })] }, "stop", { stop_reason: null }),
    ]);
    const out = events(translateAll(input));
    expect(out[0].data.message).toMatchObject({ usage: { input_tokens: 30, output_tokens: 0 } });
    expect(out.slice(1).map((e) => [e.event, e.data.index ?? null])).toEqual([
      ["content_block_start", 0],
      ["content_block_delta", 0],
      ["content_block_stop", 0],
      ["content_block_start", 1],
      ["content_block_delta", 1],
      ["content_block_stop", 1],
      ["message_delta", null],
      ["message_stop", null],
    ]);
    expect(out[2].data.delta).toEqual({ type: "input_json_delta", partial_json: '{"q":1}' });
    expect(out[7].data.delta).toEqual({ stop_reason: "tool_use", stop_sequence: null });
    const stopped = events(translateAll(sse([chunk({ content: "a" }), chunk({}, "stop", { stop_reason: "END" })])));
    expect(stopped.at(-2)?.data).toEqual({
      type: "message_delta",
      delta: { stop_reason: "stop_sequence", stop_sequence: "END" },
      usage: { output_tokens: 0 },
    });
  });

  test.each([
    [
      "ends without [DONE]",
      sse([chunk({ content: "partial" })], false),
      "api_error",
      "the model runtime's stream ended before it was complete",
    ],
    [
      "runtime error chunk",
      sse(
        [chunk({ content: "a" }), { error: { message: "engine died", type: "InternalServerError", code: 500 } }],
        false,
      ),
      "api_error",
      "engine died",
    ],
    [
      "flat vLLM error chunk",
      sse([{ object: "error", message: "too long", type: "BadRequestError", code: 400 }], false),
      "invalid_request_error",
      "too long",
    ],
    ["malformed JSON", "data: {nope\n\n", "api_error", "the model runtime sent malformed stream data: {nope"],
  ])("%s → an error event, and nothing after it", (_name, input, type, message) => {
    const t = new ChatStreamToMessages("m");
    const out = events(t.push(input) + t.end() + t.push(sse([chunk({ content: "late" })])));
    expect(out.at(-1)).toEqual({ event: "error", data: { type: "error", error: { type, message } } });
    expect(out.filter((e) => e.event === "error")).toHaveLength(1);
  });

  test("fail() mid-stream gives an error event; after message_stop it gives nothing", () => {
    const t = new ChatStreamToMessages("m");
    t.push(sse([chunk({ content: "a" })], false));
    expect(events(t.fail("socket closed"))).toEqual([
      { event: "error", data: { type: "error", error: { type: "api_error", message: "socket closed" } } },
    ]);
    const done = new ChatStreamToMessages("m");
    done.push(sse([chunk({ content: "a" }, "stop")]));
    expect(done.fail("late")).toBe("");
  });
});

describe("translateChatStream", () => {
  /** An upstream whose chunks the test pushes by hand; `cancelled` resolves when the reader cancels it. */
  function upstream() {
    let ctrl!: ReadableStreamDefaultController<Uint8Array>;
    let onCancel!: () => void;
    const cancelled = new Promise<void>((r) => (onCancel = r));
    const stream = new ReadableStream<Uint8Array>({ start: (c) => void (ctrl = c), cancel: () => onCancel() });
    const send = (s: string) => ctrl.enqueue(new TextEncoder().encode(s));
    return { stream, ctrl, send, cancelled };
  }
  const read = async (r: ReadableStreamDefaultReader<Uint8Array>) => new TextDecoder().decode((await r.read()).value);

  test("passes events on while upstream is still open, then closes and releases upstream after [DONE]", async () => {
    const up = upstream();
    const reader = translateChatStream(up.stream, "m").getReader();
    up.send(sse([chunk({ content: "Hi" })], false));
    expect(events(await read(reader)).map((e) => e.event)).toEqual([
      "message_start",
      "content_block_start",
      "content_block_delta",
    ]);
    up.send(": keep-alive\n\n");
    expect(events(await read(reader)).map((e) => e.event)).toEqual(["ping"]);
    up.send(sse([chunk({}, "stop")]));
    expect(events(await read(reader)).map((e) => e.event)).toEqual([
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    expect((await reader.read()).done).toBe(true);
    await up.cancelled;
  });

  test("an upstream failure becomes an error event; a client that goes away cancels upstream", async () => {
    const up = upstream();
    const reader = translateChatStream(up.stream, "m").getReader();
    up.send(sse([chunk({ content: "Hi" })], false));
    await read(reader);
    up.ctrl.error(new Error("connection reset"));
    expect(events(await read(reader))).toEqual([
      {
        event: "error",
        data: {
          type: "error",
          error: { type: "api_error", message: "the model runtime's stream failed: connection reset" },
        },
      },
    ]);
    expect((await reader.read()).done).toBe(true);
    const up2 = upstream();
    const reader2 = translateChatStream(up2.stream, "m").getReader();
    up2.send(sse([chunk({ content: "Hi" })], false));
    await read(reader2);
    await reader2.cancel("client gone");
    await up2.cancelled;
  });
});

describe("round trip through the official Anthropic SDK", () => {
  let server: ReturnType<typeof Bun.serve>;
  let lastChatBody: Obj = {};
  let client: Anthropic;
  const UPSTREAM_ERROR = {
    error: {
      message: '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
      type: "BadRequestError",
      code: 400,
    },
  };

  /** A stand-in for inferd's route: translate the request, fake the runtime's answer, translate it back. */
  async function handle(req: Request): Promise<Response> {
    const body = (await req.json()) as Obj;
    const t = messagesToChat(body, "served-model");
    if ("error" in t)
      return Response.json(
        { type: "error", error: { type: "invalid_request_error", message: t.error } },
        { status: 400 },
      );
    lastChatBody = t.body;
    const scenario = (body.metadata as Obj | undefined)?.user_id;
    if (scenario === "runtime-400") {
      const e = chatErrorToAnthropic(400, JSON.stringify(UPSTREAM_ERROR));
      return Response.json(e.body, { status: e.status });
    }
    if (!t.body.stream) {
      const calls = [
        { id: "call_9", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
      ];
      return Response.json(
        chatToMessage(
          {
            id: "chatcmpl-abc",
            choices: [
              {
                index: 0,
                message: { role: "assistant", content: "Checking.", tool_calls: calls },
                finish_reason: "tool_calls",
              },
            ],
            usage: { prompt_tokens: 20, completion_tokens: 6 },
          },
          String(body.model),
        ),
      );
    }
    const text =
      scenario === "broken"
        ? sse([chunk({ content: "Hal" }), { error: { message: "CUDA out of memory", code: 500 } }], false)
        : TOOL_STREAM;
    const bytes = new TextEncoder().encode(text);
    let at = 0;
    const upstream = new ReadableStream<Uint8Array>({
      pull(c) {
        if (at >= bytes.length) return c.close();
        c.enqueue(bytes.slice(at, (at += 7))); // 7-byte pieces split lines, JSON and UTF-8 characters
      },
    });
    return new Response(translateChatStream(upstream, String(body.model)), {
      headers: { "content-type": "text/event-stream" },
    });
  }

  beforeAll(() => {
    server = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: (req) =>
        new URL(req.url).pathname === "/v1/messages" ? handle(req) : new Response("no", { status: 404 }),
    });
    client = new Anthropic({ baseURL: `http://127.0.0.1:${server.port}`, apiKey: "x", maxRetries: 0 });
  });
  afterAll(() => server.stop(true));

  const tools = [
    {
      name: "get_weather",
      description: "Weather",
      input_schema: { type: "object" as const, properties: { city: { type: "string" } } },
    },
  ];

  test("messages.stream(): text, tool_use with parsed input, stop_reason and usage", async () => {
    const stream = client.messages.stream({
      model: "my-workload",
      max_tokens: 100,
      messages: [{ role: "user", content: "Weather in Paris?" }],
      tools,
    });
    let streamed = "";
    stream.on("text", (t) => (streamed += t));
    const msg = await stream.finalMessage();
    expect(lastChatBody).toMatchObject({
      model: "served-model",
      stream: true,
      stream_options: { include_usage: true },
      tools: [{ type: "function", function: { name: "get_weather" } }],
    });
    expect(streamed).toBe("Let me check the weather ☀️.");
    expect(msg).toMatchObject({
      id: "msg_abc",
      model: "my-workload",
      stop_reason: "tool_use",
      stop_sequence: null,
      usage: { input_tokens: 12, output_tokens: 9 },
    });
    expect(msg.content).toEqual([
      { type: "text", text: "Let me check the weather ☀️." },
      { type: "tool_use", id: "call_1", name: "get_weather", input: { city: "Paris", unit: "C" } },
    ] as never);
  });

  test("messages.create({stream: true}) yields the raw events in order", async () => {
    const stream = await client.messages.create({
      model: "m",
      max_tokens: 100,
      messages: [{ role: "user", content: "hi" }],
      tools,
      stream: true,
    });
    const types: string[] = [];
    for await (const ev of stream) types.push(ev.type);
    expect(types[0]).toBe("message_start");
    expect(types.slice(-2)).toEqual(["message_delta", "message_stop"]);
    expect(types.filter((t) => t === "content_block_start")).toHaveLength(2);
  });

  test("messages.create() without streaming gets chatToMessage's message", async () => {
    const msg = await client.messages.create({
      model: "m",
      max_tokens: 100,
      messages: [{ role: "user", content: "hi" }],
      tools,
    });
    expect(msg).toMatchObject({
      type: "message",
      role: "assistant",
      model: "m",
      stop_reason: "tool_use",
      usage: { input_tokens: 20, output_tokens: 6 },
    });
    expect(msg.content).toEqual([
      { type: "text", text: "Checking." },
      { type: "tool_use", id: "call_9", name: "get_weather", input: { city: "Paris" } },
    ] as never);
  });

  test("a runtime 400 reaches the SDK as BadRequestError with the runtime's message unchanged", async () => {
    const err = await client.messages
      .create({
        model: "m",
        max_tokens: 10,
        messages: [{ role: "user", content: "hi" }],
        tools,
        metadata: { user_id: "runtime-400" },
      })
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.BadRequestError);
    expect((err as InstanceType<typeof Anthropic.BadRequestError>).error).toEqual({
      type: "error",
      error: { type: "invalid_request_error", message: UPSTREAM_ERROR.error.message },
    });
  });

  test("a runtime failure mid-stream rejects finalMessage() with the runtime's message", async () => {
    const stream = client.messages.stream({
      model: "m",
      max_tokens: 10,
      messages: [{ role: "user", content: "hi" }],
      metadata: { user_id: "broken" },
    });
    const err = await stream.finalMessage().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(String((err as Error).message)).toContain("CUDA out of memory");
  });
});
