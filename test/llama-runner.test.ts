import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import {
  closeSync,
  constants,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import OpenAI from "openai";
import { readGgufFileInfo } from "node-llama-cpp";
import type { Subprocess } from "bun";
import { LlamaArgsError, parseLlamaServerArgs, parseLlamaServerCommand } from "../agent/runtimes/llama-runner-args";
import { AbortedError, SlotPool } from "../agent/runtimes/llama/pool";
import { nodeLlamaCppFiles, nodeLlamaCppPackages, prebuiltPackageName } from "../agent/runtimes/llama/runtime-files";
import { writeTinyGguf, type TinyGgufInfo } from "./fixtures/gguf";

const RUNNER = join(import.meta.dir, "../agent/runtimes/llama-runner.ts");
const NODE_MODULES = join(import.meta.dir, "../node_modules");
/** The machine is slow and shared: allow model loads a long time, but poll so fast machines finish fast. */
const LOAD_TIMEOUT = 90_000;

let dir: string;
let model: TinyGgufInfo;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "inferd-llama-"));
  model = writeTinyGguf(join(dir, "tiny.gguf"), { seed: 42 });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Polls `check` until it returns a value (not undefined/false) or the time runs out. */
async function waitFor<T>(
  what: string,
  check: () => T | undefined | false | Promise<T | undefined | false>,
  timeoutMs: number,
  runner?: Runner,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (runner?.proc.exitCode != null)
      throw new Error(
        `runner exited (${runner.proc.exitCode}) while waiting for ${what}:\n${runner.lines.slice(-15).join("\n")}`,
      );
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${what}${runner ? `:\n${runner.lines.slice(-15).join("\n")}` : ""}`);
    await Bun.sleep(20);
  }
}

interface Runner {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  lines: string[];
  url: string;
  /** SIGTERM, then the exit code. */
  stop(): Promise<number>;
}

async function collect(stream: ReadableStream<Uint8Array>, lines: string[]) {
  const decoder = new TextDecoder();
  let buf = "";
  for await (const chunk of stream) {
    buf += decoder.decode(chunk, { stream: true });
    for (let i = buf.indexOf("\n"); i >= 0; i = buf.indexOf("\n")) {
      lines.push(buf.slice(0, i));
      buf = buf.slice(i + 1);
    }
  }
}

/** Starts the runner on a free port (--port 0) and waits until it listens; `ready` also waits for /health 200. */
async function startRunner(
  args: string[],
  opts: { script?: string; env?: Record<string, string>; ready?: boolean } = {},
): Promise<Runner> {
  const proc = Bun.spawn([process.execPath, opts.script ?? RUNNER, ...args, "--port", "0"], {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, ...opts.env },
  });
  const lines: string[] = [];
  void collect(proc.stdout, lines);
  void collect(proc.stderr, lines);
  const runner: Runner = {
    proc,
    lines,
    url: "",
    stop: async () => {
      proc.kill("SIGTERM");
      return proc.exited;
    },
  };
  runner.url = await waitFor(
    "the runner to listen",
    () => lines.map((l) => /listening on (http:\/\/\S+)/.exec(l)?.[1]).find(Boolean),
    LOAD_TIMEOUT,
    runner,
  );
  if (opts.ready !== false)
    await waitFor(
      "/health 200",
      async () => (await fetch(`${runner.url}/health`)).status === 200,
      LOAD_TIMEOUT,
      runner,
    );
  return runner;
}

const post = (r: Runner, path: string, body: unknown, init: RequestInit = {}) =>
  fetch(r.url + path, {
    method: "POST",
    headers: { "content-type": "application/json", ...(init.headers as Record<string, string>) },
    body: JSON.stringify(body),
    signal: init.signal,
  });

/** The `data:` payloads of an SSE body. */
const sseData = (text: string) =>
  text
    .split("\n")
    .filter((l) => l.startsWith("data: "))
    .map((l) => l.slice(6));

describe("llama-server flags", () => {
  test("reads the flags the runtime uses, in both --flag value and --flag=value form", () => {
    const o = parseLlamaServerCommand([
      "/opt/llama/llama-server",
      "-m",
      "/m/q.gguf",
      "-c",
      "8192",
      "-np",
      "4",
      "--embeddings",
      "-ngl",
      "99",
      "--host=0.0.0.0",
      "--port",
      "9001",
      "-a",
      "qwen",
      "-t",
      "3",
    ]);
    expect(o).toMatchObject({
      model: "/m/q.gguf",
      ctxSize: 8192,
      parallel: 4,
      embedding: true,
      gpuLayers: 99,
      host: "0.0.0.0",
      port: 9001,
      alias: "qwen",
      threads: 3,
    });
    const p = parseLlamaServerArgs([
      "--model=/m/x.gguf",
      "--ctx-size=0",
      "--parallel=2",
      "--embedding",
      "--n-gpu-layers=0",
      "--alias=x",
      "--port=1",
    ]);
    expect(p).toMatchObject({
      model: "/m/x.gguf",
      ctxSize: 0,
      parallel: 2,
      embedding: true,
      gpuLayers: 0,
      alias: "x",
      port: 1,
    });
    expect(parseLlamaServerArgs(["-m", "a.gguf", "--gpu-layers", "all"]).gpuLayers).toBe("max");
    expect(parseLlamaServerArgs(["-m", "a.gguf", "-ngl", "-1"]).gpuLayers).toBe("auto");
  });

  test("falls back to llama-server's defaults", () => {
    const o = parseLlamaServerArgs(["-m", "a.gguf"]);
    expect(o).toMatchObject({
      parallel: 1,
      embedding: false,
      gpuLayers: "auto",
      host: "127.0.0.1",
      port: 8080,
      nPredict: -1,
      ignored: [],
    });
    expect([o.ctxSize, o.alias, o.threads, o.apiKey]).toEqual([undefined, undefined, undefined, undefined]);
  });

  test("accepts and reports flags it has no use for, with or without values", () => {
    const o = parseLlamaServerArgs([
      "--jinja",
      "-m",
      "a.gguf",
      "-fa",
      "--metrics",
      "-ctk",
      "q8_0",
      "--some-new-flag",
      "7",
      "--another-switch",
      "--cont-batching",
      "--rope-scaling=yarn",
    ]);
    expect(o.model).toBe("a.gguf");
    expect(o.flashAttention).toBe(true);
    expect(o.ignored).toEqual([
      "--jinja",
      "--metrics",
      "-ctk q8_0",
      "--some-new-flag 7",
      "--another-switch",
      "--cont-batching",
      "--rope-scaling=yarn",
    ]);
    expect(parseLlamaServerArgs(["-m", "a.gguf", "-fa", "off", "--temp", "0.2"])).toMatchObject({
      flashAttention: false,
      temperature: 0.2,
      ignored: [],
    });
    expect(parseLlamaServerArgs(["-m", "a.gguf", "--flash-attn=auto"]).flashAttention).toBe("auto");
  });

  test("rejects what it cannot run, naming the flag", () => {
    const cases: [string[], RegExp][] = [
      [["-c", "4096"], /no model/],
      [["-m", "a.gguf", "--port", "http"], /--port expects a whole number/],
      [["-m", "a.gguf", "-np", "0"], /-np expects a whole number >= 1/],
      [["-m", "a.gguf", "-c"], /-c needs a value/],
      [["-hf", "Qwen/Qwen3-0.6B-GGUF"], /-hf downloads a model/],
      [["-m", "a.gguf", "-fa=maybe"], /-fa expects on, off or auto/],
    ];
    for (const [args, message] of cases) expect(() => parseLlamaServerArgs(args)).toThrow(message);
    expect(() => parseLlamaServerArgs([])).toThrow(LlamaArgsError);
  });
});

describe("slot pool", () => {
  test("hands slots out first come, first served, and drops waiters whose client left", async () => {
    const pool = new SlotPool(["a"]);
    const first = await pool.acquire();
    const gone = new AbortController();
    const order: string[] = [];
    const waitingGone = pool.acquire(gone.signal).catch((e) => (e instanceof AbortedError ? "aborted" : "other"));
    const second = pool.acquire().then((s) => (order.push("second"), s));
    const third = pool.acquire().then((s) => (order.push("third"), s));
    expect(pool.waiting).toBe(3);
    gone.abort();
    expect(await waitingGone).toBe("aborted");
    pool.release(first);
    pool.release(await second);
    pool.release(await third);
    expect(order).toEqual(["second", "third"]);
    expect(pool.available).toBe(1);
  });
});

describe("tiny GGUF fixture", () => {
  test("is a small GGUF v3 llama model that node-llama-cpp's reader understands", async () => {
    const bytes = readFileSync(model.path);
    expect(bytes.subarray(0, 4).toString()).toBe("GGUF");
    expect(bytes.readUInt32LE(4)).toBe(3);
    expect(model.bytes).toBeLessThan(5 * 1024 * 1024);
    const info = await readGgufFileInfo(model.path);
    expect(String(info.metadata.general.architecture)).toBe("llama");
    expect((info.metadata as any).llama.embedding_length).toBe(model.embeddingLength);
    expect(info.tensorInfo?.length).toBe(3 + 9 * model.layers);
  });

  test("is deterministic for a seed and differs between seeds", () => {
    const again = writeTinyGguf(join(dir, "again.gguf"), { seed: 42 });
    const other = writeTinyGguf(join(dir, "other.gguf"), { seed: 43 });
    expect(readFileSync(again.path).equals(readFileSync(model.path))).toBe(true);
    expect(readFileSync(other.path).equals(readFileSync(model.path))).toBe(false);
  });
});

describe("built-in llama.cpp runtime", () => {
  let r: Runner;
  beforeAll(async () => {
    r = await startRunner([
      "llama-server",
      "-m",
      model.path,
      "-t",
      "1",
      "-ngl",
      "0",
      "-np",
      "2",
      "-c",
      "4096",
      "--embedding",
      "-a",
      "tiny-test",
      "--jinja",
    ]);
  }, LOAD_TIMEOUT + 10_000);
  afterAll(async () => {
    expect(await r.stop()).toBe(0);
  });

  test("reports ready and lists the served model under its alias", async () => {
    expect(await (await fetch(`${r.url}/health`)).json()).toMatchObject({ status: "ok" });
    const models = await (await fetch(`${r.url}/v1/models`)).json();
    expect(models.data.map((m: { id: string }) => m.id)).toEqual(["tiny-test"]);
    expect(models.data[0].meta).toMatchObject({
      n_embd: model.embeddingLength,
      n_ctx_train: model.contextLength,
      n_ctx: 2048,
    });
    expect(r.lines.some((l) => /loading model: 100%/.test(l))).toBe(true);
    expect(r.lines).toContain("note: --jinja has no effect in the built-in llama.cpp runtime");
  });

  test("answers a chat completion with content, finish reason and usage, honouring max_tokens", async () => {
    const res = await post(r, "/v1/chat/completions", {
      model: "tiny-test",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: "hello world" },
      ],
      max_tokens: 7,
      temperature: 0,
    });
    expect(res.status).toBe(200);
    const body = await res.json();
    expect(body.object).toBe("chat.completion");
    expect(body.model).toBe("tiny-test");
    expect(body.choices[0].message.role).toBe("assistant");
    expect(body.choices[0].message.content.length).toBeGreaterThan(0);
    expect(body.choices[0].finish_reason).toBe("length");
    expect(body.usage.completion_tokens).toBe(7);
    expect(body.usage.prompt_tokens).toBeGreaterThan(5);
    expect(body.usage.total_tokens).toBe(body.usage.prompt_tokens + 7);
  });

  test("temperature 0 repeats itself; sampling with different seeds does not", async () => {
    const ask = async (extra: object) =>
      (
        await (
          await post(r, "/v1/chat/completions", {
            messages: [{ role: "user", content: "what is this" }],
            max_tokens: 24,
            ...extra,
          })
        ).json()
      ).choices[0].message.content;
    expect(await ask({ temperature: 0 })).toBe(await ask({ temperature: 0 }));
    expect(await ask({ temperature: 1.5, seed: 1 })).not.toBe(await ask({ temperature: 1.5, seed: 2 }));
  });

  test("stops at a stop sequence", async () => {
    const messages = [{ role: "user", content: "tell me" }];
    const full = (await (await post(r, "/v1/chat/completions", { messages, max_tokens: 30, temperature: 0 })).json())
      .choices[0].message.content as string;
    const stop = full.slice(10, 13);
    const cut = await (
      await post(r, "/v1/chat/completions", { messages, max_tokens: 30, temperature: 0, stop: [stop] })
    ).json();
    expect(cut.choices[0].finish_reason).toBe("stop");
    expect(cut.choices[0].message.content).toBe(full.slice(0, full.indexOf(stop)));
  });

  test("streams chat.completion.chunk events ending with a finish reason and [DONE]", async () => {
    const messages = [{ role: "user", content: "hello" }];
    const res = await post(r, "/v1/chat/completions", {
      messages,
      max_tokens: 12,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const data = sseData(await res.text());
    expect(data[data.length - 1]).toBe("[DONE]");
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
    expect(chunks.length).toBeGreaterThan(4);
    for (const c of chunks) expect(c.object).toBe("chat.completion.chunk");
    const content = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
    const finishing = chunks.filter((c) => c.choices[0]?.finish_reason);
    expect(finishing.map((c) => c.choices[0].finish_reason)).toEqual(["length"]);
    expect(chunks[chunks.length - 1].usage).toMatchObject({ completion_tokens: 12 });
    const whole = (await (await post(r, "/v1/chat/completions", { messages, max_tokens: 12, temperature: 0 })).json())
      .choices[0].message.content;
    expect(content).toBe(whole);
  });

  test("serves text completions too", async () => {
    const body = await (
      await post(r, "/v1/completions", { prompt: "the tiny model", max_tokens: 5, temperature: 0 })
    ).json();
    expect(body.object).toBe("text_completion");
    expect(body.choices[0].text.length).toBeGreaterThan(0);
    expect(body.usage.completion_tokens).toBe(5);
  });

  test("returns normalised embeddings of the model's embedding length for a string or an array", async () => {
    const one = await (await post(r, "/v1/embeddings", { model: "tiny-test", input: "hello world" })).json();
    expect(one.object).toBe("list");
    expect(one.data).toHaveLength(1);
    expect(one.data[0].embedding).toHaveLength(model.embeddingLength);
    expect(Math.hypot(...one.data[0].embedding)).toBeCloseTo(1, 5);
    const many = await (await post(r, "/v1/embeddings", { input: ["hello world", "something else"] })).json();
    expect(many.data.map((d: { index: number }) => d.index)).toEqual([0, 1]);
    expect(many.data[0].embedding).toEqual(one.data[0].embedding);
    expect(many.data[1].embedding).not.toEqual(one.data[0].embedding);
    expect(many.usage.prompt_tokens).toBeGreaterThan(0);
  });

  test("works with the OpenAI SDK: chat, streaming and (base64) embeddings", async () => {
    const client = new OpenAI({ baseURL: `${r.url}/v1`, apiKey: "unused" });
    const chat = await client.chat.completions.create({
      model: "tiny-test",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4,
    });
    expect(chat.choices[0].message.content?.length).toBeGreaterThan(0);
    let streamed = "";
    for await (const chunk of await client.chat.completions.create({
      model: "tiny-test",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4,
      stream: true,
    })) {
      streamed += chunk.choices[0]?.delta?.content ?? "";
    }
    expect(streamed.length).toBeGreaterThan(0);
    const emb = await client.embeddings.create({ model: "tiny-test", input: "hello" });
    expect(emb.data[0].embedding).toHaveLength(model.embeddingLength);
  });

  test("runs more requests than slots: the surplus waits and all finish", async () => {
    const results = await Promise.all(
      Array.from({ length: 5 }, (_, i) =>
        post(r, "/v1/chat/completions", { messages: [{ role: "user", content: `request ${i}` }], max_tokens: 16 }).then(
          (res) => res.json(),
        ),
      ),
    );
    // A random-weights model may sample its end-of-sequence token before max_tokens: each answer
    // ends by length or by stop, never beyond max_tokens.
    for (const body of results) {
      expect(body.usage.completion_tokens).toBeGreaterThan(0);
      expect(body.usage.completion_tokens).toBeLessThanOrEqual(16);
      expect(["length", "stop"]).toContain(body.choices[0].finish_reason);
      if (body.usage.completion_tokens < 16) expect(body.choices[0].finish_reason).toBe("stop");
    }
  });

  test("rejects bad requests with 400 in OpenAI error shape", async () => {
    const cases: [string, unknown][] = [
      ["/v1/chat/completions", { model: "tiny-test" }],
      ["/v1/chat/completions", { messages: [] }],
      ["/v1/chat/completions", { messages: [{ role: "wizard", content: "x" }] }],
      ["/v1/chat/completions", { messages: [{ role: "user", content: "x" }], temperature: "hot" }],
      ["/v1/embeddings", { input: 42 }],
      ["/v1/completions", {}],
    ];
    for (const [path, body] of cases) {
      const res = await post(r, path, body);
      expect(res.status).toBe(400);
      const err = (await res.json()).error;
      expect(err).toMatchObject({ code: 400, type: "invalid_request_error" });
      expect(err.message.length).toBeGreaterThan(0);
    }
    const notJson = await fetch(`${r.url}/v1/chat/completions`, { method: "POST", body: "{nope" });
    expect(notJson.status).toBe(400);
    const tooLong = await post(r, "/v1/chat/completions", {
      messages: [{ role: "user", content: "hello ".repeat(3000) }],
    });
    expect(tooLong.status).toBe(400);
    expect((await tooLong.json()).error.message).toContain("context size");
    expect((await fetch(`${r.url}/v1/nothing`)).status).toBe(404);
  });

  test("stops generating when the client disconnects, streaming or not", async () => {
    const aborts = () => r.lines.filter((l) => l.includes("aborted by the client"));
    const messages = [{ role: "user", content: "go on forever" }];
    const streaming = new AbortController();
    const res = await post(
      r,
      "/v1/chat/completions",
      { messages, max_tokens: 2000, stream: true },
      { signal: streaming.signal },
    );
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    let text = "";
    while (!/"content":"[^"]/.test(text)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the stream ended before any content: ${text}`);
      text += decoder.decode(value);
    }
    streaming.abort();
    const [line] = await waitFor(
      "the streaming abort to be logged",
      () => aborts().length === 1 && aborts(),
      30_000,
      r,
    );
    expect(Number(/after (\d+) completion tokens/.exec(line)?.[1])).toBeLessThan(2000);
    const health = async () => (await (await fetch(`${r.url}/health`)).json()).slots_processing;
    await waitFor("the slot to be free", async () => (await health()) === 0, 30_000, r);

    const plain = new AbortController();
    const pending = post(r, "/v1/chat/completions", { messages, max_tokens: 2000 }, { signal: plain.signal }).catch(
      () => "aborted",
    );
    await waitFor("the generation to start", async () => (await health()) === 1, 30_000, r);
    plain.abort();
    expect(await pending).toBe("aborted");
    const lines = await waitFor("the abort to be logged", () => aborts().length === 2 && aborts(), 30_000, r);
    expect(Number(/after (\d+) completion tokens/.exec(lines[1])?.[1])).toBeLessThan(2000);
    await waitFor("the slot to be free", async () => (await health()) === 0, 30_000, r);
  });
});

