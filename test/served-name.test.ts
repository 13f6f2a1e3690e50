import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { cleanup, waitFor } from "./helpers/proc";
import { writeTinyGguf } from "./fixtures/gguf";
import { sseEvents, startServing, type Serving } from "./helpers/serving";

/**
 * Clients never see a server path as the model: every answer — the OpenAI, Anthropic, Responses and
 * Ollama shapes, streamed or not, on a workload's base URL and on its project's — and every job
 * result names the model as `GET …/v1/models` lists it. llama-server (faked like the real one)
 * calls its model by its `-m` path when it has no alias; inferd launches it with the workload's
 * name as alias, and renames what runtimes it does not launch that way still say (a user's own
 * alias, vLLM's own `--served-model-name`).
 */
let s: Serving;
/** llama-server with no alias: its GGUF lives under `<data-dir>/models/`. */
let plain: { id: string; slug: string };
/** llama-server with the user's own alias, which differs from the workload's name (and an inferd alias). */
let ownAlias: { id: string; slug: string };
/** vLLM serving a local directory under its own served name (passes /v1/messages and /v1/responses through). */
let vllm: { id: string; slug: string };
let gguf: string;
const workloadBase = (w: string) => `${s.url}/endpoint/${s.project}/${w}`;
const projectBase = () => `${s.url}/endpoint/${s.project}`;

beforeAll(async () => {
  s = await startServing();
  gguf = join(s.dataDir, "models", "hf", "someone", "tiny-GGUF", "tiny-Q4_K_M.gguf");
  writeTinyGguf(gguf);
  plain = await s.createWorkload({
    name: "tiny",
    backend: "llamacpp",
    model_name: "tiny-chat",
    config: { command: `llama-server -m '${gguf}' -c 512` },
  });
  ownAlias = await s.createWorkload({
    name: "mine",
    backend: "llamacpp",
    model_name: "mine",
    aliases: ["mine-too"],
    config: { command: `llama-server -m '${gguf}' -a their-own-name` },
  });
  vllm = await s.createWorkload({
    name: "local-qwen",
    backend: "vllm",
    model_name: "qwen-local",
    config: {
      command: `vllm serve ${join(s.dataDir, "models", "qwen")} --served-model-name ${join(s.dataDir, "models", "qwen")}`,
    },
  });
  await Promise.all([s.waitState(plain.id), s.waitState(ownAlias.id), s.waitState(vllm.id)]);
}, 90_000);
afterAll(async () => {
  await s.stop();
  await cleanup();
});

/** Every `model` value anywhere in a JSON value. */
function modelsIn(v: unknown, out: string[] = []): string[] {
  if (Array.isArray(v)) for (const x of v) modelsIn(x, out);
  else if (v && typeof v === "object") {
    for (const [k, x] of Object.entries(v)) {
      if (k === "model" && typeof x === "string") out.push(x);
      else modelsIn(x, out);
    }
  }
  return out;
}

/** Asserts that every model a body names is `id` (and that it names one). */
function expectNamed(body: unknown, id: string): void {
  const seen = modelsIn(body);
  expect(seen.length).toBeGreaterThan(0);
  expect(JSON.stringify(body)).not.toContain("/models/");
  expect([...new Set(seen)]).toEqual([id]);
}

describe("the launch", () => {
  test("llama-server gets the workload's name as its alias unless the command has one; /v1/models lists no path", async () => {
    const starts = s.events((e) => e.event === "start" && Array.isArray(e.argv) && e.argv[0] === "llama-server");
    const argvOf = (alias: string) =>
      starts.find((e) => (e.argv as string[]).includes(alias))?.argv as string[] | undefined;
    expect(argvOf("tiny-chat")).toContain("--alias");
    expect(argvOf("their-own-name")!.filter((a) => a === "--alias" || a === "-a")).toEqual(["-a"]);
    const project = await (
      await fetch(`${projectBase()}/v1/models`, { headers: { authorization: `Bearer ${s.live}` } })
    ).json();
    expect(project.data.map((m: { id: string }) => m.id).sort()).toEqual([
      "mine",
      "mine-too",
      "qwen-local",
      "tiny-chat",
    ]);
    for (const w of [plain, ownAlias, vllm]) {
      const listed = await (await s.data(w.slug, "/v1/models")).json();
      expect(JSON.stringify(listed)).not.toContain("/models/");
    }
  });
});

