// Tests of the test doubles themselves (fake vLLM, SGLang, llama-server, Ollama, nvidia-smi, uv),
// run as real child processes the way inferd's agent runs the real programs.

import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fixtureEnv, freePort, readRecord, startFakeRuntime, waitHealthy } from "./fixtures";
import { waitFor } from "./helpers/proc";

const TMP = mkdtempSync(join(tmpdir(), "inferd-fixtures-"));
const procs: Bun.Subprocess[] = [];

type Run = {
  proc: Bun.Subprocess<"ignore", "pipe", "pipe">;
  out: { stdout: string; stderr: string };
  done: Promise<number>;
};

/** Spawns a fixture program with output collected as it arrives. */
function run(cmd: string[], env: Record<string, string>): Run {
  const proc = Bun.spawn(cmd, { env, stdin: "ignore", stdout: "pipe", stderr: "pipe", cwd: TMP });
  procs.push(proc);
  const out = { stdout: "", stderr: "" };
  const drain = async (stream: ReadableStream<Uint8Array>, key: "stdout" | "stderr") => {
    const dec = new TextDecoder();
    for await (const chunk of stream) out[key] += dec.decode(chunk, { stream: true });
  };
  const drained = Promise.all([drain(proc.stdout, "stdout"), drain(proc.stderr, "stderr")]);
  return { proc, out, done: proc.exited.then(async (code) => (await drained, code)) };
}

/** Runs a short command to completion. */
async function exec(cmd: string[], env: Record<string, string>) {
  const r = run(cmd, env);
  const code = await r.done;
  return { code, ...r.out };
}

/** The `data:` payloads of an SSE body; asserts there are no other kinds of lines. */
function sseData(text: string): string[] {
  const lines = text.split("\n").filter(Boolean);
  for (const l of lines) expect(l.startsWith("data: ")).toBe(true);
  return lines.map((l) => l.slice(6));
}

const json = (body: unknown) => ({
  method: "POST",
  headers: { "content-type": "application/json" },
  body: JSON.stringify(body),
});

afterAll(() => {
  for (const p of procs) if (p.exitCode === null) p.kill("SIGKILL");
  rmSync(TMP, { recursive: true, force: true });
});

