/**
 * Streaming half of the Responses API: a runtime's chat-completions SSE translated into Responses
 * events (`event:` + `data:` lines, each with its `sequence_number`), and a runtime's own Responses
 * stream relayed with the workload's model name. Each event goes out as soon as the input that
 * decides it arrives; both count the tokens they see.
 */
import {
  endOf,
  isObj,
  newId,
  openAiErrorOf,
  outputText,
  responsesName,
  responseUsageOf,
  type JsonObject,
  type OutputItem,
  type ResponseObject,
  type ToolNames,
} from "./responses-translate";
import type { Usage } from "./meter";
import { SseDecoder, type SseEvent } from "./sse";
import type { StreamTranslator } from "./stream-pipe";

/** Chat usage → the meter's counts. */
const countsOf = (u: unknown): Usage => {
  const r = responseUsageOf(u);
  return { inputTokens: r.input_tokens, outputTokens: r.output_tokens };
};

type MessageItem = Extract<OutputItem, { type: "message" }>;
type CallItem = Extract<OutputItem, { type: "function_call" }>;

/** A function call being streamed: its output item once its name is known; arguments wait in `pending` until then. */
type ToolState = { item?: CallItem; index: number; callId: string; name: string; pending: string };

/**
 * Translates one streamed chat completion into Responses events: `response.created`,
 * `response.in_progress`, then per output item `response.output_item.added`, its content
 * (`content_part.added`, `output_text.delta`/`.done`, `content_part.done`, or
 * `function_call_arguments.delta`/`.done`) and `response.output_item.done`, and last
 * `response.completed` (or `response.incomplete` when cut short) with the usage.
 * @example const t = new ChatStreamToResponses(responseShell(req, "m")); send(t.push(bytes)); send(t.end());
 */
export class ChatStreamToResponses implements StreamTranslator {
  #sse = new SseDecoder();
  #out = "";
  #seq = 0;
  #started = false;
  #done = false;
  #output: OutputItem[] = [];
  #message: { item: MessageItem; index: number; text: string } | null = null;
  #tools = new Map<number, ToolState>();
  #finish: unknown = null;
  #usage: unknown = null;

  /**
   * @param shell the response being built (its id, model and the request's settings).
   * @param names the chat names of namespaced tools, mapped back to name and namespace.
   */
  constructor(
    private readonly shell: ResponseObject,
    private readonly names?: ToolNames,
  ) {}

  /** True once the last event (`response.completed`/`.incomplete` or `error`) was produced; later input is ignored. */
  get done(): boolean {
    return this.#done;
  }

