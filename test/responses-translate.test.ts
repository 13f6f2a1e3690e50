import { describe, expect, test } from "bun:test";
import { accumulateResponse } from "openai/lib/responses/ResponseAccumulator";
import type { Response as OpenAIResponse, ResponseStreamEvent } from "openai/resources/responses/responses";
import {
  chatToResponse,
  needsStoredResponses,
  openAiErrorOf,
  responseShell,
  responsesToChat,
} from "../src/dataplane/responses-translate";
import { ChatStreamToResponses, ResponsesRelay } from "../src/dataplane/responses-stream";

/** The Responses ⇄ chat-completions translation on its own: requests, answers, streams and errors. */

const enc = new TextEncoder();
const sse = (...chunks: unknown[]) =>
  enc.encode(chunks.map((c) => `data: ${typeof c === "string" ? c : JSON.stringify(c)}\n\n`).join(""));
const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({
  id: "chatcmpl-1",
  object: "chat.completion.chunk",
  choices: [{ index: 0, delta, finish_reason: finish }],
});
const usage = { prompt_tokens: 7, completion_tokens: 3, total_tokens: 10 };

/** Parses Responses SSE text into its events, checking each `event:` line names its data's type. */
function events(text: string): ResponseStreamEvent[] {
  return text
    .split("\n\n")
    .filter(Boolean)
    .map((block) => {
      const [eventLine, dataLine] = block.split("\n");
      const data = JSON.parse(dataLine.slice("data: ".length));
      expect(eventLine).toBe(`event: ${data.type}`);
      return data;
    });
}

/** Runs events through the OpenAI SDK's own (strict) accumulator, as `client.responses.stream()` does. */
function accumulate(evs: ResponseStreamEvent[]): OpenAIResponse {
  let snapshot: OpenAIResponse | undefined;
  for (const e of evs) snapshot = accumulateResponse(e, snapshot as OpenAIResponse);
  return snapshot!;
}

describe("requests", () => {
  test("a string input with instructions becomes a system and a user message; settings carry over", () => {
    const r = responsesToChat(
      {
        model: "x",
        input: "hi",
        instructions: "be brief",
        temperature: 0.2,
        top_p: 0.9,
        max_output_tokens: 50,
        store: true,
        stream: true,
        text: { format: { type: "json_object" } },
      },
      "served",
    );
    expect(r).toEqual({
      body: {
        model: "served",
        messages: [
          { role: "system", content: "be brief" },
          { role: "user", content: "hi" },
        ],
        temperature: 0.2,
        top_p: 0.9,
        max_tokens: 50,
        response_format: { type: "json_object" },
        stream: true,
        stream_options: { include_usage: true },
      },
      dropped: [],
      names: new Map(),
    });
  });

  test("items: parts, images, developer role, a function call round trip, flat function tools and tool_choice", () => {
    const r = responsesToChat(
      {
        input: [
          { role: "developer", content: "terse" },
          {
            type: "message",
            role: "user",
            content: [
              { type: "input_text", text: "look" },
              { type: "input_image", image_url: "data:image/png;base64,AA", detail: "low" },
            ],
          },
          { role: "assistant", content: [{ type: "output_text", text: "checking" }] },
          {
            type: "function_call",
            id: "fc_1",
            call_id: "call_1",
            name: "get_weather",
            arguments: '{"city":"Paris"}',
            status: "completed",
          },
          { type: "function_call_output", call_id: "call_1", output: "sunny" },
        ],
        tools: [
          {
            type: "function",
            name: "get_weather",
            description: "weather",
            parameters: { type: "object", properties: { city: { type: "string" } } },
            strict: true,
          },
        ],
        tool_choice: { type: "function", name: "get_weather" },
        text: { format: { type: "json_schema", name: "out", schema: { type: "object" }, strict: true } },
      },
      "m",
    );
    expect("body" in r && r.body).toEqual({
      model: "m",
      messages: [
        { role: "system", content: "terse" },
        {
          role: "user",
          content: [
            { type: "text", text: "look" },
            { type: "image_url", image_url: { url: "data:image/png;base64,AA", detail: "low" } },
          ],
        },
        {
          role: "assistant",
          content: "checking",
          tool_calls: [
            { id: "call_1", type: "function", function: { name: "get_weather", arguments: '{"city":"Paris"}' } },
          ],
        },
        { role: "tool", tool_call_id: "call_1", content: "sunny" },
      ],
      tools: [
        {
          type: "function",
          function: {
            name: "get_weather",
            description: "weather",
            parameters: { type: "object", properties: { city: { type: "string" } } },
            strict: true,
          },
        },
      ],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      response_format: { type: "json_schema", json_schema: { name: "out", schema: { type: "object" }, strict: true } },
    });
  });

  test("what a model runtime cannot do is refused naming the field", () => {
    expect(responsesToChat({ input: 5 }, "m")).toEqual({
      error: "input: required, must be a string or an array of input items",
    });
    // Only hosted tools: nothing the runtime can call, so the request is refused naming them.
    expect(responsesToChat({ input: "x", tools: [{ type: "web_search" }] }, "m")).toMatchObject({
      error: expect.stringContaining("web_search is a hosted tool the model runtime cannot run"),
    });
    expect(
      responsesToChat({ input: [{ role: "user", content: [{ type: "input_file", file_id: "f" }] }] }, "m"),
    ).toMatchObject({ error: expect.stringContaining("input.0.content.0.type") });
    expect(responsesToChat({ input: "x", max_output_tokens: 0 }, "m")).toMatchObject({
      error: expect.stringContaining("max_output_tokens"),
    });
  });

  test("references to stored responses are refused with what to send instead", () => {
    expect(needsStoredResponses({ input: "x", previous_response_id: "resp_1" })).toContain(
      "send the whole conversation in `input`",
    );
    expect(needsStoredResponses({ input: [{ type: "item_reference", id: "msg_1" }] })).toContain("store is false");
    expect(needsStoredResponses({ input: "x", background: true })).toContain("background");
    expect(needsStoredResponses({ input: "x", store: true })).toBeUndefined();
  });
});