describe("fake vllm", () => {
  const record = join(TMP, "vllm.jsonl");
  let plain: Run;
  let tools: Run;
  let base = "";
  let toolBase = "";
  const firstStatuses: number[] = [];

  beforeAll(async () => {
    const [p1, p2] = [await freePort(), await freePort()];
    base = `http://127.0.0.1:${p1}`;
    toolBase = `http://127.0.0.1:${p2}`;
    plain = run(
      ["vllm", "serve", "org/model-a", "--port", String(p1), "--host", "127.0.0.1", "--max-model-len", "64"],
      fixtureEnv({ FAKE_LOAD_MS: "600", FAKE_RECORD: record, CUDA_VISIBLE_DEVICES: "0,1" }),
    );
    tools = run(
      [
        "vllm",
        "serve",
        "org/model-b",
        `--port=${p2}`,
        "--host",
        "127.0.0.1",
        "--served-model-name",
        "tooly",
        "--enable-auto-tool-choice",
        "--tool-call-parser",
        "hermes",
      ],
      fixtureEnv({ FAKE_LOAD_MS: "50" }),
    );
    await waitFor(
      async () => {
        const res = await fetch(`${base}/health`).catch(() => undefined);
        if (res) firstStatuses.push(res.status);
        return res?.status === 200 || undefined;
      },
      { what: "vLLM healthy" },
    );
    await waitHealthy(toolBase);
  });

  test("health answers 503 while loading, then 200; logs and FAKE_RECORD look like a real start", async () => {
    expect(firstStatuses[0]).toBe(503);
    expect(firstStatuses.at(-1)).toBe(200);
    await waitFor(() => plain.out.stdout.includes("Uvicorn running on http://127.0.0.1:") || undefined, {
      what: "vLLM's startup line",
    });
    expect(plain.out.stdout).toContain("\x1b[32mINFO\x1b[0m");
    expect(plain.out.stderr).toContain("\rLoading safetensors checkpoint shards:");
    const start = readRecord(record).find((e) => e.event === "start");
    expect(start).toMatchObject({
      persona: "vllm",
      version: "0.11.0",
      model: "org/model-a",
      env: { CUDA_VISIBLE_DEVICES: "0,1" },
    });
    expect(start?.argv).toContain("--max-model-len");
    const models = await (await fetch(`${base}/v1/models`)).json();
    expect(models).toMatchObject({ object: "list", data: [{ id: "org/model-a", object: "model" }] });
  });

  test("chat completion, non-stream: deterministic reply, usage and length cut-off", async () => {
    const body = {
      model: "org/model-a",
      messages: [
        { role: "system", content: "be brief" },
        { role: "user", content: "hello big world" },
      ],
    };
    const res = await fetch(`${base}/v1/chat/completions`, json(body));
    expect(res.status).toBe(200);
    const out = await res.json();
    expect(out).toMatchObject({
      object: "chat.completion",
      model: "org/model-a",
      choices: [
        { index: 0, message: { role: "assistant", content: "You said: hello big world" }, finish_reason: "stop" },
      ],
      usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 },
    });
    const cut = await (await fetch(`${base}/v1/chat/completions`, json({ ...body, max_tokens: 2 }))).json();
    expect(cut.choices[0]).toMatchObject({ message: { content: "You said:" }, finish_reason: "length" });
    expect(
      readRecord(record).filter((e) => e.event === "request" && e.path === "/v1/chat/completions").length,
    ).toBeGreaterThanOrEqual(2);
  });

  test("chat completion, stream: data-only SSE, role first, one chunk per word, finish, usage, [DONE]", async () => {
    const res = await fetch(
      `${base}/v1/chat/completions`,
      json({ messages: [{ role: "user", content: "one two" }], stream: true, stream_options: { include_usage: true } }),
    );
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const data = sseData(await res.text());
    expect(data.at(-1)).toBe("[DONE]");
    const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
    for (const c of chunks) expect(c.object).toBe("chat.completion.chunk");
    expect(chunks[0].choices[0].delta.role).toBe("assistant");
    const content = chunks
      .flatMap((c) => c.choices.map((ch: { delta: { content?: string } }) => ch.delta.content ?? ""))
      .join("");
    expect(content).toBe("You said: one two");
    const withChoices = chunks.filter((c) => c.choices.length);
    expect(withChoices.at(-1).choices[0].finish_reason).toBe("stop");
    expect(withChoices.slice(0, -1).every((c) => c.choices[0].finish_reason === null)).toBe(true);
    expect(chunks.at(-1).usage).toEqual({ prompt_tokens: 2, completion_tokens: 4, total_tokens: 6 });
  });

  test("errors in vLLM's shapes: unknown model 404, missing messages 400, context too long 400, 415", async () => {
    const missing = await fetch(`${base}/v1/chat/completions`, json({ model: "nope", messages: [] }));
    expect(missing.status).toBe(404);
    expect((await missing.json()).error).toMatchObject({
      message: "The model `nope` does not exist.",
      type: "NotFoundError",
      code: 404,
    });
    const bad = await fetch(`${base}/v1/chat/completions`, json({ model: "org/model-a" }));
    expect(bad.status).toBe(400);
    expect((await bad.json()).error).toMatchObject({ type: "BadRequestError", param: null, code: 400 });
    const long = await fetch(
      `${base}/v1/chat/completions`,
      json({ messages: [{ role: "user", content: "x" }], max_tokens: 100 }),
    );
    expect(long.status).toBe(400);
    expect((await long.json()).error.message).toContain("maximum context length is 64 tokens");
    const notJson = await fetch(`${base}/v1/chat/completions`, {
      method: "POST",
      body: "{}",
      headers: { "content-type": "text/plain" },
    });
    expect(notJson.status).toBe(415);
  });

  test("messages with tools: 400 without the tool flags, tool_use with them", async () => {
    const tool = {
      name: "get_weather",
      description: "Weather",
      input_schema: {
        type: "object",
        properties: { city: { type: "string" }, days: { type: "integer" } },
        required: ["city", "days"],
      },
    };
    const req = { max_tokens: 50, messages: [{ role: "user", content: "weather?" }], tools: [tool] };
    const rejected = await fetch(`${base}/v1/messages`, json({ ...req, model: "org/model-a" }));
    expect(rejected.status).toBe(400);
    expect(await rejected.json()).toEqual({
      type: "error",
      error: {
        type: "BadRequestError",
        message: '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
      },
    });
    const ok = await (await fetch(`${toolBase}/v1/messages`, json({ ...req, model: "tooly" }))).json();
    expect(ok).toMatchObject({
      type: "message",
      role: "assistant",
      model: "tooly",
      stop_reason: "tool_use",
      content: [{ type: "tool_use", name: "get_weather", input: { city: "test", days: 1 } }],
    });
    expect(ok.usage.input_tokens).toBe(1);
    const text = await (
      await fetch(
        `${base}/v1/messages`,
        json({ model: "org/model-a", max_tokens: 50, messages: [{ role: "user", content: "hi there" }] }),
      )
    ).json();
    expect(text).toMatchObject({
      type: "message",
      content: [{ type: "text", text: "You said: hi there" }],
      stop_reason: "end_turn",
      usage: { input_tokens: 2, output_tokens: 4 },
    });
    const chat = await (
      await fetch(
        `${toolBase}/v1/chat/completions`,
        json({
          messages: [{ role: "user", content: "hi" }],
          tools: [
            {
              type: "function",
              function: {
                name: "f",
                parameters: { type: "object", properties: { q: { type: "string" } }, required: ["q"] },
              },
            },
          ],
        }),
      )
    ).json();
    expect(chat.choices[0]).toMatchObject({
      finish_reason: "tool_calls",
      message: { tool_calls: [{ type: "function", function: { name: "f", arguments: '{"q":"test"}' } }] },
    });
  });

  test("multipart routes echo the SHA-256 and length of the raw body", async () => {
    const boundary = "----fakeBoundary7MA4YWxkTrZu0gW";
    const file = new Uint8Array(Array.from({ length: 300 }, (_, i) => (i * 7) % 256));
    const head = `--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\norg/model-a\r\n--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="a.wav"\r\nContent-Type: audio/wav\r\n\r\n`;
    const raw = Buffer.concat([Buffer.from(head), file, Buffer.from(`\r\n--${boundary}--\r\n`)]);
    const type = `multipart/form-data; boundary=${boundary}`;
    const res = await fetch(`${base}/v1/audio/transcriptions`, {
      method: "POST",
      body: raw,
      headers: { "content-type": type },
    });
    const out = await res.json();
    expect(out).toMatchObject({
      sha256: createHash("sha256").update(raw).digest("hex"),
      bytes: raw.byteLength,
      content_type: type,
      fields: { model: "org/model-a" },
      files: [{ field: "file", name: "a.wav", size: 300 }],
    });
    const speech = await fetch(`${base}/v1/audio/speech`, json({ model: "org/model-a", input: "hello" }));
    expect(speech.headers.get("content-type")).toBe("audio/wav");
    expect(
      Buffer.from(await speech.arrayBuffer())
        .subarray(0, 4)
        .toString(),
    ).toBe("RIFF");
  });

  test("POST /fake/crash answers, then the process exits with code 3", async () => {
    const res = await fetch(`${base}/fake/crash`, { method: "POST" });
    expect(res.status).toBe(200);
    expect(await plain.done).toBe(3);
    expect(plain.out.stderr).toContain("EngineCore");
    expect(readRecord(record).some((e) => e.event === "crash" && e.code === 3)).toBe(true);
  });

  test("tensor parallel above the visible GPUs fails at start; a taken port fails too", async () => {
    const tp = await exec(
      ["vllm", "serve", "m", "--tensor-parallel-size", "2", "--port", String(await freePort())],
      fixtureEnv({ CUDA_VISIBLE_DEVICES: "0" }),
    );
    expect(tp.code).toBe(1);
    expect(tp.stderr).toContain("local_world_size (2) must be less than or equal to the number of visible devices (1)");
    const holder = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("taken") });
    try {
      const taken = await exec(
        ["vllm", "serve", "m", "--port", String(holder.port), "--host", "127.0.0.1"],
        fixtureEnv(),
      );
      expect(taken.code).toBe(1);
      expect(taken.stderr).toContain("Address already in use");
    } finally {
      holder.stop(true);
    }
    expect((await exec(["vllm", "--version"], fixtureEnv({ FAKE_VLLM_VERSION: "0.9.2" }))).stdout.trim()).toBe("0.9.2");
  });
});

