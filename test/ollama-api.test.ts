import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Ollama, type ChatResponse, type Message, type Tool } from "ollama";
import pkg from "../package.json";
import { freePort } from "./fixtures";
import { cleanup, tempDir, waitFor } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";

/**
 * The `ollama` JavaScript client pointed at inferd, as an Ollama app on the LAN would be: the project
 * base (`/endpoint/<project>`, ollama-js keeps a host's path and appends `/api/<name>`) reaching two
 * vLLM workloads by model name and alias, translated to their OpenAI-style routes; a workload's own
 * base; and an `ollama`-backend workload, whose requests go to the daemon's own /api routes.
 */
let s: Serving;
let chat: { id: string; slug: string };
let embedder: { id: string; slug: string };
let llama: { id: string; slug: string };
const projectBase = () => `${s.url}/endpoint/${s.project}`;
const client = (host = projectBase(), key: string | null = s.live) =>
  new Ollama({ host, headers: key ? { Authorization: `Bearer ${key}` } : {} });

beforeAll(async () => {
  const port = await freePort();
  // Streamed tokens 5 ms apart, so a client can leave in the middle of an answer.
  s = await startServing({
    OLLAMA_HOST: `127.0.0.1:${port}`,
    FAKE_OLLAMA_DIR: tempDir("ollama"),
    FAKE_PULL_MS: "100",
    FAKE_OLLAMA_UNKNOWN: "no-such-model",
    FAKE_TOKEN_MS: "5",
  });
  chat = await s.createWorkload({
    name: "chat",
    backend: "vllm",
    model_name: "org/chat-7b",
    aliases: ["fast"],
    config: {
      command: "vllm serve org/chat-7b --enable-auto-tool-choice --tool-call-parser hermes --max-model-len 300",
    },
  });
  embedder = await s.createWorkload({
    name: "embedder",
    backend: "vllm",
    task_type: "embedding",
    model_name: "org/embed-small",
    config: { command: "vllm serve org/embed-small" },
  });
  llama = await s.createWorkload({ name: "llama", backend: "ollama", model_name: "llama3.2", aliases: ["local"] });
  await Promise.all([chat, embedder, llama].map((w) => s.waitState(w.id)));
});
afterAll(async () => {
  await s.stop();
  await cleanup();
});

const weather: Tool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Current weather for a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
  },
};

/** Every part of a streamed answer. */
async function collect<T>(it: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const part of it) out.push(part);
  return out;
}

/** The rejection of a client call. */
async function failure(p: Promise<unknown>): Promise<Error & { status_code?: number }> {
  try {
    await p;
  } catch (e) {
    return e as Error & { status_code?: number };
  }
  throw new Error("the call did not fail");
}

/** The usage counters of a workload once they have grown past `before` requests. */
const usageAfter = (id: string, before: number) =>
  waitFor(
    async () => {
      const u = (await s.workload(id)).usage;
      return u.requests > before ? u : undefined;
    },
    { what: `usage of ${id} past ${before} requests` },
  );

