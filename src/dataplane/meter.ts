/** Token counts found in a response, in either OpenAI or Anthropic naming. */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
}

/**
 * Reads token usage from a parsed response body: OpenAI's `usage.prompt_tokens/completion_tokens`,
 * Anthropic's `usage.input_tokens/output_tokens` or `message.usage` of a `message_start` event.
 * @example usageOf({usage: {prompt_tokens: 3, completion_tokens: 5}}) // → {inputTokens: 3, outputTokens: 5}
 */
export function usageOf(body: unknown): Usage | undefined {
  if (!body || typeof body !== "object") return undefined;
  const o = body as Record<string, unknown>;
  const u = (o.usage ?? (o.message as Record<string, unknown> | undefined)?.usage) as Record<string, unknown> | undefined;
  if (!u || typeof u !== "object") return undefined;
  const n = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  return { inputTokens: n(u.prompt_tokens ?? u.input_tokens), outputTokens: n(u.completion_tokens ?? u.output_tokens) };
}

/** Options of `meteredStream`. */
export interface MeterOptions {
  /** Drop chunks that only carry usage (`choices: []`), for when inferd asked for them itself. */
  dropUsageOnlyChunks: boolean;
  /** Called once, when the stream ends, is cancelled or fails, with the usage seen. */
  onEnd(usage: Usage, outcome: "done" | "cancelled" | "error"): void;
  /** Called when the client goes away, to abort the upstream request. */
  abort(): void;
  /** Called once, when the first event carrying data goes to the client (time to first token). */
  onFirst?(): void;
  /** Rewrites the events that go to the client (the model name they carry: see `modelNamer`). */
  rename?(events: string): string;
  /** Given each chunk as it goes to the client (the inspector's capture). */
  tee?(bytes: Uint8Array): void;
}

const enc = new TextEncoder();

/** The last event of a stream whose runtime broke off: OpenAI's `data: {error}` or Anthropic's `event: error`. */
function brokenOffEvent(anthropic: boolean, e: unknown): string {
  const message = `the model runtime broke off mid-answer (${e instanceof Error ? e.message : String(e)})`;
  if (anthropic) return `event: error\ndata: ${JSON.stringify({ type: "error", error: { type: "api_error", message } })}\n\n`;
  return `data: ${JSON.stringify({ error: { message, type: "server_error", code: "upstream_unavailable" } })}\n\n`;
}

/**
 * Passes a runtime's SSE stream to the client event by event, as each arrives (nothing is held
 * back beyond an incomplete event), while reading token usage out of it. Handles both OpenAI
 * chunks and Anthropic events; events are forwarded byte for byte unless dropped as usage-only
 * or given another model name (`rename`).
 */
export function meteredStream(upstream: ReadableStream<Uint8Array>, opts: MeterOptions): ReadableStream<Uint8Array> {
  const reader = upstream.getReader();
  const decoder = new TextDecoder();
  const usage: Usage = { inputTokens: 0, outputTokens: 0 };
  let pending = "";
  let ended = false;
  let first = false;
  let anthropic = false;
  const rename = opts.rename ?? ((events: string) => events);
  const send = (controller: ReadableStreamDefaultController<Uint8Array>, text: string) => {
    const bytes = enc.encode(text);
    opts.tee?.(bytes);
    controller.enqueue(bytes);
  };
  const end = (outcome: "done" | "cancelled" | "error") => {
    if (ended) return;
    ended = true;
    opts.onEnd(usage, outcome);
  };
  const scan = (event: string): boolean => {
    if (!event.includes('"usage"')) return true;
    for (const line of event.split(/\r?\n/)) {
      if (!line.startsWith("data:")) continue;
      try {
        const data = JSON.parse(line.slice(5).trim());
        const u = usageOf(data);
        if (u) {
          usage.inputTokens = Math.max(usage.inputTokens, u.inputTokens);
          usage.outputTokens = Math.max(usage.outputTokens, u.outputTokens);
        }
        if (opts.dropUsageOnlyChunks && Array.isArray(data.choices) && data.choices.length === 0) return false;
      } catch {}
    }
    return true;
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) {
            if (pending && scan(pending)) send(controller, rename(pending));
            controller.close();
            end("done");
            return;
          }
          pending += decoder.decode(value, { stream: true });
          anthropic ||= /^event:/m.test(pending);
          let out = "";
          for (let i = pending.search(/\r?\n\r?\n/); i >= 0; i = pending.search(/\r?\n\r?\n/)) {
            const len = pending.slice(i).match(/^\r?\n\r?\n/)![0].length;
            const event = pending.slice(0, i + len);
            pending = pending.slice(i + len);
            if (scan(event)) out += event;
          }
          if (out) {
            if (!first) {
              first = true;
              opts.onFirst?.();
            }
            send(controller, rename(out));
            return;
          }
        }
      } catch (e) {
        // The runtime broke off mid-answer (it crashed or was killed): end the client's stream with an
        // error event in the stream's own dialect and close it cleanly; erroring it would reset the
        // connection and the client would not learn why.
        send(controller, brokenOffEvent(anthropic, e));
        controller.close();
        end("error");
      }
    },
    cancel(reason) {
      opts.abort();
      reader.cancel(reason).catch(() => {});
      end("cancelled");
    },
  });
}