describe("fake llama-server and SGLang", () => {
  test("llama-server: crash-once then healthy, alias, no /v1/messages, embeddings need the flag, SIGTERM exits 0", async () => {
    const gguf = join(TMP, "tiny.gguf");
    writeFileSync(gguf, Buffer.concat([Buffer.from("GGUF"), Buffer.alloc(28)]));
    const once = join(TMP, "crash-once");
    const env = fixtureEnv({ FAKE_LOAD_MS: "50", FAKE_CRASH_AT_START: "7", FAKE_CRASH_ONCE_FILE: once });
    const port = await freePort();
    const args = ["llama-server", "-m", gguf, "-a", "tiny", "--port", String(port), "-c", "2048", "-np", "2"];
    expect((await exec(args, env)).code).toBe(7);
    const srv = run(args, env);
    const base = `http://127.0.0.1:${port}`;
    await waitHealthy(base);
    expect(await (await fetch(`${base}/health`)).json()).toEqual({ status: "ok" });
    expect((await (await fetch(`${base}/v1/models`)).json()).data[0].id).toBe("tiny");
    expect((await fetch(`${base}/v1/messages`, json({ model: "tiny", max_tokens: 5, messages: [] }))).status).toBe(404);
    const emb = await fetch(`${base}/v1/embeddings`, json({ input: "x" }));
    expect(emb.status).toBe(501);
    expect((await emb.json()).error.type).toBe("not_supported_error");
    await waitFor(() => srv.out.stderr.includes("main: server is listening on http://127.0.0.1:") || undefined, {
      what: "llama-server listening",
    });
    srv.proc.kill("SIGTERM");
    expect(await srv.done).toBe(0);
    const missing = await exec(
      ["llama-server", "-m", join(TMP, "absent.gguf"), "--port", String(await freePort())],
      fixtureEnv({ FAKE_LOAD_MS: "50" }),
    );
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("failed to load model");
  });

  test("python3 -m sglang.launch_server runs the fake; other python3 calls reach the real one", async () => {
    const realDir = join(TMP, "real-python");
    rmSync(realDir, { recursive: true, force: true });
    Bun.spawnSync(["mkdir", "-p", realDir]);
    writeFileSync(join(realDir, "python3"), '#!/bin/sh\necho "real python3 $*"\n');
    chmodSync(join(realDir, "python3"), 0o755);
    const env = fixtureEnv({ FAKE_LOAD_MS: "50" }, { sglang: true });
    env.PATH = env.PATH.replace(/(sglang-bin)/, `$1:${realDir}`);
    expect((await exec(["python3", "-c", "print(1)"], env)).stdout).toBe("real python3 -c print(1)\n");
    const port = await freePort();
    const srv = run(
      ["python3", "-m", "sglang.launch_server", "--model-path", "Qwen/Q", "--port", String(port), "--tp-size", "1"],
      env,
    );
    await waitHealthy(`http://127.0.0.1:${port}`);
    const out = await (
      await fetch(
        `http://127.0.0.1:${port}/v1/chat/completions`,
        json({ model: "Qwen/Q", messages: [{ role: "user", content: "yo" }] }),
      )
    ).json();
    expect(out.choices[0].message.content).toBe("You said: yo");
    await waitFor(() => srv.out.stderr.includes("The server is fired up and ready to roll!") || undefined, {
      what: "SGLang ready",
    });
    srv.proc.kill("SIGTERM");
    expect(await srv.done).toBe(0);
  });
});