describe("answers", () => {
  test("text and tool calls become output items; usage and the asked model name are reported", () => {
    const chat = {
      id: "chatcmpl-9",
      choices: [
        {
          index: 0,
          message: {
            role: "assistant",
            content: "hello",
            tool_calls: [{ id: "call_7", type: "function", function: { name: "f", arguments: "{}" } }],
          },
          finish_reason: "tool_calls",
        },
      ],
      usage,
    };
    const r = chatToResponse(chat, responseShell({ instructions: "x" }, "asked"));
    expect(r).toMatchObject({
      object: "response",
      status: "completed",
      model: "asked",
      instructions: "x",
      store: false,
      usage: { input_tokens: 7, output_tokens: 3, total_tokens: 10 },
    });
    expect(r.output).toMatchObject([
      { type: "message", role: "assistant", status: "completed", content: [{ type: "output_text", text: "hello" }] },
      { type: "function_call", call_id: "call_7", name: "f", arguments: "{}", status: "completed" },
    ]);
    expect(r.id).toStartWith("resp_");
  });

  test("a length stop is an incomplete response", () => {
    const r = chatToResponse(
      { choices: [{ message: { content: "cut" }, finish_reason: "length" }] },
      responseShell({}, "m"),
    );
    expect(r).toMatchObject({ status: "incomplete", incomplete_details: { reason: "max_output_tokens" } });
  });

  test("runtime errors of every shape come back as OpenAI errors with the message unchanged", () => {
    expect(
      openAiErrorOf(400, { object: "error", message: "bad", type: "BadRequestError", param: "x", code: 400 }),
    ).toEqual({ error: { message: "bad", type: "invalid_request_error", param: "x", code: null } });
    expect(
      openAiErrorOf(500, '{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}')
        .error.message,
    ).toBe("tools param requires --jinja flag");
    expect(openAiErrorOf(404, { detail: "Not Found" }).error).toMatchObject({
      message: "Not Found",
      type: "not_found_error",
    });
    expect(openAiErrorOf(502, "").error.message).toBe("the model runtime answered HTTP 502");
  });
});

