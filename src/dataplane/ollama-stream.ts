/**
 * Streaming half of the Ollama API: a runtime's OpenAI-style SSE (`chat.completion.chunk` or
 * `text_completion` events) becomes Ollama's NDJSON (one JSON object per line, the last one
 * `done: true` with the durations and token counts), and every NDJSON answer (translated, or an
 * Ollama runtime's own) is metered line by line as it goes to the client.
 */
import type { JsonObject } from "./anthropic";
import type { Usage } from "./meter";
import { countsOf, doneReasonOf, metricsOf, ollamaErrorOf, ollamaToolCalls, reasoningOf } from "./ollama-translate";
import { SseDecoder, type SseEvent } from "./sse";
import { pipeTranslator, type StreamTranslator } from "./stream-pipe";

const isObj = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);
const line = (o: unknown) => `${JSON.stringify(o)}\n`;

/** A streamed tool call being put together from its fragments. */
type ToolParts = { index: number; id?: string; name: string; args: string };

/**
 * Translates one streamed chat (or text) completion into Ollama NDJSON for `/api/chat` or
 * `/api/generate`. Feed it upstream bytes with `push`, then call `end`; each returns the lines to
 * send. Text and thinking go out as they arrive; tool calls, which Ollama sends whole, go out in one
 * line once the runtime finished them; the `done` line follows the runtime's `[DONE]`.
 * @example const t = new ChatStreamToOllama("chat", "m", {arrived, waited}); send(t.push(bytes)); send(t.end());
 */
export class ChatStreamToOllama implements StreamTranslator {
  #sse = new SseDecoder();
  #out = "";
  #done = false;
  #finish: unknown = null;
  #usage: Usage = { inputTokens: 0, outputTokens: 0 };
  #tools = new Map<number, ToolParts>();
  #first: number | undefined;

  /**
   * @param route which Ollama answer to write (`message` lines or `response` lines)
   * @param model the model name to report (the one the client asked for)
   * @param timing when the request arrived and how long it waited for a replica (`performance.now()` ms)
   */
  constructor(
    private readonly route: "chat" | "generate",
    private readonly model: string,
    private readonly timing: { arrived: number; waited: number },
    private readonly now: () => number = () => performance.now(),
    private readonly clock: () => Date = () => new Date(),
  ) {}

  /** True once the `done` line (or an error line) has been written; later input is ignored. */
  get done(): boolean {
    return this.#done;
  }

  /** Feeds upstream bytes (any split); returns the NDJSON for every complete SSE event in them. */
  push(chunk: Uint8Array | string): string {
    for (const ev of this.#sse.push(chunk)) this.#event(ev);
    return this.#take();
  }

  /** Upstream closed: the `done` line when the runtime finished (even without `[DONE]`), else an error line. */
  end(): string {
    for (const ev of this.#sse.end()) this.#event(ev);
    if (!this.#done) {
      if (this.#finish !== null) this.#finishAll();
      else this.#error("the model runtime's stream ended before it was complete");
    }
    return this.#take();
  }

  /** Upstream broke mid-stream: Ollama's error line (nothing when the `done` line was already written). */
  fail(message: string): string {
    if (!this.#done) this.#error(message);
    return this.#take();
  }

  #take(): string {
    const out = this.#out;
    this.#out = "";
    return out;
  }

  /** One SSE event: only `data:` payloads matter (OpenAI streams send nothing else that counts). */
  #event(ev: SseEvent): void {
    if (this.#done || ev.empty) return;
    const data = ev.data.trim();
    if (data === "[DONE]") return this.#finishAll();
    const chunk = ev.json();
    if (chunk === undefined) return this.#error(`the model runtime sent malformed stream data: ${data.slice(0, 200)}`);
    if (isObj(chunk)) this.#chunk(chunk);
  }

  #chunk(c: JsonObject): void {
    if (c.error !== undefined || c.object === "error") {
      const code = isObj(c.error) ? c.error.code : c.code;
      return this.#error(ollamaErrorOf(typeof code === "number" ? code : 500, JSON.stringify(c)).error);
    }
    if (isObj(c.usage)) this.#usage = countsOf(c);
    const choice = Array.isArray(c.choices) ? c.choices.find((x) => isObj(x) && (x.index ?? 0) === 0) : undefined;
    if (!isObj(choice)) return;
    const delta = isObj(choice.delta) ? choice.delta : {};
    const text = typeof choice.text === "string" ? choice.text : typeof delta.content === "string" ? delta.content : "";
    const thinking = reasoningOf(delta);
    if (text || thinking) this.#piece(text, thinking);
    if (Array.isArray(delta.tool_calls)) for (const tc of delta.tool_calls.filter(isObj)) this.#toolFragment(tc);
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) {
      this.#finish = choice.finish_reason;
      this.#flushTools();
    }
  }

  /** The head of every line: the model asked for and the time. */
  #head(): JsonObject {
    return { model: this.model, created_at: this.clock().toISOString() };
  }

