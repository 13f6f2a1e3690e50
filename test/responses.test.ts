import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { createOpenAI } from "@ai-sdk/openai";
import { generateText, jsonSchema, stepCountIs, streamText, tool } from "ai";
import { join } from "node:path";
import { cleanup, tempDir, waitFor } from "./helpers/proc";
import { writeTinyGguf } from "./fixtures/gguf";
import { startServing, type Serving } from "./helpers/serving";

/**
 * The Responses API as its clients use it: the official `openai` SDK (`responses.create`, plain,
 * streamed, function tools, instructions) and the Vercel AI SDK's default OpenAI provider, on a
 * workload's base URL and on the project's. vLLM 0.11 serves /v1/responses itself (passed
 * through); vLLM 0.9.2 and llama-server do not (translated to chat completions).
 */
let s: Serving;
type W = { id: string; slug: string; model: string; served: string; path: string };
let qwen: W;
let legacy: W;
let tiny: W;
const PASS = "/v1/responses";
const CHAT = "/v1/chat/completions";

beforeAll(async () => {
  s = await startServing();
  const make = async (body: Record<string, unknown>, served: string, path: string): Promise<W> => {
    const w = await s.createWorkload(body);
    return { id: w.id, slug: w.slug, model: body.model_name as string, served, path };
  };
  const gguf = join(tempDir("gguf"), "tiny.gguf");
  writeTinyGguf(gguf);
  [qwen, legacy, tiny] = await Promise.all([
    make(
      {
        name: "qwen",
        backend: "vllm",
        model_name: "Qwen/Qwen3-8B",
        aliases: ["my-alias"],
        config: { command: "vllm serve Qwen/Qwen3-8B --enable-auto-tool-choice --tool-call-parser hermes" },
      },
      "Qwen/Qwen3-8B",
      PASS,
    ),
    make(
      {
        name: "legacy",
        backend: "vllm",
        model_name: "legacy-model",
        config: {
          command: "vllm serve legacy-model --enable-auto-tool-choice --tool-call-parser hermes",
          vllm_version: "0.9.2",
        },
      },
      "legacy-model",
      CHAT,
    ),
    make(
      {
        name: "tiny",
        backend: "llamacpp",
        model_name: "tiny",
        config: { command: `llama-server -m ${gguf} -a tiny --jinja` },
      },
      "tiny",
      CHAT,
    ),
  ]);
  await Promise.all([qwen, legacy, tiny].map((w) => s.waitState(w.id, "ready", 60_000)));
});
afterAll(async () => {
  await s.stop();
  await cleanup();
});

const workloadBase = (w: W) => `${s.url}/endpoint/${s.project}/${w.slug}/v1`;
const projectBase = () => `${s.url}/endpoint/${s.project}/v1`;
const client = (baseURL: string) => new OpenAI({ baseURL, apiKey: s.live, maxRetries: 0 });
/** The runtime paths requests for `w` reached, in order. */
const pathsOf = (w: W) => s.events((e) => e.event === "request" && e.model === w.served).map((e) => e.path as string);
/** Runs `fn` and returns the runtime paths it made requests on for `w`. */
async function reached(w: W, fn: () => Promise<unknown>): Promise<string[]> {
  const before = pathsOf(w).length;
  await fn();
  return pathsOf(w).slice(before);
}

const weather = {
  type: "function" as const,
  name: "get_weather",
  description: "Current weather for a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  strict: false,
};
const textOf = (r: OpenAI.Responses.Response) =>
  r.output
    .flatMap((o) => (o.type === "message" ? o.content : []))
    .map((c) => (c.type === "output_text" ? c.text : ""))
    .join("");

/** Each runtime with how it serves the Responses API (the workloads exist once beforeAll ran). */
const CASES: [string, () => W][] = [
  ["vLLM 0.11, passed through", () => qwen],
  ["vLLM 0.9.2, translated", () => legacy],
  ["llama-server, translated", () => tiny],
];