describe("OpenAI SDK: chat completions, plain and streamed, on both bases", () => {
  const cases = () => [
    {
      what: "llama-server launched with its alias",
      w: plain,
      base: workloadBase(plain.slug),
      model: "default",
      id: "tiny-chat",
    },
    {
      what: "llama-server launched with its alias (project base)",
      w: plain,
      base: projectBase(),
      model: "tiny-chat",
      id: "tiny-chat",
    },
    {
      what: "the user's own llama-server alias",
      w: ownAlias,
      base: workloadBase(ownAlias.slug),
      model: ownAlias.slug,
      id: "mine",
    },
    {
      what: "the user's own alias, asked by an inferd alias (project base)",
      w: ownAlias,
      base: projectBase(),
      model: "mine-too",
      id: "mine",
    },
    {
      what: "vLLM serving a path under that path",
      w: vllm,
      base: projectBase(),
      model: "qwen-local",
      id: "qwen-local",
    },
  ];

  test("each answer and each chunk names the model as /v1/models lists it", async () => {
    for (const c of cases()) {
      const client = new OpenAI({ baseURL: `${c.base}/v1`, apiKey: s.live, maxRetries: 0 });
      const listed = (await client.models.list()).data.map((m) => m.id);
      expect(listed).toContain(c.id);
      const one = await client.chat.completions.create({
        model: c.model,
        max_tokens: 8,
        messages: [{ role: "user", content: "hello" }],
      });
      expect({ what: c.what, model: one.model }).toEqual({ what: c.what, model: c.id });
      const stream = await client.chat.completions.create({
        model: c.model,
        max_tokens: 8,
        stream: true,
        messages: [{ role: "user", content: "hello there" }],
      });
      const names = new Set<string>();
      let chunks = 0;
      for await (const chunk of stream) {
        chunks++;
        names.add(chunk.model);
      }
      expect(chunks).toBeGreaterThan(2);
      expect({ what: c.what, models: [...names] }).toEqual({ what: c.what, models: [c.id] });
      const completion = await client.completions.create({ model: c.model, max_tokens: 4, prompt: "once upon" });
      expect(completion.model).toBe(c.id);
    }
  });
});

describe("Anthropic SDK: Messages translated (llama-server) and passed through (vLLM), on both bases", () => {
  test("message and stream events name the listed model", async () => {
    const cases = [
      { base: workloadBase(plain.slug), model: "default", id: "tiny-chat" },
      { base: projectBase(), model: "mine", id: "mine" },
      { base: workloadBase(vllm.slug), model: "qwen-local", id: "qwen-local" },
      { base: projectBase(), model: "qwen-local", id: "qwen-local" },
    ];
    for (const c of cases) {
      const client = new Anthropic({ baseURL: c.base, apiKey: s.live, maxRetries: 0 });
      const msg = await client.messages.create({
        model: c.model,
        max_tokens: 16,
        messages: [{ role: "user", content: "hi" }],
      });
      expect(msg.model).toBe(c.id);
      const stream = client.messages.stream({
        model: c.model,
        max_tokens: 16,
        messages: [{ role: "user", content: "hi again" }],
      });
      const events: unknown[] = [];
      for await (const e of stream) events.push(e);
      expectNamed(events, c.id);
      expect((await stream.finalMessage()).model).toBe(c.id);
    }
  });
});

