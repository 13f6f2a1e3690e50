/**
 * Anthropic Messages ⇄ OpenAI chat completions, for runtimes that serve only `/v1/chat/completions`.
 * Pure functions over parsed JSON: no I/O. The streaming half lives in `anthropic-stream.ts`.
 */
import { systemFirst } from "./system-first";

/** A parsed JSON object whose fields are checked before use. */
export type JsonObject = Record<string, unknown>;

/** A translated Messages request: the chat-completions body to send, or why the request is invalid. */
export type ChatRequestResult = { body: JsonObject } | { error: string };

/** A content block of a translated response; `raw_arguments` keeps tool arguments that were not a JSON object. */
export type MessageBlock =
  | { type: "text"; text: string }
  | { type: "tool_use"; id: string; name: string; input: JsonObject; raw_arguments?: string };

/** Anthropic token usage; `cache_read_input_tokens` only when the runtime reported cached prompt tokens. */
export type MessageUsage = { input_tokens: number; output_tokens: number; cache_read_input_tokens?: number };

/** Why generation stopped, in Anthropic terms. */
export type StopReason = "end_turn" | "max_tokens" | "stop_sequence" | "tool_use" | "refusal";

/** An Anthropic `message` object, as `POST /v1/messages` returns it. */
export interface AnthropicMessage {
  id: string;
  type: "message";
  role: "assistant";
  model: string;
  content: MessageBlock[];
  stop_reason: StopReason;
  stop_sequence: string | null;
  usage: MessageUsage;
}

/** The Anthropic error body: `{type:"error", error:{type, message}}`. */
export interface AnthropicErrorBody {
  type: "error";
  error: { type: string; message: string };
}

/** Thrown inside request translation; `messagesToChat` turns it into `{error}`. */
class Invalid extends Error {}

const fail = (message: string): never => {
  throw new Invalid(message);
};
const isObj = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v: unknown, path: string): string => (typeof v === "string" ? v : fail(`${path}: must be a string`));
const blockAt = (b: unknown, path: string): JsonObject =>
  isObj(b) ? b : fail(`${path}: must be a content block object`);
const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);

/**
 * Translates an Anthropic Messages request into an OpenAI chat-completions body for `servedModel`.
 * @example messagesToChat({max_tokens: 5, messages: [{role: "user", content: "hi"}]}, "m")
 * // → {body: {model: "m", messages: [{role: "user", content: "hi"}], max_tokens: 5}}
 */
export function messagesToChat(req: unknown, servedModel: string): ChatRequestResult {
  try {
    if (!isObj(req)) fail("request body must be a JSON object");
    const r = req as JsonObject;
    if (!Number.isInteger(r.max_tokens) || (r.max_tokens as number) < 1)
      fail("max_tokens: required, must be a positive integer");
    if (!Array.isArray(r.messages)) fail("messages: required, must be an array of {role, content}");
    const messages: JsonObject[] = [];
    if (r.system !== undefined && r.system !== null)
      messages.push({ role: "system", content: plainText(r.system, "system") });
    (r.messages as unknown[]).forEach((m, i) => messages.push(...convertMessage(m, `messages.${i}`)));
    const body: JsonObject = { model: servedModel, messages: systemFirst(messages), max_tokens: r.max_tokens };
    copySampling(r, body);
    const tools = r.tools === undefined || r.tools === null ? [] : convertTools(r.tools);
    if (tools.length) body.tools = tools; // runtimes reject an empty list, and tool_choice without tools
    if (tools.length && r.tool_choice !== undefined && r.tool_choice !== null) convertToolChoice(r.tool_choice, body);
    return { body };
  } catch (e) {
    if (e instanceof Invalid) return { error: e.message };
    throw e;
  }
}

/** A system prompt: a string, or text blocks joined by newlines. */
function plainText(v: unknown, path: string): string {
  if (typeof v === "string") return v;
  if (!Array.isArray(v)) return fail(`${path}: must be a string or an array of text blocks`);
  return v
    .map((b, i) => {
      const block = blockAt(b, `${path}.${i}`);
      if (block.type !== "text") fail(`${path}.${i}.type: must be "text"`);
      return str(block.text, `${path}.${i}.text`);
    })
    .join("\n");
}

