/**
 * Streaming half of the Messages ⇄ chat-completions translation: a runtime's `chat.completion.chunk`
 * SSE bytes in, Anthropic Messages SSE out, each event as soon as the input that decides it arrives.
 */
import { usageOf as meteredUsage, type Usage } from "./meter";
import { SseDecoder, type SseEvent } from "./sse";
import { pipeTranslator, type StreamTranslator } from "./stream-pipe";
import { chatErrorToAnthropic, type JsonObject, messageIdOf, stopReasonOf, usageOf } from "./anthropic";

const isObj = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);

/** A tool call being streamed: its block index once started; fragments wait in `pending` until its name is known. */
type ToolState = { block: number; id: string; name: string; pending: string };

/**
 * Translates one streamed chat completion into Anthropic SSE. Feed it upstream bytes with `push`,
 * then call `end` (upstream closed) or `fail` (upstream broke); each returns the SSE text to send.
 * @example const t = new ChatStreamToMessages("m"); send(t.push(bytes)); send(t.end());
 */
export class ChatStreamToMessages implements StreamTranslator {
  #sse = new SseDecoder();
  #out = "";
  #started = false;
  #done = false;
  #blocks = 0;
  #open: "text" | ToolState | null = null;
  #tools = new Map<number, ToolState>();
  #finish: unknown = null;
  #matched: unknown = null;
  #usage: unknown = null;

  /**
   * @param model the model name to report (the one the client asked for).
   * @param inputTokens the prompt's tokens, counted before the stream, for `message_start` (the
   *   runtime's usage arrives only with its last chunk).
   */
  constructor(
    private readonly model: string,
    private readonly inputTokens?: number,
  ) {}

  /** The tokens to meter: the runtime's own usage from its last chunk, else the prompt's count from before. */
  get usage(): Usage {
    return meteredUsage({ usage: this.#usage }) ?? { inputTokens: this.inputTokens ?? 0, outputTokens: 0 };
  }

  /** True once `message_stop` or an `error` event has been produced; later input is ignored. */
  get done(): boolean {
    return this.#done;
  }

  /** Feeds upstream bytes (any split); returns the Anthropic SSE for every complete event in them. */
  push(chunk: Uint8Array | string): string {
    for (const ev of this.#sse.push(chunk)) this.#event(ev);
    return this.#take();
  }

  /** Upstream closed: finishes the last event; an error event when the runtime never sent `[DONE]`. */
  end(): string {
    for (const ev of this.#sse.end()) this.#event(ev);
    if (!this.#done) this.#error("api_error", "the model runtime's stream ended before it was complete");
    return this.#take();
  }

  /** Upstream broke mid-stream: an Anthropic error event (nothing when the stream had already finished). */
  fail(message: string): string {
    if (!this.#done) this.#error("api_error", message);
    return this.#take();
  }

  #take(): string {
    const out = this.#out;
    this.#out = "";
    return out;
  }

  /** One SSE event: each comment is sent on as a ping; `[DONE]` finishes, any other data must be a JSON chunk. */
  #event(ev: SseEvent): void {
    if (this.#done) return;
    for (let i = 0; i < ev.comments; i++) this.#emit("ping", {});
    const data = ev.data;
    if (!data) return;
    if (data.trim() === "[DONE]") return this.#finishMessage();
    const chunk = ev.json();
    if (chunk === undefined)
      return this.#error("api_error", `the model runtime sent malformed stream data: ${data.slice(0, 200)}`);
    if (isObj(chunk)) this.#chunk(chunk);
  }

  /** One `chat.completion.chunk` (or an error object the runtime sent mid-stream). */
  #chunk(c: JsonObject): void {
    if (c.error !== undefined || c.object === "error") {
      const code = isObj(c.error) ? c.error.code : c.code;
      const status = typeof code === "number" && code >= 400 && code < 600 ? code : 500;
      const { error } = chatErrorToAnthropic(status, c).body;
      return this.#error(error.type, error.message);
    }
    this.#start(c);
    if (isObj(c.usage)) this.#usage = c.usage;
    const choices = Array.isArray(c.choices) ? c.choices : [];
    const choice = choices.find((x) => isObj(x) && (x.index ?? 0) === 0);
    if (!isObj(choice)) return;
    const delta = isObj(choice.delta) ? choice.delta : {};
    if (typeof delta.content === "string" && delta.content) this.#text(delta.content);
    if (Array.isArray(delta.tool_calls)) delta.tool_calls.filter(isObj).forEach((tc) => this.#toolFragment(tc));
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) {
      this.#finish = choice.finish_reason;
      this.#matched = choice.stop_reason ?? null;
      this.#startUnnamedTools();
      this.#closeBlock();
    }
  }

  /** `message_start`, once, with the input tokens this first chunk carries (vLLM's continuous usage), else those counted before. */
  #start(c: JsonObject): void {
    if (this.#started) return;
    this.#started = true;
    const usage = {
      input_tokens: isObj(c.usage) ? usageOf(c.usage).input_tokens : (this.inputTokens ?? 0),
      output_tokens: 0,
    };
    const message = {
      id: messageIdOf(c.id),
      type: "message",
      role: "assistant",
      model: this.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage,
    };
    this.#emit("message_start", { message });
  }

  #text(text: string): void {
    if (this.#open !== "text") {
      this.#closeBlock();
      this.#open = "text";
      this.#emit("content_block_start", { index: this.#blocks, content_block: { type: "text", text: "" } });
    }
    this.#emit("content_block_delta", { index: this.#blocks, delta: { type: "text_delta", text } });
  }

  /** A `delta.tool_calls[]` fragment: starts the tool_use block once its name is known, then streams its arguments. */
  #toolFragment(tc: JsonObject): void {
    const key = this.#toolKey(tc);
    let tool = this.#tools.get(key);
    if (!tool) this.#tools.set(key, (tool = { block: -1, id: "", name: "", pending: "" }));
    const fn = isObj(tc.function) ? tc.function : {};
    if (typeof tc.id === "string" && tc.id && !tool.id) tool.id = tc.id;
    if (typeof fn.name === "string" && fn.name && tool.block < 0) tool.name = fn.name;
    if (typeof fn.arguments === "string") tool.pending += fn.arguments;
    if (tool.block < 0 && tool.name) this.#startTool(tool);
    if (tool.block >= 0 && tool.pending) {
      this.#emit("content_block_delta", {
        index: tool.block,
        delta: { type: "input_json_delta", partial_json: tool.pending },
      });
      tool.pending = "";
    }
  }