describe("the project base: two workloads by model name and alias", () => {
  test("chat answers in Ollama's shape, named as asked, and is metered", async () => {
    const before = (await s.workload(chat.id)).usage;
    const r = await client().chat({ model: "fast", messages: [{ role: "user", content: "hello there" }] });
    expect(r.model).toBe("fast");
    expect(r.message).toEqual({ role: "assistant", content: "You said: hello there" });
    expect(r.done).toBe(true);
    expect(r.done_reason).toBe("stop");
    expect(r.prompt_eval_count).toBe(2);
    expect(r.eval_count).toBe(4);
    expect(Number.isNaN(Date.parse(String(r.created_at)))).toBe(false);
    for (const d of [r.total_duration, r.load_duration, r.prompt_eval_duration, r.eval_duration])
      expect(Number.isInteger(d)).toBe(true);
    const after = await usageAfter(chat.id, before.requests);
    expect(after.input_tokens - before.input_tokens).toBe(2);
    expect(after.output_tokens - before.output_tokens).toBe(4);
  });

  test("a streamed chat is NDJSON parts ending with done and the counts, and is metered", async () => {
    const before = (await s.workload(chat.id)).usage;
    const parts = await collect(
      await client().chat({
        model: "org/chat-7b",
        messages: [{ role: "user", content: "stream this please" }],
        stream: true,
      }),
    );
    expect(parts.length).toBeGreaterThan(2);
    expect(parts.map((p) => p.message.content).join("")).toBe("You said: stream this please");
    expect(parts.every((p) => p.model === "org/chat-7b")).toBe(true);
    expect(parts.slice(0, -1).every((p) => !p.done)).toBe(true);
    const last = parts.at(-1)!;
    expect(last).toMatchObject({ done: true, done_reason: "stop", prompt_eval_count: 3, eval_count: 5 });
    expect(last.total_duration).toBeGreaterThan(0);
    const after = await usageAfter(chat.id, before.requests);
    expect(after.output_tokens - before.output_tokens).toBe(5);
  });

  test("tools: the call comes back with object arguments, and the tool's result goes back in", async () => {
    const ask: Message = { role: "user", content: "weather in Paris?" };
    const r = await client().chat({ model: "fast", messages: [ask], tools: [weather], stream: false });
    expect(r.message.tool_calls).toHaveLength(1);
    expect(r.message.tool_calls![0].function).toMatchObject({ name: "get_weather", arguments: { city: "test" } });
    const followUp = await client().chat({
      model: "fast",
      messages: [ask, r.message, { role: "tool", content: "sunny, 21C", tool_name: "get_weather" }],
      tools: [weather],
    });
    expect(followUp.message.content).toBe("Tool result: sunny, 21C");
    expect(followUp.message.tool_calls).toBeUndefined();

    const parts = await collect(
      await client().chat({ model: "fast", messages: [ask], tools: [weather], stream: true }),
    );
    const called = parts.flatMap((p) => p.message.tool_calls ?? []);
    expect(called.map((c) => c.function)).toEqual([
      expect.objectContaining({ name: "get_weather", arguments: { city: "test" } }),
    ]);
    expect(parts.at(-1)!.done).toBe(true);
  });

  test("options, format and images reach the runtime in OpenAI's terms", async () => {
    const short = await client().chat({
      model: "fast",
      messages: [{ role: "user", content: "one two three four" }],
      options: { num_predict: 2, temperature: 0.1, top_p: 0.9, seed: 7, stop: ["\n"] },
    });
    expect(short.message.content).toBe("You said:");
    expect(short.done_reason).toBe("length");
    const json = await client().chat({
      model: "fast",
      messages: [{ role: "user", content: "as json" }],
      format: { type: "object", properties: { a: { type: "string" } } },
    });
    expect(json.done).toBe(true);
    const png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
    const seen = await client().chat({
      model: "fast",
      messages: [{ role: "user", content: "what is this", images: [png] }],
    });
    expect(seen.message.content).toBe("You said: what is this");
  });

  test("generate: plain, cut by num_predict, and streamed", async () => {
    const g = await client().generate({ model: "fast", prompt: "tell me a story" });
    expect(g).toMatchObject({
      model: "fast",
      response: "You said: tell me a story",
      done: true,
      done_reason: "stop",
      prompt_eval_count: 4,
      eval_count: 6,
    });
    const cut = await client().generate({ model: "fast", prompt: "tell me a story", options: { num_predict: 3 } });
    expect(cut).toMatchObject({ response: "You said: tell", done_reason: "length" });
    const parts = await collect(await client().generate({ model: "org/chat-7b", prompt: "go on", stream: true }));
    expect(parts.map((p) => p.response).join("")).toBe("You said: go on");
    expect(parts.at(-1)).toMatchObject({ done: true, eval_count: 4 });
    // Nothing to generate: Ollama only loads the model, and says so.
    expect(await client().generate({ model: "fast", prompt: "" })).toMatchObject({
      model: "fast",
      response: "",
      done: true,
      done_reason: "load",
    });
  });

  test("embed and the legacy embeddings", async () => {
    const before = (await s.workload(embedder.id)).usage;
    const e = await client().embed({ model: "org/embed-small", input: ["first text", "second one here"] });
    expect(e.model).toBe("org/embed-small");
    expect(e.embeddings).toHaveLength(2);
    expect(e.embeddings[0]).toHaveLength(8);
    expect(e.prompt_eval_count).toBe(5);
    const one = await client().embeddings({ model: "org/embed-small", prompt: "first text" });
    expect(Object.keys(one)).toEqual(["embedding"]);
    expect(one.embedding).toEqual(e.embeddings[0]);
    const after = await usageAfter(embedder.id, before.requests + 1);
    expect(after.input_tokens - before.input_tokens).toBe(7);
  });

  test("list, show, ps and version", async () => {
    const tags = await client().list();
    expect(tags.models.map((m) => m.name).sort()).toEqual([
      "fast",
      "llama3.2",
      "local",
      "org/chat-7b",
      "org/embed-small",
    ]);
    const chatTag = tags.models.find((m) => m.name === "org/chat-7b")!;
    expect(chatTag.model).toBe("org/chat-7b");
    expect(chatTag.digest).toMatch(/^[0-9a-f]{64}$/);
    expect(chatTag.details.parameter_size).toBe("7B");

    const shown = await client().show({ model: "fast" });
    expect(shown.details.parameter_size).toBe("7B");
    expect(shown.capabilities).toEqual(["completion", "tools"]);
    expect((await client().show({ model: "org/embed-small" })).capabilities).toEqual(["embedding"]);
    // The Ollama runtime knows its model: its own answer.
    const local = await client().show({ model: "local" });
    expect(local.details).toMatchObject({ format: "gguf", family: "llama" });

    const ps = await client().ps();
    expect(ps.models.map((m) => m.name).sort()).toEqual([
      "fast",
      "llama3.2",
      "local",
      "org/chat-7b",
      "org/embed-small",
    ]);
    expect(Date.parse(String(ps.models[0].expires_at))).toBeGreaterThan(Date.now() + 100 * 365 * 86_400_000);
    expect(await client().version()).toEqual({ version: pkg.version });
  });

  test("a model tagged :latest finds the workload of the bare name", async () => {
    const r = await client().chat({ model: "fast:latest", messages: [{ role: "user", content: "tagged" }] });
    expect(r.model).toBe("fast:latest");
    expect(r.message.content).toBe("You said: tagged");
  });
});