describe("streams", () => {
  test("text: the documented event sequence, numbered, accepted by the OpenAI SDK's accumulator", () => {
    const t = new ChatStreamToResponses(responseShell({ input: "x" }, "asked"));
    const bytes = sse(
      chunk({ role: "assistant", content: "" }),
      chunk({ content: "Hel" }),
      chunk({ content: "lo" }, "stop"),
      { id: "chatcmpl-1", choices: [], usage },
      "[DONE]",
    );
    // Split mid-event to prove events wait for their end.
    const out = t.push(bytes.subarray(0, 40)) + t.push(bytes.subarray(40)) + t.end();
    const evs = events(out);
    expect(evs.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
      "response.output_text.delta",
      "response.output_text.delta",
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(evs.map((e) => e.sequence_number)).toEqual(evs.map((_, i) => i));
    const final = accumulate(evs);
    expect(final.output).toMatchObject([
      { type: "message", status: "completed", content: [{ type: "output_text", text: "Hello" }] },
    ]);
    expect(final).toMatchObject({
      status: "completed",
      model: "asked",
      usage: { input_tokens: 7, output_tokens: 3, total_tokens: 10 },
    });
    expect(t.usage).toEqual({ inputTokens: 7, outputTokens: 3 });
    expect(t.done).toBe(true);
  });

  test("a function call streamed in fragments: added once named, arguments as deltas, then done", () => {
    const t = new ChatStreamToResponses(responseShell({}, "m"));
    const out =
      t.push(
        sse(
          chunk({ role: "assistant" }),
          chunk({
            tool_calls: [
              { index: 0, id: "call_1", type: "function", function: { name: "get_weather", arguments: "" } },
            ],
          }),
        ),
      ) +
      t.push(
        sse(
          chunk({ tool_calls: [{ index: 0, function: { arguments: '{"city":' } }] }),
          chunk({ tool_calls: [{ index: 0, function: { arguments: '"Paris"}' } }] }, "tool_calls"),
          "[DONE]",
        ),
      );
    const evs = events(out);
    expect(evs.map((e) => e.type)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.delta",
      "response.function_call_arguments.done",
      "response.output_item.done",
      "response.completed",
    ]);
    const final = accumulate(evs);
    expect(final.output).toMatchObject([
      {
        type: "function_call",
        call_id: "call_1",
        name: "get_weather",
        arguments: '{"city":"Paris"}',
        status: "completed",
      },
    ]);
  });

  test("a stream cut before its end, or an error chunk, ends with an error event", () => {
    const cut = new ChatStreamToResponses(responseShell({}, "m"));
    const evs = events(cut.push(sse(chunk({ content: "par" }))) + cut.end());
    expect(evs.at(-1)).toMatchObject({
      type: "error",
      message: expect.stringContaining("ended before it was complete"),
    });
    const failing = new ChatStreamToResponses(responseShell({}, "m"));
    const err = events(failing.push(sse({ error: { message: "engine died", code: 500 } })));
    expect(err).toEqual([
      { type: "error", code: "upstream_error", message: "engine died", param: null, sequence_number: 0 },
    ] as never);
    expect(failing.done).toBe(true);
  });

  test("a runtime's own stream passes through with the asked model name and its usage counted", () => {
    const relay = new ResponsesRelay("my-alias");
    const created = `event: response.created\ndata: ${JSON.stringify({ type: "response.created", response: { id: "resp_1", model: "/models/qwen", output: [] }, sequence_number: 0 })}\n\n`;
    const delta = `event: response.output_text.delta\ndata: ${JSON.stringify({ type: "response.output_text.delta", item_id: "m", output_index: 0, content_index: 0, delta: "hi", sequence_number: 1 })}\n\n`;
    const done = `event: response.completed\ndata: ${JSON.stringify({ type: "response.completed", response: { id: "resp_1", model: "/models/qwen", usage: { input_tokens: 4, output_tokens: 2 } }, sequence_number: 2 })}\n\n`;
    const out = relay.push(enc.encode(created + delta)) + relay.push(enc.encode(done)) + relay.end();
    const evs = events(out) as unknown as { type: string; response?: { model: string } }[];
    expect(evs.map((e) => e.response?.model)).toEqual(["my-alias", undefined, "my-alias"]);
    expect(out).toContain(delta);
    expect(relay.usage).toEqual({ inputTokens: 4, outputTokens: 2 });
    expect(events(new ResponsesRelay("m").fail("gone")).at(-1)).toMatchObject({ type: "error", message: "gone" });
  });
});
