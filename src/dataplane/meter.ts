import { objectEnd } from "../http";
import { bytesOf, SseDecoder, type SseEvent } from "./sse";
import { pipeTranslator, type StreamTranslator } from "./stream-pipe";
import type { Usage } from "../usage/meter";

/** Token counts (the usage module's type, which the data plane's readers fill). */
export type { Usage };

/**
 * Reads token usage from a parsed response body: OpenAI's `usage.prompt_tokens/completion_tokens`,
 * Anthropic's `usage.input_tokens/output_tokens` or `message.usage` of a `message_start` event.
 * @example usageOf({usage: {prompt_tokens: 3, completion_tokens: 5}}) // → {inputTokens: 3, outputTokens: 5}
 */
export function usageOf(body: unknown): Usage | undefined {
  if (!body || typeof body !== "object") return undefined;
  const o = body as Record<string, unknown>;
  const u = (o.usage ?? (o.message as Record<string, unknown> | undefined)?.usage) as
    | Record<string, unknown>
    | undefined;
  if (!u || typeof u !== "object") return undefined;
  const n = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  return { inputTokens: n(u.prompt_tokens ?? u.input_tokens), outputTokens: n(u.completion_tokens ?? u.output_tokens) };
}

/**
 * Reads token usage from a JSON answer's text without parsing the whole answer: the object after its
 * last `"usage"` member (where OpenAI's, Anthropic's and the engines' answers put the answer's own
 * usage) is parsed alone. Text that holds no such object is parsed whole, as `usageOf` reads it.
 * @example usageOfText('{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":5}}') // → {inputTokens: 3, outputTokens: 5}
 */
export function usageOfText(text: string): Usage | undefined {
  const at = text.lastIndexOf('"usage"');
  const open = at < 0 ? -1 : afterColon(text, at + 7);
  const close = open < 0 || text.charCodeAt(open) !== 123 ? -1 : objectEnd(text, open);
  try {
    if (close > 0) return usageOf({ usage: JSON.parse(text.slice(open, close + 1)) });
    return usageOf(JSON.parse(text));
  } catch {
    return undefined;
  }
}

/** The index of the first character after `i`'s whitespace, a colon and whitespace; -1 without the colon. */
function afterColon(text: string, i: number): number {
  while (isSpace(text.charCodeAt(i))) i++;
  if (text.charCodeAt(i) !== 58) return -1;
  i++;
  while (isSpace(text.charCodeAt(i))) i++;
  return i;
}

const isSpace = (c: number): boolean => c === 32 || c === 10 || c === 13 || c === 9;

/** Options of `meteredStream`. */
export interface MeterOptions {
  /** Drop chunks that only carry usage (`choices: []`), for when inferd asked for them itself. */
  dropUsageOnlyChunks: boolean;
  /** Called once, when the stream ends, is cancelled or fails, with the usage seen. */
  onEnd(usage: Usage, outcome: "done" | "cancelled" | "error"): void;
  /** Called once, when the first event carrying data goes to the client (time to first token). */
  onFirst?(): void;
  /** Rewrites the events that go to the client (the model name they carry: see `modelNamer`). */
  rename?(events: string): string;
  /** Given each chunk as it goes to the client (the inspector's capture). */
  tee?(bytes: Uint8Array): void;
}

const dec = new TextDecoder();

/** The last event of a stream whose runtime broke off: OpenAI's `data: {error}` or Anthropic's `event: error`. */
function brokenOffEvent(anthropic: boolean, message: string): string {
  if (anthropic)
    return `event: error\ndata: ${JSON.stringify({ type: "error", error: { type: "api_error", message } })}\n\n`;
  return `data: ${JSON.stringify({ error: { message, type: "server_error", code: "upstream_unavailable" } })}\n\n`;
}

/** The runtime's own SSE (OpenAI chunks or Anthropic events) passed on event by event, its usage read on the way. */
class SseMeter implements StreamTranslator {
  readonly usage: Usage = { inputTokens: 0, outputTokens: 0 };
  readonly done = false;
  #sse = new SseDecoder();

  constructor(private readonly opts: Pick<MeterOptions, "dropUsageOnlyChunks" | "rename">) {}

  /** The complete events of these bytes, as they came unless dropped or renamed. */
  push(chunk: Uint8Array): string | Uint8Array {
    return this.#pass(this.#sse.push(chunk));
  }

  /** Upstream closed: what is left, even without its blank line. */
  end(): string | Uint8Array {
    return this.#pass(this.#sse.end());
  }

  /** The runtime broke off: an error event in the stream's own dialect. */
  fail(message: string): string {
    return brokenOffEvent(this.#sse.named || /^event:/m.test(this.#sse.rest), message);
  }

  /** The events' bytes as one view; they are looked into only when their text says `"usage"`, re-encoded only when changed. */
  #pass(events: SseEvent[]): string | Uint8Array {
    if (!events.length) return "";
    const bytes = bytesOf(events);
    const text = dec.decode(bytes);
    if (text.includes('"usage"')) {
      const kept = events.filter((ev) => this.#count(ev));
      if (kept.length < events.length) return this.#renamed(kept.map((ev) => ev.text).join(""));
    }
    const renamed = this.#renamed(text);
    return renamed === text ? bytes : renamed;
  }

  #renamed(text: string): string {
    return text && this.opts.rename ? this.opts.rename(text) : text;
  }

  /** Reads an event's usage; false for a usage-only chunk to drop. */
  #count(ev: SseEvent): boolean {
    if (!ev.text.includes('"usage"')) return true;
    const data = ev.json();
    const u = usageOf(data);
    if (u) {
      this.usage.inputTokens = Math.max(this.usage.inputTokens, u.inputTokens);
      this.usage.outputTokens = Math.max(this.usage.outputTokens, u.outputTokens);
    }
    const choices = (data as { choices?: unknown } | undefined)?.choices;
    return !(this.opts.dropUsageOnlyChunks && Array.isArray(choices) && choices.length === 0);
  }
}

/**
 * Passes a runtime's SSE stream to the client event by event, as each arrives (nothing is held
 * back beyond an incomplete event), while reading token usage out of it. Handles both OpenAI
 * chunks and Anthropic events; events are forwarded byte for byte unless dropped as usage-only
 * or given another model name (`rename`). A runtime that breaks off mid-answer ends the stream
 * with an error event in its own dialect.
 */
export function meteredStream(upstream: ReadableStream<Uint8Array>, opts: MeterOptions): ReadableStream<Uint8Array> {
  const meter = new SseMeter(opts);
  return pipeTranslator(upstream, meter, {
    onFirst: opts.onFirst,
    onEnd: (outcome) => opts.onEnd(meter.usage, outcome),
    tee: opts.tee,
    failure: (reason) => `the model runtime broke off mid-answer (${reason})`,
  });
}