/** One Anthropic message → the chat messages it becomes (a user turn with tool results becomes several). */
function convertMessage(m: unknown, path: string): JsonObject[] {
  if (!isObj(m)) return fail(`${path}: must be an object with role and content`);
  const content = m.content;
  if (typeof content !== "string" && !Array.isArray(content))
    return fail(`${path}.content: must be a string or an array of content blocks`);
  switch (m.role) {
    case "user":
      return userMessages(content, `${path}.content`);
    case "assistant":
      return [assistantMessage(content, `${path}.content`)];
    case "system":
      return [{ role: "system", content: plainText(content, `${path}.content`) }];
    default:
      return fail(`${path}.role: unknown role ${JSON.stringify(m.role)}; expected "user" or "assistant"`);
  }
}

/** A user turn: tool_result blocks become `role: "tool"` messages first (they must follow the tool calls), then the rest. */
function userMessages(content: string | unknown[], path: string): JsonObject[] {
  if (typeof content === "string") return [{ role: "user", content }];
  const tools: JsonObject[] = [];
  const parts: JsonObject[] = [];
  content.forEach((b, j) => {
    const block = blockAt(b, `${path}.${j}`);
    if (block.type === "tool_result") tools.push(toolMessage(block, `${path}.${j}`, parts));
    else parts.push(userPart(block, `${path}.${j}`));
  });
  if (!parts.length) return tools.length ? tools : [{ role: "user", content: "" }];
  const textOnly = parts.every((p) => p.type === "text");
  return [...tools, { role: "user", content: textOnly ? parts.map((p) => p.text).join("\n") : parts }];
}

/** A text, image or plain-text document block → an OpenAI content part. */
function userPart(b: JsonObject, path: string): JsonObject {
  switch (b.type) {
    case "text":
      return { type: "text", text: str(b.text, `${path}.text`) };
    case "image":
      return imagePart(b, path);
    case "document": {
      const src = isObj(b.source) ? b.source : {};
      if (src.type === "text") return { type: "text", text: str(src.data, `${path}.source.data`) };
      return fail(`${path}: only plain-text documents (source.type "text") are supported by this model runtime`);
    }
    default:
      return fail(
        `${path}.type: content block ${JSON.stringify(b.type)} is not supported in user messages by this model runtime`,
      );
  }
}

/** An image block (base64 or url source) → an `image_url` part. */
function imagePart(b: JsonObject, path: string): JsonObject {
  const src = isObj(b.source) ? b.source : fail(`${path}.source: required for an image block`);
  if (src.type === "base64") {
    const url = `data:${str(src.media_type, `${path}.source.media_type`)};base64,${str(src.data, `${path}.source.data`)}`;
    return { type: "image_url", image_url: { url } };
  }
  if (src.type === "url") return { type: "image_url", image_url: { url: str(src.url, `${path}.source.url`) } };
  return fail(`${path}.source.type: image source ${JSON.stringify(src.type)} is not supported; use "base64" or "url"`);
}

/** A tool_result block → a `role: "tool"` message; images in it go to `images` (tool messages carry text only). */
function toolMessage(b: JsonObject, path: string, images: JsonObject[]): JsonObject {
  const id = str(b.tool_use_id, `${path}.tool_use_id`);
  const c = b.content;
  let text: string;
  if (c === undefined || c === null) text = "";
  else if (typeof c === "string") text = c;
  else if (Array.isArray(c)) {
    const texts: string[] = [];
    c.forEach((x, k) => {
      if (isObj(x) && x.type === "text") texts.push(str(x.text, `${path}.content.${k}.text`));
      else if (isObj(x) && x.type === "image") images.push(imagePart(x, `${path}.content.${k}`));
      else texts.push(JSON.stringify(x));
    });
    text = texts.join("\n");
  } else text = JSON.stringify(c);
  return { role: "tool", tool_call_id: id, content: text };
}

/** An assistant turn: text blocks joined, tool_use blocks → `tool_calls`, thinking blocks dropped. */
function assistantMessage(content: string | unknown[], path: string): JsonObject {
  if (typeof content === "string") return { role: "assistant", content };
  const texts: string[] = [];
  const calls: JsonObject[] = [];
  content.forEach((b, j) => {
    const block = blockAt(b, `${path}.${j}`);
    const p = `${path}.${j}`;
    if (block.type === "text") texts.push(str(block.text, `${p}.text`));
    else if (block.type === "tool_use") {
      const fn = { name: str(block.name, `${p}.name`), arguments: JSON.stringify(block.input ?? {}) };
      calls.push({ id: str(block.id, `${p}.id`), type: "function", function: fn });
    } else if (block.type !== "thinking" && block.type !== "redacted_thinking") {
      fail(
        `${p}.type: content block ${JSON.stringify(block.type)} is not supported in assistant messages by this model runtime`,
      );
    }
  });
  const msg: JsonObject = { role: "assistant", content: texts.join("\n") };
  if (calls.length) msg.tool_calls = calls;
  return msg;
}