describe("errors are Ollama's {error: string}, readable in the client", () => {
  test("an unknown model is a 404 naming the models the key may use", async () => {
    const e = await failure(client().chat({ model: "nope", messages: [{ role: "user", content: "hi" }] }));
    expect(e.status_code).toBe(404);
    expect(e.message).toContain('"nope"');
    expect(e.message).toContain('"fast"');
    expect(e.message).not.toContain("[object Object]");
    const raw = await fetch(`${projectBase()}/api/chat`, {
      method: "POST",
      headers: { authorization: `Bearer ${s.live}` },
      body: JSON.stringify({ model: "nope", messages: [] }),
    });
    expect(raw.status).toBe(404);
    const body = await raw.json();
    expect(Object.keys(body)).toEqual(["error"]);
    expect(typeof body.error).toBe("string");
  });

  test("no key is a 401", async () => {
    const e = await failure(client(projectBase(), null).list());
    expect(e.status_code).toBe(401);
    expect(e.message.length).toBeGreaterThan(5);
    expect(e.message).not.toContain("[object Object]");
  });

  test("the runtime's own error comes back as a string with its status, and counts as an error", async () => {
    const before = (await s.workload(chat.id)).usage;
    const long = Array.from({ length: 400 }, (_, i) => `w${i}`).join(" ");
    const e = await failure(client().chat({ model: "fast", messages: [{ role: "user", content: long }] }));
    expect(e.status_code).toBe(400);
    expect(e.message).toContain("maximum context length is 300 tokens");
    const after = await waitFor(
      async () => {
        const u = (await s.workload(chat.id)).usage;
        return u.errors > before.errors ? u : undefined;
      },
      { what: "the error counted" },
    );
    expect(after.errors - before.errors).toBe(1);
  });

  test("bad input is a 400 with a clear message, never a 500", async () => {
    const post = (path: string, body: unknown) =>
      fetch(`${projectBase()}/api/${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${s.live}` },
        body: typeof body === "string" ? body : JSON.stringify(body),
      });
    const cases: [string, unknown, string][] = [
      ["chat", "{not json", ""],
      ["chat", { model: "fast", messages: "hi" }, "messages"],
      [
        "chat",
        { model: "fast", messages: [{ role: "user", content: "x" }], options: { temperature: "hot" } },
        "options.temperature",
      ],
      ["chat", { model: "fast", messages: [{ role: "user", content: "x" }], format: "yaml" }, "format"],
      ["generate", { model: "fast", prompt: 42 }, "prompt"],
      ["embed", { model: "org/embed-small", input: 5 }, "input"],
    ];
    for (const [path, body, mentions] of cases) {
      const r = await post(path, body);
      expect(r.status).toBe(400);
      const e = await r.json();
      expect(typeof e.error).toBe("string");
      expect(e.error).toContain(mentions);
    }
  });
});