describe("in-process fake runtime", () => {
  test("max-num-seqs queues surplus requests; in_flight and max_in_flight count them; first-token delay; a dropped stream is recorded", async () => {
    const record = join(TMP, "inproc.jsonl");
    const rt = await startFakeRuntime({
      persona: "vllm",
      model: "m",
      port: 0,
      loadMs: 0,
      maxRunning: 2,
      delayMs: 150,
      firstTokenMs: 120,
      tokenMs: 40,
      recordFile: record,
    });
    try {
      await rt.ready;
      const body = json({ messages: [{ role: "user", content: "a b c d e f g h" }] });
      const all = Promise.all(
        Array.from({ length: 4 }, () => fetch(`${rt.url}/v1/chat/completions`, body).then((r) => r.json())),
      );
      await waitFor(() => (rt.stats().in_flight === 4 ? true : undefined), { what: "4 requests in flight" });
      expect(rt.stats()).toMatchObject({ running: 2, waiting: 2 });
      await all;
      expect(rt.stats()).toMatchObject({ in_flight: 0, max_in_flight: 4, total: 4 });
      const ac = new AbortController();
      const asked = performance.now();
      const res = await fetch(`${rt.url}/v1/chat/completions`, {
        ...json({ messages: [{ role: "user", content: "a b c d e f g h" }], stream: true }),
        signal: ac.signal,
      });
      const reader = res.body!.getReader();
      await reader.read();
      expect(performance.now() - asked).toBeGreaterThanOrEqual(100); // FAKE_FIRST_TOKEN_MS delays the first chunk
      ac.abort();
      await waitFor(() => readRecord(record).some((e) => e.event === "aborted") || undefined, {
        what: "aborted event",
      });
      expect(
        readRecord(record)
          .filter((e) => e.event === "request")
          .map((e) => e.in_flight),
      ).toContain(4);
    } finally {
      await rt.stop();
    }
  });
});

