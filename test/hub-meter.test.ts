/**
 * Two core pieces on their own, without servers: the host's AgentHub (requests queued per remote
 * worker, pulled by long polls, answers piped back, a lost worker's requests failed or cut) and the
 * SSE meter (events passed on whole however the bytes are split, usage read, first token noticed).
 */
import { describe, expect, test } from "bun:test";
import { AgentHub } from "../src/agents/hub";
import { meteredStream, usageOfText, type Usage } from "../src/dataplane/meter";
import { AppError } from "../src/errors";

const enc = new TextEncoder();
const report = {
  assignment_id: "asg_1",
  state: "ready" as const,
  base_url: "http://127.0.0.1:1",
  served_model: "served",
};
const upstream = {
  path: "/v1/chat/completions",
  method: "POST",
  headers: { "content-type": "application/json" },
  body: null,
  json: { model: "default", messages: [] },
};
const streamOf = (parts: string[]) =>
  new ReadableStream<Uint8Array>({
    start(c) {
      for (const p of parts) c.enqueue(enc.encode(p));
      c.close();
    },
  });

describe("AgentHub", () => {
  test("a request waits for the agent's long poll, carries the served model, and gets the streamed answer", async () => {
    const hub = new AgentHub();
    const target = hub.target("wk_1", report, 4, "wl_1");
    const answer = target.send(upstream, new AbortController().signal);
    const [msg] = await hub.poll("wk_1", 1000, new AbortController().signal);
    expect(msg).toMatchObject({ assignment_id: "asg_1", path: "/v1/chat/completions" });
    expect(JSON.parse(Buffer.from(msg.body_b64!, "base64").toString()).model).toBe("served");
    const status = hub.respond("wk_1", msg.id, 200, "text/plain", streamOf(["he", "llo"]));
    const r = await answer;
    expect([r.status, await r.text(), await status]).toEqual([200, "hello", 200]);
  });

  test("a long poll with nothing to do returns empty after its wait, and at once when work arrives", async () => {
    const hub = new AgentHub();
    expect(await hub.poll("wk_1", 20, new AbortController().signal)).toEqual([]);
    const polled = hub.poll("wk_1", 60_000, new AbortController().signal);
    void hub
      .target("wk_1", report, 1, "wl_1")
      .send(upstream, new AbortController().signal)
      .catch(() => {});
    expect(await polled).toHaveLength(1);
  });

  test("a worker lost before answering: its requests fail as WorkerLost (to run elsewhere); mid-stream: an SSE error event ends the stream", async () => {
    const hub = new AgentHub();
    const t = hub.target("wk_1", report, 4, "wl_1");
    const waiting = t.send(upstream, new AbortController().signal).catch((e) => e);
    const streaming = t.send(upstream, new AbortController().signal);
    const msgs = await hub.poll("wk_1", 1000, new AbortController().signal);
    let push!: ReadableStreamDefaultController<Uint8Array>;
    const body = new ReadableStream<Uint8Array>({ start: (c) => void (push = c) });
    const pumping = hub.respond("wk_1", msgs[1].id, 200, "text/event-stream", body);
    push.enqueue(enc.encode('data: {"n":1}\n\n'));
    const r = await streaming;
    hub.failWorker("wk_1", "worker went offline");
    const lost = (await waiting) as AppError;
    expect([lost.code, lost.status]).toEqual(["worker_lost", 503]);
    const text = await r.text();
    expect(text).toStartWith('data: {"n":1}\n\n');
    expect(text).toContain('"code":"worker_lost"');
    expect(await pumping).toBe(502);
  });

  test("a client that leaves before the agent picks its request up is dropped from the queue", async () => {
    const hub = new AgentHub();
    const ctl = new AbortController();
    const gone = hub
      .target("wk_1", report, 1, "wl_1")
      .send(upstream, ctl.signal)
      .catch((e) => e);
    ctl.abort();
    expect(((await gone) as AppError).status).toBe(499);
    expect(await hub.poll("wk_1", 10, new AbortController().signal)).toEqual([]);
  });
});

describe("the SSE meter", () => {
  test("events split across chunks anywhere are passed on whole, usage read, the first token noticed once", async () => {
    const events = [
      'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n',
      'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}\n\n',
      "data: [DONE]\n\n",
    ];
    const whole = events.join("");
    for (const cut of [1, 7, 23, 60, whole.length - 3]) {
      let ended: { usage: Usage; outcome: string } | undefined;
      let firsts = 0;
      const out = meteredStream(streamOf([whole.slice(0, cut), whole.slice(cut)]), {
        dropUsageOnlyChunks: true,
        onFirst: () => firsts++,
        onEnd: (usage, outcome) => (ended = { usage, outcome }),
      });
      const text = await new Response(out).text();
      // The usage-only chunk inferd asked for itself is dropped; the rest is byte for byte.
      expect(text).toBe(events[0] + events[2]);
      expect(ended).toEqual({ usage: { inputTokens: 3, outputTokens: 5 }, outcome: "done" });
      expect(firsts).toBe(1);
    }
  });

  test("a client that cancels cancels the upstream (the runtime's request is cut) and ends the meter as cancelled", async () => {
    let cancelled = false;
    let outcome = "";
    const never = new ReadableStream<Uint8Array>({
      start: (c) => c.enqueue(enc.encode('data: {"x":1}\n\n')),
      cancel: () => void (cancelled = true),
    });
    const out = meteredStream(never, {
      dropUsageOnlyChunks: false,
      onEnd: (_u, o) => (outcome = o),
    });
    const reader = out.getReader();
    await reader.read();
    await reader.cancel();
    expect([cancelled, outcome]).toEqual([true, "cancelled"]);
  });
});

describe("usage read from a JSON answer's text", () => {
  test("the answer's usage object is read, however the answer around it looks", () => {
    const vllm =
      '{"id":"chatcmpl-1","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"the \\"usage\\": {\\"prompt_tokens\\": 99} is quoted","tool_calls":[]}}],"usage":{"prompt_tokens":3,"total_tokens":8,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":0}},"prompt_logprobs":null,"kv_transfer_params":null}';
    expect(usageOfText(vllm)).toEqual({ inputTokens: 3, outputTokens: 5 });
    // Pretty-printed, and Anthropic's names.
    expect(usageOfText('{\n  "type": "message",\n  "usage" :\n  { "input_tokens": 7, "output_tokens": 2 }\n}')).toEqual(
      {
        inputTokens: 7,
        outputTokens: 2,
      },
    );
  });

  test("an answer without a usage object has none; a broken one is not an error", () => {
    expect(usageOfText('{"object":"usage","data":[]}')).toBeUndefined();
    expect(usageOfText('{"usage":null}')).toBeUndefined();
    expect(usageOfText('{"usage":{"prompt_tokens":3')).toBeUndefined();
    expect(usageOfText("not json")).toBeUndefined();
  });
});