  /** A line of generated text (or thinking). */
  #piece(text: string, thinking: string | undefined, calls?: JsonObject[]): void {
    this.#first ??= this.now();
    if (this.route === "generate") {
      this.#out += line({ ...this.#head(), response: text, ...(thinking ? { thinking } : {}), done: false });
      return;
    }
    const message: JsonObject = { role: "assistant", content: text };
    if (thinking) message.thinking = thinking;
    if (calls) message.tool_calls = calls;
    this.#out += line({ ...this.#head(), message, done: false });
  }

  #toolFragment(tc: JsonObject): void {
    const index = typeof tc.index === "number" ? tc.index : this.#tools.size;
    const fn = isObj(tc.function) ? tc.function : {};
    const parts = this.#tools.get(index) ?? { index, name: "", args: "" };
    if (typeof tc.id === "string" && tc.id) parts.id = tc.id;
    if (typeof fn.name === "string") parts.name += fn.name;
    if (typeof fn.arguments === "string") parts.args += fn.arguments;
    else if (isObj(fn.arguments)) parts.args = JSON.stringify(fn.arguments);
    this.#tools.set(index, parts);
  }

  /** The finished tool calls, in one line as Ollama sends them (chat only; `generate` has no tools). */
  #flushTools(): void {
    if (!this.#tools.size) return;
    const calls = [...this.#tools.values()]
      .sort((a, b) => a.index - b.index)
      .map((p) => ({ index: p.index, id: p.id, function: { name: p.name, arguments: p.args } }));
    this.#tools.clear();
    if (this.route === "chat") this.#piece("", undefined, ollamaToolCalls(calls));
  }

  /** The last line: `done: true`, why it stopped, durations and token counts. */
  #finishAll(): void {
    if (this.#done) return;
    this.#flushTools();
    this.#done = true;
    const body = this.route === "chat" ? { message: { role: "assistant", content: "" } } : { response: "" };
    const metrics = metricsOf(this.#usage, { ...this.timing, first: this.#first, end: this.now() });
    this.#out += line({ ...this.#head(), ...body, done_reason: doneReasonOf(this.#finish), done: true, ...metrics });
  }

  /** Ends the stream with Ollama's mid-stream error line. */
  #error(message: string): void {
    this.#done = true;
    this.#out += line({ error: message });
  }
}

/**
 * A runtime's SSE body as Ollama NDJSON, through the one stream pipe: a runtime that breaks off
 * mid-answer ends it with Ollama's error line.
 * @example sseToNdjson(upstream.body, new ChatStreamToOllama("chat", "m", timing))
 */
export function sseToNdjson(upstream: ReadableStream<Uint8Array>, t: ChatStreamToOllama): ReadableStream<Uint8Array> {
  return pipeTranslator(upstream, t, { failure: brokeOff });
}

/** The message of a runtime that broke off mid-answer. */
const brokeOff = (reason: string) => `the model runtime broke off mid-answer (${reason})`;

/** Options of `meteredNdjson`. */
export interface NdjsonMeterOptions {
  /** Set every line's `model` to this (an Ollama runtime names its own model; the client asked for another). */
  model?: string;
  /** Called once, when the first line goes to the client. */
  onFirst(): void;
  /** Called once, when the stream ends (`done`: a `done: true` line and no error), is cancelled or breaks. */
  onEnd(usage: Usage, outcome: "done" | "cancelled" | "error"): void;
  /** Given each chunk as it goes to the client (the inspector's capture). */
  tee?(bytes: Uint8Array): void;
}

/**
 * Passes an NDJSON stream to the client line by line as lines complete, reading the token counts
 * of its `done` line (`prompt_eval_count`, `eval_count`). A runtime that breaks off mid-answer ends
 * the client's stream with Ollama's `{"error": …}` line rather than a reset connection.
 */
export function meteredNdjson(
  upstream: ReadableStream<Uint8Array>,
  opts: NdjsonMeterOptions,
): ReadableStream<Uint8Array> {
  let usage: Usage = { inputTokens: 0, outputTokens: 0 };
  let sawDone = false;
  let sawError = false;
  let settled = false;
  const settle = (outcome: "done" | "cancelled" | "error") => {
    if (!settled) opts.onEnd(usage, outcome);
    settled = true;
  };
  const reader = upstream.getReader();
  const enc = new TextEncoder();
  // The runtime's bytes, with a failure turned into a last error line.
  const source = new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const r = await reader.read();
        if (r.done) controller.close();
        else controller.enqueue(r.value);
      } catch (e) {
        controller.enqueue(enc.encode(line({ error: brokeOff(e instanceof Error ? e.message : String(e)) })));
        controller.close();
      }
    },
    cancel(reason) {
      settle("cancelled");
      return reader.cancel(reason).catch(() => {});
    },
  });
  const look = (raw: string): string => {
    let o: unknown;
    try {
      o = JSON.parse(raw);
    } catch {
      return `${raw}\n`;
    }
    if (!isObj(o)) return `${raw}\n`;
    sawError ||= o.error !== undefined;
    if (o.done === true) {
      sawDone = true;
      usage = countsOf(o);
    }
    return opts.model !== undefined && typeof o.model === "string" && o.model !== opts.model
      ? line({ ...o, model: opts.model })
      : `${raw}\n`;
  };
  const decoder = new TextDecoder();
  let partial = "";
  let first = true;
  const send = (text: string, controller: TransformStreamDefaultController<Uint8Array>) => {
    const out = text
      .split("\n")
      .filter((l) => l.trim())
      .map(look)
      .join("");
    if (!out) return;
    if (first) opts.onFirst();
    first = false;
    const bytes = enc.encode(out);
    opts.tee?.(bytes);
    controller.enqueue(bytes);
  };
  return source.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        const text = partial + decoder.decode(chunk, { stream: true });
        const cut = text.lastIndexOf("\n") + 1;
        partial = text.slice(cut);
        send(text.slice(0, cut), controller);
      },
      flush(controller) {
        send(partial + decoder.decode(), controller);
        settle(sawDone && !sawError ? "done" : "error");
      },
    }),
  );
}