describe("in-process fake runtime, other shapes", () => {
  test("refuse mode, Anthropic SSE events, base64 embeddings, rerank order", async () => {
    const rt = await startFakeRuntime({
      persona: "vllm",
      model: "m",
      port: 0,
      loadMs: 150,
      healthBeforeReady: "refuse",
      autoToolChoice: true,
      toolCallParser: "hermes",
    });
    try {
      expect(
        await fetch(`${rt.url}/health`)
          .then((r) => r.status)
          .catch(() => "refused"),
      ).toBe("refused");
      await rt.ready;
      expect((await fetch(`${rt.url}/health`)).status).toBe(200);
      const res = await fetch(
        `${rt.url}/v1/messages`,
        json({ model: "m", max_tokens: 10, stream: true, messages: [{ role: "user", content: "hey" }] }),
      );
      const text = await res.text();
      const events = [...text.matchAll(/^event: (\w+)$/gm)].map((m) => m[1]);
      expect(events[0]).toBe("message_start");
      expect(events.slice(-3)).toEqual(["content_block_stop", "message_delta", "message_stop"]);
      expect([...text.matchAll(/"text_delta","text":"([^"]*)"/g)].map((m) => m[1]).join("")).toBe("You said: hey");
      const emb = await (
        await fetch(`${rt.url}/v1/embeddings`, json({ model: "m", input: ["a", "b"], encoding_format: "base64" }))
      ).json();
      const floats = new Float32Array(Buffer.from(emb.data[0].embedding, "base64").buffer.slice(0));
      expect(floats.length).toBe(8);
      expect(Math.hypot(...floats)).toBeCloseTo(1, 4);
      expect(emb.usage).toEqual({ prompt_tokens: 2, total_tokens: 2 });
      const rr = await (
        await fetch(
          `${rt.url}/v1/rerank`,
          json({ model: "m", query: "red apple", documents: ["blue sky", "red apple pie", "apple"] }),
        )
      ).json();
      expect(rr.results.map((r: { index: number }) => r.index)).toEqual([2, 1, 0]);
    } finally {
      await rt.stop();
    }
  });
});

describe("fake nvidia-smi", () => {
  test("query-gpu CSV with and without units and header, -L, changing telemetry, no GPUs", async () => {
    const env = fixtureEnv({
      FAKE_GPUS: "2x NVIDIA GeForce RTX 4090:24564",
      FAKE_GPU_COUNTER_FILE: join(TMP, "smi.count"),
    });
    const q = "--query-gpu=index,uuid,name,memory.total,memory.used,utilization.gpu,temperature.gpu";
    const bare = await exec(["nvidia-smi", q, "--format=csv,noheader,nounits"], env);
    expect(bare.code).toBe(0);
    const rows = bare.stdout.trim().split("\n");
    expect(rows).toHaveLength(2);
    expect(rows[0]).toMatch(
      /^0, GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}, NVIDIA GeForce RTX 4090, 24564, \d+, \d+, \d+$/,
    );
    const full = (await exec(["nvidia-smi", q, "--format=csv"], env)).stdout.split("\n");
    expect(full[0]).toBe(
      "index, uuid, name, memory.total [MiB], memory.used [MiB], utilization.gpu [%], temperature.gpu",
    );
    expect(full[1]).toMatch(/, 24564 MiB, \d+ MiB, \d+ %, \d+$/);
    const again = (await exec(["nvidia-smi", q, "--format=csv,noheader,nounits"], env)).stdout.trim().split("\n");
    expect(again[0].split(", ").slice(0, 4)).toEqual(rows[0].split(", ").slice(0, 4));
    expect(again[0].split(", ").slice(4, 6)).not.toEqual(rows[0].split(", ").slice(4, 6));
    expect((await exec(["nvidia-smi", "-L"], env)).stdout).toStartWith("GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-");
    const none = await exec(["nvidia-smi", q, "--format=csv"], fixtureEnv());
    expect(none.code).toBe(6);
    expect(none.stdout).toBe("No devices were found\n");
  });
});