  /** The tokens the runtime reported. */
  get usage(): Usage {
    return countsOf(this.#usage);
  }

  /** Feeds upstream bytes (any split); returns the Responses SSE for every complete chunk in them. */
  push(chunk: Uint8Array): string {
    for (const ev of this.#sse.push(chunk)) this.#event(ev);
    return this.#take();
  }

  /** Upstream closed: finishes the response, or an error event when the runtime stopped before finishing. */
  end(): string {
    for (const ev of this.#sse.end()) this.#event(ev);
    if (!this.#done && this.#finish !== null) this.#complete();
    if (!this.#done) this.#error("the model runtime's stream ended before it was complete");
    return this.#take();
  }

  /** Upstream broke mid-stream: an error event (nothing when the response had already finished). */
  fail(message: string): string {
    if (!this.#done) this.#error(message);
    return this.#take();
  }

  #take(): string {
    const out = this.#out;
    this.#out = "";
    return out;
  }

  /** One chat SSE event: `[DONE]` finishes, anything else must be a JSON chunk. */
  #event(ev: SseEvent): void {
    if (this.#done || ev.empty) return;
    const data = ev.data.trim();
    if (!data) return;
    if (data === "[DONE]") return this.#complete();
    const chunk = ev.json();
    if (chunk === undefined) return this.#error(`the model runtime sent malformed stream data: ${data.slice(0, 200)}`);
    if (isObj(chunk)) this.#chunk(chunk);
  }

  /** One `chat.completion.chunk` (or an error object the runtime sent mid-stream). */
  #chunk(c: JsonObject): void {
    if (c.error !== undefined || c.object === "error") {
      const code = isObj(c.error) ? c.error.code : c.code;
      return this.#error(openAiErrorOf(typeof code === "number" ? code : 500, c).error.message);
    }
    this.#start();
    if (isObj(c.usage)) this.#usage = c.usage;
    const choices = Array.isArray(c.choices) ? c.choices : [];
    const choice = choices.find((x) => isObj(x) && (x.index ?? 0) === 0);
    if (!isObj(choice)) return;
    const delta = isObj(choice.delta) ? choice.delta : {};
    for (const text of [delta.content, delta.refusal]) if (typeof text === "string" && text) this.#text(text);
    if (Array.isArray(delta.tool_calls)) delta.tool_calls.filter(isObj).forEach((tc) => this.#toolFragment(tc));
    if (choice.finish_reason !== null && choice.finish_reason !== undefined) this.#finish = choice.finish_reason;
  }

  #start(): void {
    if (this.#started) return;
    this.#started = true;
    this.#emit("response.created", { response: this.#snapshot() });
    this.#emit("response.in_progress", { response: this.#snapshot() });
  }

  #snapshot(): ResponseObject {
    return { ...this.shell, output: [...this.#output] };
  }

  /** Text goes into the open message item, opening one (and its output_text part) first. */
  #text(delta: string): void {
    if (!this.#message) {
      const item: MessageItem = {
        id: newId("msg_"),
        type: "message",
        status: "in_progress",
        role: "assistant",
        content: [],
      };
      const index = this.#output.push(item) - 1;
      this.#emit("response.output_item.added", { output_index: index, item });
      this.#emit("response.content_part.added", {
        item_id: item.id,
        output_index: index,
        content_index: 0,
        part: outputText(""),
      });
      this.#message = { item, index, text: "" };
    }
    const m = this.#message;
    m.text += delta;
    this.#emit("response.output_text.delta", {
      item_id: m.item.id,
      output_index: m.index,
      content_index: 0,
      delta,
      logprobs: [],
    });
  }

  #closeMessage(): void {
    const m = this.#message;
    if (!m) return;
    this.#message = null;
    const part = outputText(m.text);
    this.#emit("response.output_text.done", {
      item_id: m.item.id,
      output_index: m.index,
      content_index: 0,
      text: m.text,
      logprobs: [],
    });
    this.#emit("response.content_part.done", { item_id: m.item.id, output_index: m.index, content_index: 0, part });
    Object.assign(m.item, { status: "completed", content: [part] });
    this.#emit("response.output_item.done", { output_index: m.index, item: m.item });
  }

  /** A `delta.tool_calls[]` fragment: adds the function_call item once its name is known, then streams its arguments. */
  #toolFragment(tc: JsonObject): void {
    const key = this.#toolKey(tc);
    let tool = this.#tools.get(key);
    if (!tool) this.#tools.set(key, (tool = { index: -1, callId: "", name: "", pending: "" }));
    const fn = isObj(tc.function) ? tc.function : {};
    if (typeof tc.id === "string" && tc.id && !tool.callId) tool.callId = tc.id;
    if (typeof fn.name === "string" && fn.name && !tool.item) tool.name = fn.name;
    if (typeof fn.arguments === "string") tool.pending += fn.arguments;
    if (!tool.item && tool.name) this.#startTool(tool);
    this.#flushArguments(tool);
  }

  /** The call's `index`; without one, a new call id means a new call and no id means the latest call. */
  #toolKey(tc: JsonObject): number {
    if (typeof tc.index === "number") return tc.index;
    const keys = [...this.#tools.keys()];
    const same = keys.find((k) => this.#tools.get(k)?.callId === tc.id);
    if (same !== undefined) return same;
    if (typeof tc.id === "string" && tc.id) return -1 - this.#tools.size;
    return keys.at(-1) ?? 0;
  }

  #startTool(tool: ToolState): void {
    this.#closeMessage();
    const item: CallItem = {
      id: newId("fc_"),
      type: "function_call",
      status: "in_progress",
      call_id: tool.callId || newId("call_"),
      ...responsesName(tool.name, this.names),
      arguments: "",
    };
    tool.item = item;
    tool.index = this.#output.push(item) - 1;
    this.#emit("response.output_item.added", { output_index: tool.index, item });
  }

  #flushArguments(tool: ToolState): void {
    if (!tool.item || !tool.pending) return;
    tool.item.arguments += tool.pending;
    this.#emit("response.function_call_arguments.delta", {
      item_id: tool.item.id,
      output_index: tool.index,
      delta: tool.pending,
    });
    tool.pending = "";
  }

  /** `[DONE]`: closes every open item in output order, then `response.completed` (or `.incomplete`) with the usage. */
  #complete(): void {
    this.#start();
    this.#closeMessage();
    for (const tool of this.#tools.values()) {
      if (tool.item) continue;
      this.#startTool(tool); // a call whose name never came is still shown rather than lost
      this.#flushArguments(tool);
    }
    const tools = [...this.#tools.values()].sort((a, b) => a.index - b.index);
    for (const { item, index } of tools) {
      if (!item) continue;
      this.#emit("response.function_call_arguments.done", {
        item_id: item.id,
        output_index: index,
        name: item.name,
        arguments: item.arguments,
      });
      item.status = "completed";
      this.#emit("response.output_item.done", { output_index: index, item });
    }
    const response: ResponseObject = {
      ...this.#snapshot(),
      ...endOf(this.#finish),
      usage: responseUsageOf(this.#usage),
    };
    this.#emit(response.status === "completed" ? "response.completed" : "response.incomplete", { response });
    this.#done = true;
  }

  #error(message: string): void {
    this.#emit("error", { code: "upstream_error", message, param: null });
    this.#done = true;
  }

  #emit(type: string, fields: JsonObject): void {
    this.#out += `event: ${type}\ndata: ${JSON.stringify({ type, ...fields, sequence_number: this.#seq++ })}\n\n`;
  }
}