describe("Responses and Ollama shapes", () => {
  test("the Responses API, translated and passed through, plain and streamed", async () => {
    for (const [w, id] of [
      [plain, "tiny-chat"],
      [vllm, "qwen-local"],
    ] as const) {
      const client = new OpenAI({ baseURL: `${workloadBase(w.slug)}/v1`, apiKey: s.live, maxRetries: 0 });
      const r = await client.responses.create({ model: "default", input: "hello", max_output_tokens: 16 });
      expect(r.model).toBe(id);
      const stream = await client.responses.create({
        model: "default",
        input: "hello",
        max_output_tokens: 16,
        stream: true,
      });
      const events: unknown[] = [];
      for await (const e of stream) events.push(e);
      expectNamed(events, id);
    }
  });

  test("Ollama's /api/chat and /api/generate, plain and streamed (NDJSON)", async () => {
    for (const path of ["/api/chat", "/api/generate"]) {
      for (const stream of [false, true]) {
        const body = {
          model: "tiny-chat",
          stream,
          ...(path === "/api/chat" ? { messages: [{ role: "user", content: "hi" }] } : { prompt: "hi" }),
        };
        const r = await fetch(`${projectBase()}${path}`, {
          method: "POST",
          headers: { authorization: `Bearer ${s.live}` },
          body: JSON.stringify(body),
        });
        expect(r.status).toBe(200);
        const lines = (await r.text())
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l));
        expectNamed(lines, "tiny-chat");
      }
    }
  });

  test("raw SSE on the workload base carries no path in any event", async () => {
    const r = await s.data(ownAlias.slug, "/v1/chat/completions", {
      body: { stream: true, max_tokens: 6, messages: [{ role: "user", content: "stream" }] },
    });
    const events = (await sseEvents(r)).filter((e) => e !== "[DONE]");
    expect(events.length).toBeGreaterThan(2);
    expectNamed(events, "mine");
  });
});

describe("async jobs", () => {
  test("a job's result names the model as /v1/models lists it", async () => {
    for (const [w, id] of [
      [plain, "tiny-chat"],
      [ownAlias, "mine"],
    ] as const) {
      const r = await s.data(w.slug, "/jobs", {
        body: { kind: "chat", body: { messages: [{ role: "user", content: "job" }] } },
      });
      expect(r.status).toBe(202);
      const jobId = (await r.json()).job_id;
      const job = await waitFor(
        async () => {
          const j = await (await s.data(w.slug, `/jobs/${jobId}`)).json();
          return j.status === "completed" ? j : undefined;
        },
        { what: `job ${jobId} completed`, timeoutMs: 30_000 },
      );
      expect(JSON.stringify(job)).not.toContain("/models/");
      expect(job.data.payload.model).toBe(id);
    }
  });
});

describe("the built-in llama.cpp runtime (no llama-server installed)", () => {
  test("answers with the workload's name, not its GGUF path", async () => {
    // No fixture bin on PATH: no llama-server, so node-llama-cpp serves the same flags.
    const cpu = await startServing({ PATH: process.env.PATH ?? "" });
    try {
      const model = join(cpu.dataDir, "models", "tiny.gguf");
      writeTinyGguf(model);
      const w = await cpu.createWorkload({
        name: "tiny",
        backend: "llamacpp",
        model_name: "tiny-builtin",
        config: { command: `llama-server -m ${model} -c 256 -t 1` },
      });
      await cpu.waitState(w.id, "ready", 60_000);
      const client = new OpenAI({
        baseURL: `${cpu.url}/endpoint/${cpu.project}/${w.slug}/v1`,
        apiKey: cpu.live,
        maxRetries: 0,
      });
      expect((await client.models.list()).data.map((m) => m.id)).toEqual(["tiny-builtin"]);
      expect(
        (
          await client.chat.completions.create({
            model: "default",
            max_tokens: 4,
            messages: [{ role: "user", content: "hi" }],
          })
        ).model,
      ).toBe("tiny-builtin");
      const served = (await cpu.workload(w.id)).assignments[0].served_model;
      expect(served).toBe("tiny-builtin");
    } finally {
      await cpu.stop();
    }
  }, 120_000);
});