describe("fake ollama", () => {
  test("pull without a daemon fails; serve + pull + list + chat; unknown models fail; models survive a restart", async () => {
    const port = await freePort();
    const env = fixtureEnv({
      OLLAMA_HOST: `http://127.0.0.1:${port}`,
      FAKE_OLLAMA_DIR: join(TMP, "ollama"),
      FAKE_OLLAMA_UNKNOWN: "nosuch",
      FAKE_PULL_MS: "40",
    });
    const offline = await exec(["ollama", "pull", "llama3.2"], env);
    expect(offline.code).toBe(1);
    expect(offline.stderr).toBe("Error: could not connect to ollama app, is it running?\n");
    let daemon = run(["ollama", "serve"], env);
    const base = `http://127.0.0.1:${port}`;
    await waitHealthy(base, { path: "/" });
    expect(await (await fetch(base)).text()).toBe("Ollama is running");
    const before = await fetch(
      `${base}/v1/chat/completions`,
      json({ model: "llama3.2", messages: [{ role: "user", content: "hi" }] }),
    );
    expect(before.status).toBe(404);
    expect((await before.json()).error.message).toBe('model "llama3.2" not found, try pulling it first');
    const pulled = await exec(["ollama", "pull", "llama3.2"], env);
    expect(pulled.code).toBe(0);
    expect(pulled.stdout).toContain("pulling manifest");
    expect(pulled.stdout).toMatch(/pulling [0-9a-f]{12}: 100% ▕█+▏ \d+\.\d MB/);
    expect(pulled.stdout).toContain("success");
    const bad = await exec(["ollama", "pull", "nosuch"], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("Error: pull model manifest: file does not exist");
    expect((await exec(["ollama", "list"], env)).stdout).toMatch(
      /^NAME\s+ID\s+SIZE\s+MODIFIED\nllama3\.2:latest\s+[0-9a-f]{12}\s+/,
    );
    const chat = await (
      await fetch(
        `${base}/v1/chat/completions`,
        json({ model: "llama3.2", messages: [{ role: "user", content: "hi" }] }),
      )
    ).json();
    expect(chat.choices[0].message.content).toBe("You said: hi");
    daemon.proc.kill("SIGTERM");
    expect(await daemon.done).toBe(0);
    daemon = run(["ollama", "serve"], env);
    await waitHealthy(base, { path: "/" });
    const tags = await (await fetch(`${base}/api/tags`)).json();
    expect(tags.models.map((m: { name: string }) => m.name)).toEqual(["llama3.2:latest"]);
    daemon.proc.kill("SIGTERM");
    await daemon.done;
  });
});

describe("fake uv", () => {
  test("venv + pip install vllm==X installs once; the installed vllm reports X; unknown versions fail", async () => {
    const record = join(TMP, "uv.jsonl");
    const venv = join(TMP, "venvs", "vllm-0.10.2");
    const env = fixtureEnv({ FAKE_RECORD: record, FAKE_INSTALL_MS: "40", FAKE_UNKNOWN_VERSIONS: "9.9.9" });
    expect((await exec(["uv", "venv", venv, "--python", "3.12"], env)).code).toBe(0);
    const install = await exec(["uv", "pip", "install", "--python", join(venv, "bin", "python"), "vllm==0.10.2"], env);
    expect(install.code).toBe(0);
    expect(install.stderr).toContain("vllm");
    expect((await exec(["uv", "pip", "install", "-p", venv, "vllm==0.10.2"], env)).stderr).toContain(
      "Audited 1 package",
    );
    expect(readRecord(record).filter((e) => e.event === "install")).toMatchObject([
      { package: "vllm", version: "0.10.2" },
    ]);
    expect((await exec([join(venv, "bin", "vllm"), "--version"], env)).stdout.trim()).toBe("0.10.2");
    const bad = await exec(["uv", "pip", "install", "-p", venv, "vllm==9.9.9"], env);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain("there is no version of vllm==9.9.9");
  });
});