describe("streaming on the wire", () => {
  test("without `stream` the answer streams as application/x-ndjson (Ollama's default); `stream: false` is one JSON object", async () => {
    const r = await fetch(`${projectBase()}/api/chat`, {
      method: "POST",
      headers: { authorization: `Bearer ${s.live}` },
      body: JSON.stringify({ model: "fast", messages: [{ role: "user", content: "wire check" }] }),
    });
    expect(r.headers.get("content-type")).toBe("application/x-ndjson");
    expect(r.headers.get("x-request-id")).toBeTruthy();
    const lines = (await r.text())
      .split("\n")
      .filter(Boolean)
      .map((l) => JSON.parse(l) as ChatResponse);
    expect(lines.at(-1)!.done).toBe(true);
    expect(lines.map((l) => l.message.content).join("")).toBe("You said: wire check");
    const one = await fetch(`${projectBase()}/api/chat`, {
      method: "POST",
      headers: { authorization: `Bearer ${s.live}` },
      body: JSON.stringify({ model: "fast", stream: false, messages: [{ role: "user", content: "wire check" }] }),
    });
    expect(one.headers.get("content-type")).toContain("application/json");
    expect((await one.json()).message.content).toBe("You said: wire check");
  });

  test("a client leaving mid-stream frees the replica's slot and stops the runtime", async () => {
    const long = Array.from({ length: 120 }, (_, i) => `w${i}`).join(" ");
    const stream = await client().chat({ model: "fast", messages: [{ role: "user", content: long }], stream: true });
    for await (const part of stream) {
      expect(part.done).toBe(false);
      stream.abort();
      break;
    }
    await waitFor(() => s.events((e) => e.event === "aborted" && e.model === "org/chat-7b").length > 0, {
      what: "the runtime to see the client leave",
    });
    await waitFor(async () => (await s.workload(chat.id)).assignments.every((a) => a.in_flight === 0), {
      what: "the slot freed",
    });
  });
});

describe("a workload's own base", () => {
  test("chat, list and a model it does not serve", async () => {
    const own = client(`${projectBase()}/${chat.slug}`);
    const r = await own.chat({ model: "org/chat-7b", messages: [{ role: "user", content: "own base" }] });
    expect(r.message.content).toBe("You said: own base");
    expect((await own.generate({ model: "default", prompt: "hi" })).model).toBe("org/chat-7b");
    expect((await own.list()).models.map((m) => m.name)).toEqual(["org/chat-7b", "fast"]);
    const e = await failure(own.chat({ model: "org/embed-small", messages: [{ role: "user", content: "x" }] }));
    expect(e.status_code).toBe(400);
    expect(e.message).toContain("not served by the queue");
  });
});

