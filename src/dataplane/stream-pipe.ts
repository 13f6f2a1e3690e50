/**
 * The one loop that runs a runtime's SSE body to the client through a translator (the chat meter's
 * pass-through, Messages events, Responses events or Ollama lines), reading upstream only as the
 * client reads.
 */

/**
 * Turns a runtime's SSE stream into the client's: feed it bytes, then `end` or `fail`; `done` once
 * it said its last word. Each reads its input through one `SseDecoder` (./sse.ts) and returns what
 * to send: text, or bytes when it passes the runtime's own on.
 */
export interface StreamTranslator {
  push(chunk: Uint8Array): string | Uint8Array;
  end(): string | Uint8Array;
  fail(message: string): string | Uint8Array;
  readonly done: boolean;
}

/** What the caller of `pipeTranslator` hears of the stream; every hook is optional. */
export interface PipeHooks {
  /** Called once, when the first output of the runtime's events goes to the client (time to first token). */
  onFirst?(): void;
  /** Called once, when the stream ends, is cancelled or the runtime broke off. */
  onEnd?(outcome: "done" | "cancelled" | "error"): void;
  /** Given each chunk as it goes to the client (the inspector's capture). */
  tee?(bytes: Uint8Array): void;
  /** The message `fail` gets when the runtime's stream breaks, from the error's own message. */
  failure?(reason: string): string;
}

const enc = new TextEncoder();
const streamFailed = (reason: string) => `the model runtime's stream failed: ${reason}`;

/**
 * Runs a runtime's SSE body through a translator. Reads upstream only as the client reads
 * (backpressure); sends one chunk per upstream read that completes something; cancels upstream when
 * the client goes away or the translator is done; a runtime that breaks off mid-answer ends the
 * client's stream with the translator's error (`fail`) and a clean close, not a reset connection.
 * @example pipeTranslator(upstream.body, new ChatStreamToMessages(model))
 */
export function pipeTranslator(
  upstream: ReadableStream<Uint8Array>,
  t: StreamTranslator,
  hooks: PipeHooks = {},
): ReadableStream<Uint8Array> {
  const reader = upstream.getReader();
  let first = true;
  let ended = false;
  const end = (outcome: "done" | "cancelled" | "error") => {
    if (ended) return;
    ended = true;
    hooks.onEnd?.(outcome);
  };
  const send = (controller: ReadableStreamDefaultController<Uint8Array>, out: string | Uint8Array) => {
    const bytes = typeof out === "string" ? enc.encode(out) : out;
    hooks.tee?.(bytes);
    controller.enqueue(bytes);
  };
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        let out: string | Uint8Array;
        let last: "done" | "error" | undefined;
        try {
          const r = await reader.read();
          if (r.done) {
            out = t.end();
            last = "done";
          } else out = t.push(r.value);
        } catch (e) {
          out = t.fail((hooks.failure ?? streamFailed)(e instanceof Error ? e.message : String(e)));
          last = "error";
        }
        if (out.length && !last && first) {
          first = false;
          hooks.onFirst?.();
        }
        if (out.length) send(controller, out);
        if (last || t.done) {
          controller.close();
          if (!last) reader.cancel().catch(() => {});
          end(last ?? "done");
          return;
        }
        if (out.length) return;
      }
    },
    cancel(reason) {
      reader.cancel(reason).catch(() => {});
      end("cancelled");
    },
  });
}