describe("built-in llama.cpp runtime, other setups", () => {
  test(
    "without --embedding, embeddings are 501; --api-key guards all but /health; SIGTERM stops it",
    async () => {
      const r = await startRunner(["-m", model.path, "-t", "1", "-ngl", "0", "--api-key", "s3cret"]);
      try {
        expect((await fetch(`${r.url}/health`)).status).toBe(200);
        expect((await fetch(`${r.url}/v1/models`)).status).toBe(401);
        const res = await post(
          r,
          "/v1/embeddings",
          { input: "hello" },
          { headers: { authorization: "Bearer s3cret" } },
        );
        expect(res.status).toBe(501);
        expect((await res.json()).error).toMatchObject({ code: 501, type: "not_supported_error" });
        const models = await fetch(`${r.url}/v1/models`, { headers: { authorization: "Bearer s3cret" } });
        expect((await models.json()).data[0].id).toBe(model.path);
      } finally {
        expect(await r.stop()).toBe(0);
      }
      expect(r.lines).toContain("received SIGTERM, shutting down");
      expect(
        await fetch(`${r.url}/health`).then(
          () => "answered",
          () => "refused",
        ),
      ).toBe("refused");
    },
    LOAD_TIMEOUT,
  );

  test(
    "answers 503 'loading model' while loading, and exits 1 with the reason when loading fails",
    async () => {
      // A FIFO as the model file holds the load until the test closes it empty, which fails the load.
      const fifo = join(dir, "held.gguf");
      Bun.spawnSync(["mkfifo", fifo]);
      const r = await startRunner(["-m", fifo, "-t", "1", "-ngl", "0"], { ready: false });
      const health = await fetch(`${r.url}/health`);
      expect(health.status).toBe(503);
      expect(await health.json()).toEqual({ status: "loading model" });
      const chat = await post(r, "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }] });
      expect(chat.status).toBe(503);
      expect((await chat.json()).error.type).toBe("unavailable_error");
      const fd = await waitFor(
        "the runner to open the model",
        () => {
          try {
            return openSync(fifo, constants.O_WRONLY | constants.O_NONBLOCK);
          } catch {
            return undefined;
          }
        },
        LOAD_TIMEOUT,
        r,
      ).catch((e) => {
        r.proc.kill("SIGKILL");
        throw e;
      });
      closeSync(fd);
      expect(await r.proc.exited).toBe(1);
      expect(r.lines.some((l) => l.startsWith(`error: failed to load model ${fifo}`))).toBe(true);
    },
    LOAD_TIMEOUT,
  );

  test(
    "a bundled copy runs from another dir with node-llama-cpp from INFERD_NODE_MODULES",
    async () => {
      const out = join(dir, "bundle");
      const build = await Bun.build({
        entrypoints: [RUNNER],
        target: "bun",
        outdir: out,
        external: ["node-llama-cpp"],
      });
      expect(build.success).toBe(true);
      const packages = nodeLlamaCppPackages(NODE_MODULES);
      expect(packages).toContain("node-llama-cpp");
      expect(packages).toContain(prebuiltPackageName());
      // Only the files the compiled binary would unpack: proves that list is complete.
      const unpacked = join(dir, "cache", "node_modules");
      for (const f of nodeLlamaCppFiles(NODE_MODULES)) {
        mkdirSync(dirname(join(unpacked, f)), { recursive: true });
        cpSync(join(NODE_MODULES, f), join(unpacked, f));
      }
      expect(existsSync(join(unpacked, "node-llama-cpp/llama/gitRelease.bundle"))).toBe(false);
      const r = await startRunner(["-m", model.path, "-t", "1", "-ngl", "0"], {
        script: join(out, "llama-runner.js"),
        env: { INFERD_NODE_MODULES: unpacked },
      });
      try {
        const body = await (
          await post(r, "/v1/chat/completions", {
            messages: [{ role: "user", content: "hi" }],
            max_tokens: 3,
            temperature: 0,
          })
        ).json();
        expect(body.usage.completion_tokens).toBe(3);
      } finally {
        expect(await r.stop()).toBe(0);
      }
    },
    LOAD_TIMEOUT,
  );
});