describe("OpenAI SDK on a workload's base URL", () => {
  for (const [how, get] of CASES) {
    test(`plain, with instructions (${how})`, async () => {
      const w = get();
      let r!: OpenAI.Responses.Response;
      let requestId: string | null = null;
      const paths = await reached(w, async () => {
        ({ data: r, request_id: requestId } = await client(workloadBase(w))
          .responses.create({ model: "default", input: "hi there", instructions: "be brief" })
          .withResponse());
      });
      expect(paths).toEqual([w.path]);
      expect(r.object).toBe("response");
      expect(requestId).toStartWith("req_");
      expect(r.status).toBe("completed");
      expect(r.output_text).toBe("You said: hi there");
      expect(r.model).toBe(w.model);
      // The instructions reached the model: they count as input tokens (2 words + 2).
      expect(r.usage).toMatchObject({ input_tokens: 4, output_tokens: 4, total_tokens: 8 });
    });

    test(`streamed: the documented events in order, numbered (${how})`, async () => {
      const w = get();
      const types: string[] = [];
      const seqs: number[] = [];
      let text = "";
      let completed: OpenAI.Responses.Response | undefined;
      const paths = await reached(w, async () => {
        const stream = await client(workloadBase(w)).responses.create({
          model: w.slug,
          input: "stream this please",
          stream: true,
        });
        for await (const ev of stream) {
          types.push(ev.type);
          seqs.push(ev.sequence_number);
          if (ev.type === "response.output_text.delta") text += ev.delta;
          if (ev.type === "response.completed") completed = ev.response;
        }
      });
      expect(paths).toEqual([w.path]);
      const once = types.filter((t) => t !== "response.output_text.delta");
      expect(once).toEqual([
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
      ]);
      expect(types.filter((t) => t === "response.output_text.delta").length).toBeGreaterThan(1);
      expect(seqs).toEqual(seqs.map((_, k) => k));
      expect(text).toBe("You said: stream this please");
      // Asked by its slug: named as /v1/models lists it.
      expect(completed!.model).toBe(w.model);
      expect(completed!.usage).toMatchObject({ input_tokens: 3, output_tokens: 5, total_tokens: 8 });
    });

    test(`a function tool round trip: call, function_call_output, final answer (${how})`, async () => {
      const w = get();
      const c = client(workloadBase(w));
      const first = await c.responses.create({ model: w.model, input: "Weather in Paris?", tools: [weather] });
      const call = first.output.find((o) => o.type === "function_call");
      expect(call).toMatchObject({ type: "function_call", name: "get_weather" });
      if (call?.type !== "function_call") throw new Error("no function call");
      expect(JSON.parse(call.arguments)).toEqual({ city: "test" });
      const second = await c.responses.create({
        model: w.model,
        tools: [weather],
        input: [
          { role: "user", content: "Weather in Paris?" },
          ...first.output,
          { type: "function_call_output", call_id: call.call_id, output: "sunny" },
        ] as OpenAI.Responses.ResponseInput,
      });
      expect(second.output_text).toBe("Tool result: sunny");
      // Streamed, through the SDK's strict event accumulator.
      const streamed = await c.responses
        .stream({ model: w.model, input: "Weather in Rome?", tools: [weather] })
        .finalResponse();
      expect(streamed.output).toMatchObject([
        { type: "function_call", name: "get_weather", arguments: '{"city":"test"}', status: "completed" },
      ]);
    });
  }

  for (const [how, get] of CASES.slice(1)) {
    test(`Codex's default request: namespace tools flattened and called back with their namespace, web_search left out and named (${how})`, async () => {
      const w = get();
      const c = client(workloadBase(w));
      // As Codex 0.171 sends it: a developer message, store false, encrypted reasoning asked for, a
      // cache key, its MCP tools in a namespace and the hosted web_search tool.
      const codex = {
        model: w.model,
        instructions: "You are a coding agent.",
        input: [
          {
            type: "message",
            role: "developer",
            content: [{ type: "input_text", text: "<permissions>workspace-write</permissions>" }],
          },
          { type: "message", role: "user", content: [{ type: "input_text", text: "Weather in Paris?" }] },
        ],
        tools: [
          { type: "namespace", name: "mcp_weather", description: "weather tools", tools: [weather] },
          { type: "web_search" },
        ],
        tool_choice: "auto",
        parallel_tool_calls: false,
        store: false,
        include: ["reasoning.encrypted_content"],
        prompt_cache_key: "019a-conversation",
        stream: false,
      } as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming;
      const first = await c.responses.create(codex);
      const call = first.output.find((o) => o.type === "function_call") as Record<string, unknown> | undefined;
      expect(call).toMatchObject({ type: "function_call", name: "get_weather", namespace: "mcp_weather" });
      expect(first.metadata).toMatchObject({ "inferd.dropped_tools": "web_search" });
      // The runtime was asked with one flat tool, no web_search.
      const sent = s
        .events((e) => e.event === "request" && e.model === w.served && e.path === "/v1/chat/completions")
        .at(-1);
      expect(sent?.tools).toEqual(["mcp_weather__get_weather"]);
      // The next turn sends the call back with its namespace, and the output: the model answers.
      const second = await c.responses.create({
        ...codex,
        input: [
          ...(codex.input as object[]),
          call,
          { type: "function_call_output", call_id: call!.call_id, output: "sunny" },
        ],
      } as unknown as OpenAI.Responses.ResponseCreateParamsNonStreaming);
      expect(second.output_text).toBe("Tool result: sunny");
      // Streamed, the SDK's accumulator sees the namespace too.
      const streamed = await c.responses.stream({ ...codex, stream: true } as never).finalResponse();
      expect(streamed.output[0]).toMatchObject({
        type: "function_call",
        name: "get_weather",
        namespace: "mcp_weather",
      });
    });
  }

  test("bad requests are 4xx in OpenAI's shape, never 500, on either path", async () => {
    const bad: [string, unknown][] = [
      ["not json", undefined],
      ["a JSON array", [1, 2]],
      ["no input", {}],
      ["input a number", { input: 5 }],
      ["a null item", { input: [null] }],
      ["an item_reference", { input: [{ type: "item_reference", id: "msg_1" }] }],
      ["background", { input: "x", background: true }],
      ["a nameless tool", { input: "x", tools: [{ type: "function" }] }],
      ["a schema format without a schema", { input: "x", text: { format: { type: "json_schema", name: "n" } } }],
      ["a string temperature", { input: "x", temperature: "hot" }],
    ];
    for (const w of [qwen, legacy]) {
      for (const [what, body] of bad) {
        const r = await s.data(
          w.slug,
          "/v1/responses",
          body === undefined ? { raw: "not json", headers: { "content-type": "application/json" } } : { body },
        );
        const json = await r.json();
        // Passed through, the runtime judges what it accepts; translated, inferd refuses what it cannot translate.
        expect({ what, w: w.slug, below500: r.status < 500 }).toEqual({ what, w: w.slug, below500: true });
        if (w === legacy)
          expect({ what, status: r.status, message: typeof json.error?.message }).toEqual({
            what,
            status: 400,
            message: "string",
          });
      }
    }
  });

  test("usage is counted on the workload for plain and streamed answers, passed through or translated", async () => {
    /**
     * The workload's usage once it counts at least `requests` (a stream is counted as it ends). The
     * requests inferd refused itself before any runtime answered count too (the bad ones above).
     */
    const counted = (w: W, requests: number) =>
      waitFor(
        async () => {
          const u = (await s.workload(w.id)).usage;
          return u.requests >= requests ? u : undefined;
        },
        { what: `usage of ${w.slug} to count ${requests} requests` },
      );
    for (const w of [qwen, legacy]) {
      // Every earlier request was recorded as it ended: a usage export writes the counts, then they are read.
      expect((await s.admin("/admin/usage?group_by=workload")).status).toBe(200);
      const before = (await s.workload(w.id)).usage;
      const c = client(workloadBase(w));
      await c.responses.create({ input: "count me please" });
      const stream = await c.responses.create({ input: "count me please", stream: true });
      for await (const _ of stream) void _;
      const after = await counted(w, before.requests + 2);
      expect(after.requests - before.requests).toBe(2);
      expect(after.input_tokens - before.input_tokens).toBe(6);
      expect(after.output_tokens - before.output_tokens).toBe(10);
      expect(after.errors).toBe(before.errors);
    }
  });

  test("text.format json_schema and sampling settings reach a translated runtime as chat settings", async () => {
    const r = await client(workloadBase(legacy)).responses.create({
      input: "json please",
      temperature: 0.1,
      top_p: 0.5,
      max_output_tokens: 2,
      store: true,
      text: {
        format: { type: "json_schema", name: "answer", schema: { type: "object", properties: {} }, strict: true },
      },
    });
    // max_output_tokens became max_tokens: the fake stopped after two words.
    expect(r.status).toBe("incomplete");
    expect(r.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(r.output_text).toBe("You said:");
    expect(r).toMatchObject({
      temperature: 0.1,
      top_p: 0.5,
      max_output_tokens: 2,
      store: false,
      text: { format: { type: "json_schema", name: "answer" } },
    });
  });
});

describe("OpenAI SDK on the project's base URL", () => {
  test("routed by model name, slug or alias; the answer names the workload's model as /v1/models lists it first", async () => {
    const c = client(projectBase());
    for (const [model, w] of [
      ["Qwen/Qwen3-8B", qwen],
      [qwen.slug, qwen],
      ["my-alias", qwen],
      ["legacy-model", legacy],
      ["tiny", tiny],
    ] as const) {
      const paths = await reached(w, async () => {
        const r = await c.responses.create({ model, input: `hello ${model}`, instructions: "x" });
        expect(r.output_text).toBe(`You said: hello ${model}`);
        expect(r.model).toBe(w.model);
      });
      expect(paths).toEqual([w.path]);
    }
  });

  test("streamed through the SDK's accumulator, on both paths", async () => {
    for (const [model, w] of [
      ["my-alias", qwen],
      ["legacy-model", legacy],
    ] as const) {
      const final = await client(projectBase())
        .responses.stream({ model, input: "stream routed", instructions: "be brief" })
        .finalResponse();
      expect(final.output_text).toBe("You said: stream routed");
      expect(final.model).toBe(w.model);
      expect(final.usage?.input_tokens).toBe(4);
    }
  });

  test("an unknown model is 404 model_not_found naming the models the key may use", async () => {
    const e = await client(projectBase())
      .responses.create({ model: "gpt-5", input: "x" })
      .catch((x) => x);
    expect(e).toBeInstanceOf(OpenAI.NotFoundError);
    expect(e.code).toBe("model_not_found");
    expect(e.message).toContain('"my-alias"');
  });

  test("previous_response_id is refused: 400 saying to send the conversation in input", async () => {
    for (const model of ["my-alias", "legacy-model"]) {
      const e = await client(projectBase())
        .responses.create({ model, input: "and then?", previous_response_id: "resp_123" })
        .catch((x) => x);
      expect(e).toBeInstanceOf(OpenAI.BadRequestError);
      expect(e.message).toContain("previous_response_id is not supported");
      expect(e.message).toContain("send the whole conversation in `input`");
    }
  });

  test("what a translated runtime cannot do is a 400 naming the field; a runtime's own error keeps its message", async () => {
    const c = client(projectBase());
    const hosted = await c.responses
      .create({ model: "legacy-model", input: "x", tools: [{ type: "web_search" }] })
      .catch((x) => x);
    expect(hosted).toBeInstanceOf(OpenAI.BadRequestError);
    expect(hosted.message).toContain("web_search is a hosted tool the model runtime cannot run");
    const noFlags = await s.createWorkload({
      name: "noflags",
      backend: "vllm",
      model_name: "noflags",
      config: { command: "vllm serve noflags" },
    });
    await s.waitState(noFlags.id);
    const runtime = await c.responses.create({ model: "noflags", input: "x", tools: [weather] }).catch((x) => x);
    expect(runtime).toBeInstanceOf(OpenAI.BadRequestError);
    expect(runtime.error).toMatchObject({ type: "invalid_request_error" });
    expect(runtime.message).toContain("--enable-auto-tool-choice");
  });
});

describe("Vercel AI SDK, default OpenAI provider (the Responses API)", () => {
  const provider = () => createOpenAI({ baseURL: projectBase(), apiKey: s.live });
  const getWeather = tool({
    description: "Current weather for a city",
    inputSchema: jsonSchema<{ city: string }>({
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
    }),
    execute: async ({ city }) => `sunny in ${city}`,
  });

  test("generateText and streamText, passed through and translated", async () => {
    for (const w of [qwen, legacy]) {
      const model = w === qwen ? "my-alias" : "legacy-model";
      const paths = await reached(w, async () => {
        const r = await generateText({ model: provider()(model), system: "be brief", prompt: "hello ai" });
        expect(r.text).toBe("You said: hello ai");
        expect(r.usage.inputTokens).toBe(4);
        const streamed = streamText({ model: provider()(model), prompt: "stream ai" });
        let text = "";
        for await (const piece of streamed.textStream) text += piece;
        expect(text).toBe("You said: stream ai");
        expect((await streamed.usage).outputTokens).toBe(4);
      });
      expect(paths).toEqual([w.path, w.path]);
    }
  });

  test("a follow-up turn: references to stored items are a clear 400; with store: false the items are sent and answered", async () => {
    const model = provider()("legacy-model");
    const first = await generateText({ model, prompt: "first turn" });
    const messages = [
      { role: "user" as const, content: "first turn" },
      ...first.response.messages,
      { role: "user" as const, content: "second turn" },
    ];
    const refused = await generateText({ model, messages, maxRetries: 0 }).catch((x) => x);
    expect(refused.statusCode).toBe(400);
    expect(refused.message).toContain("providerOptions.openai.store is false");
    const r = await generateText({ model, messages, providerOptions: { openai: { store: false } } });
    expect(r.text).toBe("You said: second turn");
  });

  test("a tool loop: the call runs, its result goes back, the model answers (plain and streamed)", async () => {
    for (const model of ["my-alias", "legacy-model", "tiny"]) {
      const r = await generateText({
        model: provider()(model),
        tools: { get_weather: getWeather },
        stopWhen: stepCountIs(3),
        prompt: "Weather in Oslo?",
      });
      expect(r.steps[0].toolCalls).toMatchObject([{ toolName: "get_weather", input: { city: "test" } }]);
      expect(r.text).toBe("Tool result: sunny in test");
      const streamed = streamText({
        model: provider()(model),
        tools: { get_weather: getWeather },
        stopWhen: stepCountIs(3),
        prompt: "Weather in Oslo?",
      });
      let text = "";
      for await (const piece of streamed.textStream) text += piece;
      expect(text).toBe("Tool result: sunny in test");
    }
  });
});