describe("an ollama-backend workload: passed through to the daemon's own API", () => {
  test("chat (plain and streamed), generate and embed reach /api/<name> on the daemon, named as asked", async () => {
    const before = (await s.workload(llama.id)).usage;
    const traced = new Ollama({
      host: projectBase(),
      headers: { Authorization: `Bearer ${s.live}`, "x-request-id": "trace-ollama-1" },
    });
    const r = await traced.chat({ model: "local", messages: [{ role: "user", content: "hi daemon" }] });
    expect(r).toMatchObject({
      model: "local",
      message: { role: "assistant", content: "You said: hi daemon" },
      done: true,
      prompt_eval_count: 2,
      eval_count: 4,
    });
    const parts = await collect(
      await client().chat({ model: "llama3.2", messages: [{ role: "user", content: "stream daemon" }], stream: true }),
    );
    expect(parts.map((p) => p.message.content).join("")).toBe("You said: stream daemon");
    expect(parts.at(-1)).toMatchObject({ model: "llama3.2", done: true, eval_count: 4 });
    const g = await client().generate({ model: "local", prompt: "gen daemon" });
    expect(g).toMatchObject({ model: "local", response: "You said: gen daemon", done: true });
    const e = await client().embed({ model: "local", input: "embed me" });
    expect(e.embeddings[0]).toHaveLength(8);
    const paths = s
      .events((ev) => ev.event === "request" && String(ev.path).startsWith("/api/"))
      .map((ev) => `${ev.path} ${ev.model}`);
    expect(paths).toEqual(
      expect.arrayContaining(["/api/chat llama3.2", "/api/generate llama3.2", "/api/embed llama3.2"]),
    );
    // The caller's request id reached the runtime.
    expect(s.events((ev) => ev.event === "request" && ev.request_id === "trace-ollama-1")).toHaveLength(1);
    const after = await usageAfter(llama.id, before.requests + 3);
    expect(after.requests - before.requests).toBe(4);
    expect(after.input_tokens - before.input_tokens).toBe(2 + 2 + 2 + 2);
    expect(after.output_tokens - before.output_tokens).toBe(4 + 4 + 4);
  });

  test("the daemon's errors pass through as Ollama strings", async () => {
    const r = await fetch(`${projectBase()}/api/generate`, {
      method: "POST",
      headers: { authorization: `Bearer ${s.live}` },
      body: JSON.stringify({ model: "local", prompt: 42 }),
    });
    expect(r.status).toBe(400);
    expect(typeof (await r.json()).error).toBe("string");
  });
});

describe("what a key sees", () => {
  const keyFor = async (body: Record<string, unknown>) =>
    (await (await s.admin(`/admin/projects/${s.project}/keys`, { body: { type: "live", ...body } })).json())
      .secret as string;

  test("an endpoint-scoped key lists and reaches only its endpoints", async () => {
    const scoped = client(
      projectBase(),
      await keyFor({ name: "embed-only", scope: "endpoints", endpoints: [`${s.project}/${embedder.slug}`] }),
    );
    expect((await scoped.list()).models.map((m) => m.name)).toEqual(["org/embed-small"]);
    expect((await scoped.ps()).models.map((m) => m.name)).toEqual(["org/embed-small"]);
    const e = await failure(scoped.chat({ model: "fast", messages: [{ role: "user", content: "x" }] }));
    expect(e.status_code).toBe(404);
    expect(e.message).toContain('models you may use: "org/embed-small"');
  });

  test("answers that run nothing (show, a load) give the key's concurrency back", async () => {
    const one = client(projectBase(), await keyFor({ name: "one-at-a-time", limits: { max_concurrent: 1 } }));
    for (let i = 0; i < 3; i++) {
      expect((await one.show({ model: "fast" })).capabilities).toContain("completion");
      expect((await one.chat({ model: "fast", messages: [] })).done_reason).toBe("load");
    }
    expect(
      (await one.chat({ model: "fast", messages: [{ role: "user", content: "still allowed" }] })).message.content,
    ).toBe("You said: still allowed");
  });

  test("ps lists only models with a ready replica; tags leaves out a model whose workload failed", async () => {
    const ghost = await s.createWorkload({ name: "ghost", backend: "ollama", model_name: "no-such-model" });
    await s.waitState(ghost.id, "failed");
    // A picker (Open WebUI) must not offer a model that can only fail (issue 37, item 10).
    expect((await client().list()).models.map((m) => m.name)).not.toContain("no-such-model");
    expect((await client().ps()).models.map((m) => m.name)).not.toContain("no-such-model");
    const e = await failure(client().chat({ model: "no-such-model", messages: [{ role: "user", content: "x" }] }));
    expect(e.status_code).toBe(503);
    expect(e.message).toContain("failed to start");
  });
});