/**
 * Relays a runtime's own Responses stream: events pass through as they are, except that the
 * `response` object of lifecycle events (created, in_progress, completed…) is named after the
 * workload's model name; the usage of the final one is counted.
 */
export class ResponsesRelay implements StreamTranslator {
  #sse = new SseDecoder();
  #done = false;
  #seq = -1;
  usage: Usage = { inputTokens: 0, outputTokens: 0 };

  /** @param model the model name to report (the workload's, as /v1/models lists it first). */
  constructor(private readonly model: string) {}

  /** True once upstream ended or broke. */
  get done(): boolean {
    return this.#done;
  }

  /** Feeds upstream bytes; returns the events they complete. */
  push(chunk: Uint8Array): string {
    return this.#sse
      .push(chunk)
      .map((ev) => this.#event(ev))
      .join("");
  }

  /** Upstream closed: the last events (a last one without its blank line gets one). */
  end(): string {
    this.#done = true;
    return this.#sse
      .end()
      .map((ev) => this.#event(ev))
      .join("");
  }

  /** Upstream broke mid-stream: an `error` event. */
  fail(message: string): string {
    this.#done = true;
    return `event: error\ndata: ${JSON.stringify({ type: "error", code: "upstream_error", message, param: null, sequence_number: this.#seq + 1 })}\n\n`;
  }

  /** One event: its sequence number noted; a `response` object renamed and its usage counted. */
  #event(ev: SseEvent): string {
    const raw = ev.complete ? ev.text : ev.text.trim() ? `${ev.text}\n\n` : "";
    const seq = /"sequence_number":\s*(\d+)/.exec(raw);
    if (seq) this.#seq = Math.max(this.#seq, Number(seq[1]));
    if (!raw.includes('"response"')) return raw;
    const data = ev.json();
    if (!isObj(data) || !isObj(data.response)) return raw;
    data.response.model = this.model;
    if (isObj(data.response.usage)) {
      const u = data.response.usage;
      this.usage = {
        inputTokens: typeof u.input_tokens === "number" ? u.input_tokens : 0,
        outputTokens: typeof u.output_tokens === "number" ? u.output_tokens : 0,
      };
    }
    const fields = raw.split(/\r\n|\r|\n/).filter((l) => l && !l.startsWith("data:"));
    return `${[...fields, `data: ${JSON.stringify(data)}`].join("\n")}\n\n`;
  }
}
