import { afterAll, describe, expect, test } from "bun:test";
import { cleanup, isAlive, waitFor } from "./helpers/proc";
import { servingPool, sseEvents, type Serving } from "./helpers/serving";

/** Slots, queue limits, cancellation, crash loops and shutdown, with a slow (fake) vLLM. */
const { serve, stopAll } = servingPool();
afterAll(async () => {
  await stopAll();
  await cleanup();
});
const ask = (s: Serving, w: string, content: string, signal?: AbortSignal) =>
  s.data(w, "/v1/chat/completions", { body: { messages: [{ role: "user", content }] }, signal });

/** A ready vLLM workload with one replica of `concurrency` slots; returns it and its runtime URL. */
async function slowWorkload(s: Serving, name: string, concurrency: number) {
  const w = await s.createWorkload({
    name,
    backend: "vllm",
    model_name: name,
    config: { command: `vllm serve ${name}` },
  });
  const ready = await s.waitState(w.id);
  const asg = ready.assignments[0];
  await s.admin(`/admin/assignments/${asg.id}`, { method: "PATCH", body: { concurrency } });
  return { w, runtime: asg.base_url!, asg: asg.id };
}
const stats = async (runtime: string) =>
  (await fetch(`${runtime}/fake/stats`)).json() as Promise<{ in_flight: number; max_in_flight: number; total: number }>;

describe("slots and the queue", () => {
  test("concurrency 1: a second request waits for the first, and both are served", async () => {
    const s = await serve({ FAKE_DELAY_MS: "400" });
    const { w, runtime } = await slowWorkload(s, "one-slot", 1);
    const results = await Promise.all([ask(s, w.slug, "first"), ask(s, w.slug, "second"), ask(s, w.slug, "third")]);
    expect(results.map((r) => r.status)).toEqual([200, 200, 200]);
    const texts = await Promise.all(results.map(async (r) => (await r.json()).choices[0].message.content));
    expect(texts).toEqual(["You said: first", "You said: second", "You said: third"]);
    expect((await stats(runtime)).max_in_flight).toBe(1);
  });

  test("a full queue answers 429 and a wait that runs out answers 503, both with Retry-After", async () => {
    const s = await serve({ FAKE_DELAY_MS: "1500", INFERD_QUEUE_MAX: "1", INFERD_QUEUE_WAIT_MS: "600" });
    const { w, runtime } = await slowWorkload(s, "tight", 1);
    const running = ask(s, w.slug, "busy");
    await waitFor(async () => (await stats(runtime)).in_flight === 1 || undefined, {
      what: "the first request running",
    });
    const queued = ask(s, w.slug, "queued");
    await waitFor(async () => (await s.workload(w.id)).queue_depth === 1 || undefined, { what: "one request waiting" });
    const full = await ask(s, w.slug, "too many");
    expect(full.status).toBe(429);
    expect(full.headers.get("retry-after")).toBeTruthy();
    expect((await full.json()).error.code).toBe("queue_full");
    const timedOut = await queued;
    expect(timedOut.status).toBe(503);
    expect(timedOut.headers.get("retry-after")).toBeTruthy();
    expect((await timedOut.json()).error.code).toBe("queue_timeout");
    expect((await running).status).toBe(200);
  });

  test("a client that leaves the queue is never sent to the runtime; one that leaves mid-stream aborts it", async () => {
    const s = await serve({ FAKE_DELAY_MS: "800", FAKE_TOKEN_MS: "200" });
    const { w, runtime } = await slowWorkload(s, "cancel", 1);
    const first = ask(s, w.slug, "hold the slot");
    await waitFor(async () => (await stats(runtime)).in_flight === 1 || undefined, { what: "the slot taken" });
    const ctrl = new AbortController();
    const leaving = ask(s, w.slug, "never mind", ctrl.signal).catch((e) => e);
    await waitFor(async () => (await s.workload(w.id)).queue_depth === 1 || undefined, { what: "queued" });
    ctrl.abort();
    await leaving;
    await waitFor(async () => (await s.workload(w.id)).queue_depth === 0 || undefined, { what: "the queue emptied" });
    expect((await first).status).toBe(200);
    expect((await stats(runtime)).total).toBe(1);

    const streamCtrl = new AbortController();
    const r = await s.data(w.slug, "/v1/chat/completions", {
      body: { stream: true, messages: [{ role: "user", content: "a long answer with many words to stream slowly" }] },
      signal: streamCtrl.signal,
    });
    const reader = r.body!.getReader();
    await reader.read();
    streamCtrl.abort();
    await waitFor(() => s.events((e) => e.event === "aborted").length > 0 || undefined, {
      what: "the runtime to see the abort",
    });
    await waitFor(async () => (await s.workload(w.id)).assignments[0].in_flight === 0 || undefined, {
      what: "the slot released",
    });
    expect((await ask(s, w.slug, "after")).status).toBe(200);
  });

  test("a client that leaves while the runtime works on its whole (not streamed) answer aborts it there", async () => {
    const s = await serve({ FAKE_DELAY_MS: "5000" });
    const { w, runtime } = await slowWorkload(s, "leave-mid-answer", 1);
    const ctrl = new AbortController();
    const leaving = ask(s, w.slug, "take your time", ctrl.signal).catch((e) => e);
    await waitFor(async () => (await stats(runtime)).in_flight === 1 || undefined, {
      what: "the runtime working on it",
    });
    ctrl.abort();
    await leaving;
    await waitFor(() => s.events((e) => e.event === "aborted").length > 0 || undefined, {
      what: "the runtime to see the abort",
    });
    await waitFor(async () => (await s.workload(w.id)).assignments[0].in_flight === 0 || undefined, {
      what: "the slot released",
    });
  });
});