  /** The call's `index`; without one, a new call id means a new call and no id means the latest call. */
  #toolKey(tc: JsonObject): number {
    if (typeof tc.index === "number") return tc.index;
    const keys = [...this.#tools.keys()];
    const same = keys.find((k) => this.#tools.get(k)?.id === tc.id);
    if (same !== undefined) return same;
    if (typeof tc.id === "string" && tc.id) return -1 - this.#tools.size;
    return keys.at(-1) ?? 0;
  }

  #startTool(tool: ToolState): void {
    this.#closeBlock();
    tool.block = this.#blocks;
    tool.id ||= `toolu_${this.#blocks}`;
    this.#open = tool;
    this.#emit("content_block_start", {
      index: tool.block,
      content_block: { type: "tool_use", id: tool.id, name: tool.name, input: {} },
    });
  }

  /** Tool calls whose name never came are still shown (with an empty name) rather than lost. */
  #startUnnamedTools(): void {
    for (const tool of this.#tools.values()) {
      if (tool.block >= 0) continue;
      this.#startTool(tool);
      if (tool.pending)
        this.#emit("content_block_delta", {
          index: tool.block,
          delta: { type: "input_json_delta", partial_json: tool.pending },
        });
      tool.pending = "";
    }
  }

  #closeBlock(): void {
    if (this.#open === null) return;
    this.#emit("content_block_stop", { index: this.#blocks });
    this.#blocks += 1;
    this.#open = null;
  }

  /** `[DONE]`: closes the last block, then `message_delta` (stop reason, usage) and `message_stop`. */
  #finishMessage(): void {
    if (!this.#started) this.#start({});
    this.#startUnnamedTools();
    this.#closeBlock();
    const stop = stopReasonOf(this.#finish, this.#matched, this.#tools.size > 0);
    const u = usageOf(this.#usage);
    const usage: JsonObject = { output_tokens: u.output_tokens };
    if (isObj(this.#usage)) Object.assign(usage, u);
    this.#emit("message_delta", { delta: stop, usage });
    this.#emit("message_stop", {});
    this.#done = true;
  }

  #error(type: string, message: string): void {
    this.#emit("error", { error: { type, message } });
    this.#done = true;
  }

  #emit(type: string, fields: JsonObject): void {
    this.#out += `event: ${type}\ndata: ${JSON.stringify({ type, ...fields })}\n\n`;
  }
}

/**
 * Translates a runtime's chat-completions SSE body into an Anthropic Messages SSE body;
 * `inputTokens` (counted before) goes in `message_start`. Reads upstream
 * only as the client reads (backpressure), cancels upstream when the client goes away or after `[DONE]`.
 */
export function translateChatStream(
  upstream: ReadableStream<Uint8Array>,
  model: string,
  inputTokens?: number,
): ReadableStream<Uint8Array> {
  return pipeTranslator(upstream, new ChatStreamToMessages(model, inputTokens));
}
