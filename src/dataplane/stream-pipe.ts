/**
 * The one loop that runs a runtime's SSE body through a stream translator (chat completions into
 * Messages events, or into Responses events), reading upstream only as the client reads.
 */

/**
 * Turns one SSE stream into another: feed it bytes, then `end` or `fail`; `done` once it said its
 * last word. (The Messages stream translator, `ChatStreamToMessages`, has this shape too.)
 */
export interface StreamTranslator {
  push(chunk: Uint8Array): string;
  end(): string;
  fail(message: string): string;
  readonly done: boolean;
}

/**
 * Runs a runtime's SSE body through a translator. Reads upstream only as the client reads
 * (backpressure); cancels upstream when the client goes away or the translator is done.
 * @example pipeTranslator(upstream.body, new ChatStreamToMessages(model))
 */
export function pipeTranslator(upstream: ReadableStream<Uint8Array>, t: StreamTranslator): ReadableStream<Uint8Array> {
  const reader = upstream.getReader();
  const encoder = new TextEncoder();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      for (;;) {
        let out: string;
        try {
          const r = await reader.read();
          out = r.done ? t.end() : t.push(r.value);
        } catch (e) {
          out = t.fail(`the model runtime's stream failed: ${e instanceof Error ? e.message : String(e)}`);
        }
        if (out) controller.enqueue(encoder.encode(out));
        if (t.done) {
          controller.close();
          reader.cancel().catch(() => {});
          return;
        }
        if (out) return;
      }
    },
    cancel(reason) {
      return reader.cancel(reason);
    },
  });
}