describe("failures and shutdown", () => {
  test("a runtime that keeps crashing ends failed with its exit code and last output; requests get 503 at once", async () => {
    const s = await serve({ FAKE_CRASH_AT_START: "9", INFERD_MAX_CRASHES: "2" });
    const w = await s.createWorkload({
      name: "doomed",
      backend: "vllm",
      model_name: "doomed",
      config: { command: "vllm serve doomed" },
    });
    const failed = await s.waitState(w.id, "failed");
    const reason = failed.assignments[0].reason!;
    expect(reason).toContain("9");
    expect(reason.split("\n").length).toBeGreaterThan(2);
    const r = await ask(s, w.slug, "hello?");
    expect(r.status).toBe(503);
    expect((await r.json()).error.message).toContain("failed to start");
  });

  test("a runtime killed mid-stream: the client's stream ends cleanly with an error event in its own dialect, then the runtime comes back", async () => {
    const s = await serve({ FAKE_TOKEN_MS: "200" });
    const w = await s.createWorkload({
      name: "breaks-off",
      backend: "vllm",
      model_name: "bo",
      config: { command: "vllm serve bo" },
    });
    await s.waitState(w.id);
    const starts = () => s.events((e) => e.event === "start" && (e.argv as string[]).includes("bo"));
    /** Waits for the runtime the supervisor starts again after a kill, and for it to be ready. */
    const backAgain = async (before: number) => {
      await waitFor(() => starts().length > before || undefined, { what: "the runtime started again" });
      await s.waitState(w.id);
    };
    /** Starts a stream, kills the runtime after its first token and reads the body to its end. */
    const cutShort = async (path: string, body: Record<string, unknown>) => {
      const pid = starts().at(-1)!.pid as number;
      const r = await s.data(w.slug, path, { body: { ...body, stream: true, max_tokens: 8 } });
      expect(r.status).toBe(200);
      const reader = r.body!.getReader();
      const decoder = new TextDecoder();
      let text = "";
      while (!/"(content|text)":"/.test(text)) text += decoder.decode((await reader.read()).value, { stream: true });
      process.kill(pid, "SIGKILL");
      // A reset connection would throw here instead of ending the body.
      for (let next = await reader.read(); !next.done; next = await reader.read())
        text += decoder.decode(next.value, { stream: true });
      return text;
    };
    const openai = await cutShort("/v1/chat/completions", {
      messages: [{ role: "user", content: "one two three four five six seven eight" }],
    });
    const events = openai
      .split("\n\n")
      .filter((e) => e.startsWith("data: "))
      .map((e) => e.slice(6));
    expect(events).not.toContain("[DONE]");
    expect(JSON.parse(events.at(-1)!).error).toMatchObject({
      type: "server_error",
      message: expect.stringContaining("broke off mid-answer"),
    });
    await backAgain(1);
    const anthropic = await cutShort("/v1/messages", {
      model: "bo",
      messages: [{ role: "user", content: "one two three four five six seven eight" }],
    });
    expect(anthropic).not.toContain("message_stop");
    expect(anthropic.trimEnd().split("\n\n").at(-1)).toStartWith("event: error\ndata: ");
    await backAgain(2);
    expect((await ask(s, w.slug, "are you back?")).status).toBe(200);
  });

  test("a command that cannot be launched fails with a clear reason", async () => {
    const s = await serve({});
    const w = await s.createWorkload({
      name: "missing",
      backend: "sglang",
      model_name: "m",
      config: { command: "no-such-sglang-binary --model-path m" },
    });
    const failed = await s.waitState(w.id, "failed");
    expect(failed.assignments[0].reason).toMatch(/not found|ENOENT/i);
  });

  test("SIGTERM stops inferd and every runtime it started: no orphans", async () => {
    const s = await serve({});
    const w = await s.createWorkload({
      name: "orphan-check",
      backend: "vllm",
      model_name: "oc",
      config: { command: "vllm serve oc" },
    });
    await s.waitState(w.id);
    const pids = s.events((e) => e.event === "start").map((e) => e.pid as number);
    expect(pids.length).toBeGreaterThan(0);
    expect(await s.stop()).toBe(0);
    const alive = pids.filter(isAlive);
    expect(alive).toEqual([]);
  });
});

describe("slow first token", () => {
  test("a stream whose first token takes longer than Bun's default 10 s idle timeout still arrives", async () => {
    const s = await serve({ FAKE_FIRST_TOKEN_MS: "11000" });
    const w = await s.createWorkload({
      name: "slowpoke",
      backend: "vllm",
      model_name: "slowpoke",
      config: { command: "vllm serve slowpoke" },
    });
    await s.waitState(w.id);
    const r = await s.data(w.slug, "/v1/chat/completions", {
      body: { stream: true, messages: [{ role: "user", content: "take your time" }] },
    });
    const events = await sseEvents(r);
    expect(events.at(-1)).toBe("[DONE]");
    const text = (events.slice(0, -1) as { choices: { delta: { content?: string } }[] }[])
      .map((c) => c.choices[0].delta.content ?? "")
      .join("");
    expect(text).toBe("You said: take your time");
  }, 60_000);
});