/** temperature, top_p, top_k, stop_sequences → stop, stream (+ usage in the stream), metadata.user_id → user. */
function copySampling(r: JsonObject, body: JsonObject): void {
  for (const key of ["temperature", "top_p", "top_k"]) {
    if (r[key] === undefined || r[key] === null) continue;
    body[key] = num(r[key]) ?? fail(`${key}: must be a number`);
  }
  if (r.stop_sequences !== undefined && r.stop_sequences !== null) {
    const stops = Array.isArray(r.stop_sequences)
      ? r.stop_sequences
      : fail("stop_sequences: must be an array of strings");
    if (stops.length) body.stop = stops.map((s, i) => str(s, `stop_sequences.${i}`));
  }
  if (r.stream === true) {
    body.stream = true;
    body.stream_options = { include_usage: true };
  }
  if (isObj(r.metadata) && typeof r.metadata.user_id === "string") body.user = r.metadata.user_id;
}

/** Custom tools → OpenAI function tools; server tools (web search, bash…) cannot run on a model runtime. */
function convertTools(v: unknown): JsonObject[] {
  const tools = Array.isArray(v) ? v : fail("tools: must be an array");
  return tools.map((t, i) => {
    const p = `tools.${i}`;
    if (!isObj(t)) return fail(`${p}: must be an object with name and input_schema`);
    if (t.type !== undefined && t.type !== null && t.type !== "custom") {
      fail(
        `${p}.type: tool type ${JSON.stringify(t.type)} is not supported by this model runtime; only custom tools (name, description, input_schema)`,
      );
    }
    const fn: JsonObject = { name: str(t.name, `${p}.name`) };
    if (typeof t.description === "string") fn.description = t.description;
    fn.parameters = isObj(t.input_schema)
      ? t.input_schema
      : fail(`${p}.input_schema: required, must be a JSON-schema object`);
    if (t.strict === true) fn.strict = true;
    return { type: "function", function: fn };
  });
}

/** auto → "auto", any → "required", tool → the named function, none → "none"; no parallel calls → `parallel_tool_calls: false`. */
function convertToolChoice(v: unknown, body: JsonObject): void {
  const c = isObj(v) ? v : fail("tool_choice: must be an object with a type");
  if (c.type === "auto" || c.type === "none") body.tool_choice = c.type;
  else if (c.type === "any") body.tool_choice = "required";
  else if (c.type === "tool")
    body.tool_choice = { type: "function", function: { name: str(c.name, "tool_choice.name") } };
  else fail(`tool_choice.type: unknown type ${JSON.stringify(c.type)}; expected "auto", "any", "tool" or "none"`);
  if (c.disable_parallel_tool_use === true) body.parallel_tool_calls = false;
}

/**
 * The Anthropic stop reason for an OpenAI `finish_reason`. `matched` is vLLM's/SGLang's `stop_reason`
 * (the stop string that ended generation): a string there means a stop sequence.
 */
export function stopReasonOf(
  finish: unknown,
  matched: unknown,
  calledTools: boolean,
): { stop_reason: StopReason; stop_sequence: string | null } {
  const plain = (stop_reason: StopReason) => ({ stop_reason, stop_sequence: null });
  if (finish === "length") return plain("max_tokens");
  if (finish === "content_filter") return plain("refusal");
  if (calledTools || finish === "tool_calls" || finish === "function_call") return plain("tool_use");
  if (typeof matched === "string") return { stop_reason: "stop_sequence", stop_sequence: matched };
  return plain("end_turn");
}

/** OpenAI usage → Anthropic usage; cached prompt tokens are reported apart, as Anthropic does. */
export function usageOf(u: unknown): MessageUsage {
  const usage = isObj(u) ? u : {};
  const prompt = num(usage.prompt_tokens) ?? 0;
  const output_tokens = num(usage.completion_tokens) ?? 0;
  const details = isObj(usage.prompt_tokens_details) ? usage.prompt_tokens_details : {};
  const cached = Math.min(num(details.cached_tokens) ?? 0, prompt);
  if (cached > 0) return { input_tokens: prompt - cached, output_tokens, cache_read_input_tokens: cached };
  return { input_tokens: prompt, output_tokens };
}

/** A `msg_…` id derived from the runtime's completion id (random when it has none). */
export function messageIdOf(chatId: unknown): string {
  const tail = typeof chatId === "string" ? chatId.replace(/^chatcmpl-/, "").replace(/[^A-Za-z0-9_-]/g, "") : "";
  return `msg_${tail || crypto.randomUUID().replaceAll("-", "")}`;
}

/** A tool's arguments as Anthropic `input`: the parsed object, else `{}` with the raw text kept. */
export function toolInputOf(args: unknown): { input: JsonObject; raw_arguments?: string } {
  if (isObj(args)) return { input: args };
  if (typeof args !== "string" || args.trim() === "") return { input: {} };
  try {
    const parsed: unknown = JSON.parse(args);
    if (isObj(parsed)) return { input: parsed };
  } catch {
    // not JSON: keep the raw text below
  }
  return { input: {}, raw_arguments: args };
}

/**
 * Translates an OpenAI `chat.completion` into an Anthropic `message` named after `requestedModel`.
 * @example chatToMessage({id: "chatcmpl-1", choices: [{message: {content: "hi"}, finish_reason: "stop"}]}, "m").content
 * // → [{type: "text", text: "hi"}]
 */
export function chatToMessage(chat: unknown, requestedModel: string): AnthropicMessage {
  const c = isObj(chat) ? chat : {};
  const choice = Array.isArray(c.choices) && isObj(c.choices[0]) ? c.choices[0] : {};
  const msg = isObj(choice.message) ? choice.message : {};
  const content: MessageBlock[] = [];
  const text =
    typeof msg.content === "string" && msg.content ? msg.content : typeof msg.refusal === "string" ? msg.refusal : "";
  if (text) content.push({ type: "text", text });
  const calls = Array.isArray(msg.tool_calls) ? msg.tool_calls.filter(isObj) : [];
  calls.forEach((tc, i) => {
    const fn = isObj(tc.function) ? tc.function : {};
    const id = typeof tc.id === "string" && tc.id ? tc.id : `toolu_${i}`;
    content.push({
      type: "tool_use",
      id,
      name: typeof fn.name === "string" ? fn.name : "",
      ...toolInputOf(fn.arguments),
    });
  });
  const stop = stopReasonOf(choice.finish_reason, choice.stop_reason, calls.length > 0);
  return {
    id: messageIdOf(c.id),
    type: "message",
    role: "assistant",
    model: requestedModel,
    content,
    ...stop,
    usage: usageOf(c.usage),
  };
}

/** The Anthropic error type for an HTTP status. */
export function errorTypeOf(status: number): string {
  const known: Record<number, string> = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    503: "overloaded_error",
    529: "overloaded_error",
  };
  return known[status] ?? (status >= 400 && status < 500 ? "invalid_request_error" : "api_error");
}

/** The runtime's own error message from an OpenAI-, vLLM-, llama-server-, Ollama- or FastAPI-style body. */
function runtimeMessage(body: unknown, status: number): string {
  let b = body;
  if (typeof body === "string") {
    try {
      b = JSON.parse(body);
    } catch {
      return body.trim() ? body : `the model runtime answered HTTP ${status}`;
    }
  }
  if (isObj(b)) {
    if (isObj(b.error) && typeof b.error.message === "string") return b.error.message;
    if (typeof b.error === "string") return b.error;
    if (typeof b.message === "string") return b.message;
    if (typeof b.detail === "string") return b.detail;
    if (b.detail !== undefined) return JSON.stringify(b.detail);
  }
  return `the model runtime answered HTTP ${status}`;
}

/**
 * A runtime's error response → the Anthropic error shape, status kept and message passed through unchanged.
 * @example chatErrorToAnthropic(400, {object: "error", message: "bad"}) // → {status: 400, body: {type: "error", error: {type: "invalid_request_error", message: "bad"}}}
 */
export function chatErrorToAnthropic(status: number, body: unknown): { status: number; body: AnthropicErrorBody } {
  return {
    status,
    body: { type: "error", error: { type: errorTypeOf(status), message: runtimeMessage(body, status) } },
  };
}
