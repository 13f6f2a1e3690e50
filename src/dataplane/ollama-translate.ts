/**
 * The Ollama API ⇄ OpenAI-style routes, as pure functions: an Ollama `/api/chat`, `/api/generate`,
 * `/api/embed` or `/api/embeddings` request becomes the runtime's `/v1/chat/completions`,
 * `/v1/completions` or `/v1/embeddings` body, and the runtime's answer comes back in the JSON shape
 * Ollama itself sends (`model`, `created_at`, `message`/`response`, `done`, `done_reason`, durations in
 * nanoseconds, `prompt_eval_count`, `eval_count`). The streamed half is in ./ollama-stream.ts.
 */
import { badRequest } from "../errors";
import { chatErrorToAnthropic, toolInputOf, type JsonObject } from "./anthropic";
import type { Usage } from "./meter";

const isObj = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);
const bad = (message: string) => badRequest("invalid_request", message);

/** A call to the runtime's OpenAI-style API: the path and its JSON body. */
export interface RuntimeCall {
  path: "/v1/chat/completions" | "/v1/completions" | "/v1/embeddings";
  body: JsonObject;
}

/** True when an Ollama generation request streams: Ollama streams unless told `stream: false`. */
export const streams = (req: JsonObject): boolean => req.stream !== false;

/** `options` names with the same meaning in OpenAI-style bodies (vLLM, SGLang and llama-server take `top_k`, `min_p`). */
const NUMERIC_OPTIONS = ["temperature", "top_p", "top_k", "min_p", "seed", "frequency_penalty", "presence_penalty"];

/**
 * Ollama `options` as OpenAI sampling fields: temperature, top_p, top_k, min_p, seed, penalties,
 * `num_predict` → `max_tokens` (Ollama's -1 "no limit" and -2 "fill the context" send none), `stop`.
 * Options about loading (num_ctx, num_gpu…) mean nothing to a running replica and are ignored.
 * @example samplingOf({temperature: 0.2, num_predict: 64, stop: "\n"}) // → {temperature: 0.2, max_tokens: 64, stop: ["\n"]}
 */
export function samplingOf(options: unknown): JsonObject {
  if (options === undefined || options === null) return {};
  if (!isObj(options)) throw bad("options: must be an object");
  const out: JsonObject = {};
  for (const name of NUMERIC_OPTIONS) {
    const v = options[name];
    if (v === undefined || v === null) continue;
    if (typeof v !== "number" || !Number.isFinite(v)) throw bad(`options.${name}: must be a number`);
    out[name] = v;
  }
  const predict = options.num_predict;
  if (predict !== undefined && predict !== null) {
    if (typeof predict !== "number" || !Number.isInteger(predict)) throw bad("options.num_predict: must be an integer");
    if (predict >= 0) out.max_tokens = predict;
  }
  const stop = options.stop;
  if (typeof stop === "string") out.stop = [stop];
  else if (Array.isArray(stop) && stop.every((s) => typeof s === "string")) out.stop = stop;
  else if (stop !== undefined && stop !== null) throw bad("options.stop: must be a string or an array of strings");
  return out;
}

/**
 * Ollama `format` as an OpenAI `response_format`: `"json"` → json_object, a JSON schema → json_schema.
 * @example responseFormatOf("json") // → {type: "json_object"}
 */
export function responseFormatOf(format: unknown): JsonObject | undefined {
  if (format === undefined || format === null || format === "") return undefined;
  if (format === "json") return { type: "json_object" };
  if (isObj(format)) return { type: "json_schema", json_schema: { name: "response", schema: format } };
  throw bad('format: must be "json" or a JSON schema object');
}

/** Base64 signatures of the image types Ollama clients send. */
const IMAGE_MAGIC: [string, string][] = [
  ["/9j/", "image/jpeg"],
  ["iVBORw0KGgo", "image/png"],
  ["R0lGOD", "image/gif"],
  ["UklGR", "image/webp"],
];

/**
 * An Ollama image (base64, no header) as a data URL for an OpenAI `image_url` part; the type is read
 * from the bytes' signature (JPEG when unknown). A data URL is kept as it is.
 * @example imageUrlOf("iVBORw0KGgoAAAA", "images[0]") // → "data:image/png;base64,iVBORw0KGgoAAAA"
 */
export function imageUrlOf(image: unknown, path: string): string {
  if (typeof image !== "string" || !image) throw bad(`${path}: must be a base64-encoded image`);
  if (image.startsWith("data:")) return image;
  const type = IMAGE_MAGIC.find(([magic]) => image.startsWith(magic))?.[1] ?? "image/jpeg";
  return `data:${type};base64,${image}`;
}

/** A user turn's content: the text alone, or text plus image parts. */
function userContent(text: string, images: unknown, path: string): string | JsonObject[] {
  if (images === undefined || images === null) return text;
  if (!Array.isArray(images)) throw bad(`${path}.images: must be an array of base64-encoded images`);
  if (!images.length) return text;
  const parts: JsonObject[] = images.map((img, i) => ({
    type: "image_url",
    image_url: { url: imageUrlOf(img, `${path}.images[${i}]`) },
  }));
  return text ? [{ type: "text", text }, ...parts] : parts;
}

/** A tool call of an assistant turn, waiting for its result. */
type OpenCall = { id: string; name: string };

/**
 * Ollama chat messages as OpenAI ones. Assistant `tool_calls` (`{function:{name, arguments: object}}`)
 * get ids (`call_<n>` when they have none) and JSON-string arguments; a `tool` message answers the
 * call it names (`tool_call_id`, else the first open call of its `tool_name`, else the first open
 * one). Images go with user turns only (OpenAI takes image parts nowhere else); `thinking` is dropped.
 */
export function chatMessagesOf(messages: unknown): JsonObject[] {
  if (!Array.isArray(messages)) throw bad("messages: must be an array");
  const out: JsonObject[] = [];
  let open: OpenCall[] = [];
  let made = 0;
  messages.forEach((m, i) => {
    const path = `messages[${i}]`;
    if (!isObj(m)) throw bad(`${path}: must be an object`);
    if (typeof m.role !== "string" || !m.role) throw bad(`${path}.role: must be a string`);
    if (m.content !== undefined && m.content !== null && typeof m.content !== "string")
      throw bad(`${path}.content: must be a string`);
    const content = (m.content as string | undefined) ?? "";
    if (m.role === "tool") {
      const given = typeof m.tool_call_id === "string" && m.tool_call_id ? m.tool_call_id : undefined;
      const name = typeof m.tool_name === "string" ? m.tool_name : typeof m.name === "string" ? m.name : undefined;
      const call = given ? open.find((c) => c.id === given) : (open.find((c) => c.name === name) ?? open[0]);
      open = open.filter((c) => c !== call);
      out.push({ role: "tool", content, tool_call_id: given ?? call?.id ?? `call_${made++}` });
      return;
    }
    if (m.role === "assistant") {
      const calls = toolCallsIn(m.tool_calls, path, () => `call_${made++}`);
      open = calls.map((c) => ({ id: c.id as string, name: (c.function as JsonObject).name as string }));
      out.push(calls.length ? { role: "assistant", content, tool_calls: calls } : { role: "assistant", content });
      return;
    }
    out.push({ role: m.role, content: m.role === "user" ? userContent(content, m.images, path) : content });
  });
  return out;
}

/** An assistant turn's Ollama tool calls as OpenAI ones. */
function toolCallsIn(calls: unknown, path: string, newId: () => string): JsonObject[] {
  if (calls === undefined || calls === null) return [];
  if (!Array.isArray(calls)) throw bad(`${path}.tool_calls: must be an array`);
  return calls.map((c, i) => {
    const fn = isObj(c) && isObj(c.function) ? c.function : undefined;
    if (!fn || typeof fn.name !== "string")
      throw bad(`${path}.tool_calls[${i}]: must be {function: {name, arguments}}`);
    const args = fn.arguments === undefined || fn.arguments === null ? {} : fn.arguments;
    const id =
      typeof (c as JsonObject).id === "string" && (c as JsonObject).id ? ((c as JsonObject).id as string) : newId();
    return {
      id,
      type: "function",
      function: { name: fn.name, arguments: typeof args === "string" ? args : JSON.stringify(args) },
    };
  });
}

/** Ollama `tools` (already OpenAI's `{type: "function", function: {name, description, parameters}}`). */
function toolsOf(tools: unknown): JsonObject[] {
  if (tools === undefined || tools === null) return [];
  if (!Array.isArray(tools)) throw bad("tools: must be an array");
  return tools.map((t, i) => {
    if (!isObj(t) || !isObj(t.function) || typeof t.function.name !== "string")
      throw bad(`tools[${i}]: must be {type: "function", function: {name, description, parameters}}`);
    return { type: "function", function: t.function };
  });
}

/** The fields every generation body shares: model, sampling, format, and usage on a stream. */
function generationBase(req: JsonObject, servedModel: string, format = true): JsonObject {
  const body: JsonObject = { model: servedModel, ...samplingOf(req.options) };
  const rf = format ? responseFormatOf(req.format) : undefined;
  if (rf) body.response_format = rf;
  if (streams(req)) Object.assign(body, { stream: true, stream_options: { include_usage: true } });
  return body;
}

/**
 * An Ollama `/api/chat` request as a chat-completions body for `servedModel` (streamed with usage
 * unless `stream: false`); `think` and `keep_alive` are ignored.
 */
export function chatRequestOf(req: JsonObject, servedModel: string): RuntimeCall {
  const body: JsonObject = { ...generationBase(req, servedModel), messages: chatMessagesOf(req.messages ?? []) };
  const tools = toolsOf(req.tools);
  if (tools.length) body.tools = tools;
  return { path: "/v1/chat/completions", body };
}

/**
 * An Ollama `/api/generate` request: `raw` prompts (and `suffix` fill-in-the-middle) go to
 * `/v1/completions` as they are; others become a chat turn (with `system` and `images`), so the
 * runtime applies the model's template as Ollama would. `context` and `template` are ignored.
 */
export function generateRequestOf(req: JsonObject, servedModel: string): RuntimeCall {
  if (req.prompt !== undefined && req.prompt !== null && typeof req.prompt !== "string")
    throw bad("prompt: must be a string");
  if (req.system !== undefined && req.system !== null && typeof req.system !== "string")
    throw bad("system: must be a string");
  const prompt = (req.prompt as string | undefined) ?? "";
  const suffix = typeof req.suffix === "string" && req.suffix ? req.suffix : undefined;
  if (req.raw === true || suffix) {
    const body = { ...generationBase(req, servedModel, false), prompt };
    return { path: "/v1/completions", body: suffix ? { ...body, suffix } : body };
  }
  const messages: JsonObject[] = [];
  if (req.system) messages.push({ role: "system", content: req.system });
  messages.push({ role: "user", content: userContent(prompt, req.images, "request") });
  return { path: "/v1/chat/completions", body: { ...generationBase(req, servedModel), messages } };
}

/** An Ollama `/api/embed` (`input`: a string or strings, `dimensions`) or legacy `/api/embeddings` (`prompt`) request. */
export function embedRequestOf(req: JsonObject, servedModel: string, legacy: boolean): RuntimeCall {
  const input = legacy ? req.prompt : req.input;
  const field = legacy ? "prompt" : "input";
  const ok =
    typeof input === "string" || (!legacy && Array.isArray(input) && input.every((s) => typeof s === "string"));
  if (!ok) throw bad(legacy ? "prompt: must be a string" : `${field}: must be a string or an array of strings`);
  const body: JsonObject = { model: servedModel, input };
  if (!legacy && req.dimensions !== undefined && req.dimensions !== null) {
    if (typeof req.dimensions !== "number" || !Number.isInteger(req.dimensions) || req.dimensions < 1)
      throw bad("dimensions: must be a positive integer");
    body.dimensions = req.dimensions;
  }
  return { path: "/v1/embeddings", body };
}

/** When an answer's parts happened, in `performance.now()` milliseconds: arrival, queue wait, first token, end. */
export interface Timing {
  arrived: number;
  waited: number;
  /** The first token of a stream (unknown for a whole answer). */
  first?: number;
  end: number;
}

const ns = (ms: number) => Math.max(0, Math.round(ms * 1e6));

/**
 * Ollama's metrics: `total_duration` since arrival, `load_duration` = the wait for a replica (it is
 * loaded already), prompt and generation time split at the first token (by token counts when it is
 * unknown), and the token counts. All durations in nanoseconds.
 */
export function metricsOf(usage: Usage, t: Timing): JsonObject {
  const start = t.arrived + t.waited;
  const working = Math.max(0, t.end - start);
  const tokens = usage.inputTokens + usage.outputTokens;
  const promptMs =
    t.first !== undefined ? Math.max(0, t.first - start) : tokens ? (working * usage.inputTokens) / tokens : 0;
  return {
    total_duration: ns(t.end - t.arrived),
    load_duration: ns(t.waited),
    prompt_eval_count: usage.inputTokens,
    prompt_eval_duration: ns(promptMs),
    eval_count: usage.outputTokens,
    eval_duration: ns(working - promptMs),
  };
}

/** Ollama's `done_reason` for an OpenAI `finish_reason` (a tool call is a "stop" in Ollama). */
export const doneReasonOf = (finish: unknown): string => (finish === "length" ? "length" : "stop");

/**
 * OpenAI tool calls as Ollama's (`{id, function: {index, name, arguments: object}}`); arguments that
 * are not a JSON object become `{}`.
 */
export function ollamaToolCalls(calls: unknown): JsonObject[] {
  if (!Array.isArray(calls)) return [];
  return calls.filter(isObj).map((c, i) => {
    const fn = isObj(c.function) ? c.function : {};
    const call: JsonObject = {
      function: {
        index: typeof c.index === "number" ? c.index : i,
        name: typeof fn.name === "string" ? fn.name : "",
        arguments: toolInputOf(fn.arguments).input,
      },
    };
    return typeof c.id === "string" && c.id ? { id: c.id, ...call } : call;
  });
}

/** The first choice of an OpenAI answer and its usage. */
function firstChoice(answer: unknown): { choice: JsonObject; msg: JsonObject; usage: Usage } {
  const a = isObj(answer) ? answer : {};
  const choice = Array.isArray(a.choices) && isObj(a.choices[0]) ? a.choices[0] : {};
  const u = isObj(a.usage) ? a.usage : {};
  const n = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  return {
    choice,
    msg: isObj(choice.message) ? choice.message : {},
    usage: { inputTokens: n(u.prompt_tokens), outputTokens: n(u.completion_tokens) },
  };
}

/** A model's reasoning text, under the names runtimes use for it. */
export const reasoningOf = (m: JsonObject): string | undefined =>
  typeof m.reasoning_content === "string" && m.reasoning_content
    ? m.reasoning_content
    : typeof m.reasoning === "string" && m.reasoning
      ? m.reasoning
      : undefined;

/**
 * A `chat.completion` as Ollama's `/api/chat` answer, named `model` (the name the client asked for).
 * @example chatAnswerOf({choices: [{message: {content: "hi"}, finish_reason: "stop"}]}, "m", t, now).message // → {role: "assistant", content: "hi"}
 */
export function chatAnswerOf(answer: unknown, model: string, t: Timing, now = new Date()): JsonObject {
  const { choice, msg, usage } = firstChoice(answer);
  const message: JsonObject = { role: "assistant", content: typeof msg.content === "string" ? msg.content : "" };
  const thinking = reasoningOf(msg);
  if (thinking) message.thinking = thinking;
  const calls = ollamaToolCalls(msg.tool_calls);
  if (calls.length) message.tool_calls = calls;
  return {
    model,
    created_at: now.toISOString(),
    message,
    done_reason: doneReasonOf(choice.finish_reason),
    done: true,
    ...metricsOf(usage, t),
  };
}

/** A `chat.completion` or `text_completion` as Ollama's `/api/generate` answer. */
export function generateAnswerOf(answer: unknown, model: string, t: Timing, now = new Date()): JsonObject {
  const { choice, msg, usage } = firstChoice(answer);
  const text = typeof choice.text === "string" ? choice.text : typeof msg.content === "string" ? msg.content : "";
  const out: JsonObject = { model, created_at: now.toISOString(), response: text };
  const thinking = reasoningOf(msg);
  if (thinking) out.thinking = thinking;
  return { ...out, done: true, done_reason: doneReasonOf(choice.finish_reason), ...metricsOf(usage, t) };
}

/** The vectors of an OpenAI embeddings answer, in input order. */
function vectorsOf(answer: unknown): unknown[] {
  const data = isObj(answer) && Array.isArray(answer.data) ? answer.data.filter(isObj) : [];
  return [...data].sort((a, b) => Number(a.index ?? 0) - Number(b.index ?? 0)).map((d) => d.embedding);
}

/** An OpenAI embeddings answer as Ollama's `/api/embed` answer (`{model, embeddings, …}`) or legacy `/api/embeddings` one (`{embedding}`). */
export function embedAnswerOf(answer: unknown, model: string, t: Timing, legacy: boolean): JsonObject {
  const vectors = vectorsOf(answer);
  if (legacy) return { embedding: vectors[0] ?? [] };
  const u = isObj(answer) && isObj(answer.usage) ? answer.usage : {};
  const prompt = typeof u.prompt_tokens === "number" ? u.prompt_tokens : 0;
  const m = metricsOf({ inputTokens: prompt, outputTokens: 0 }, t);
  return {
    model,
    embeddings: vectors,
    total_duration: m.total_duration,
    load_duration: m.load_duration,
    prompt_eval_count: prompt,
  };
}

/** The answer Ollama gives a generation request with nothing to generate: it loads the model and says so. */
export function loadAnswerOf(route: "chat" | "generate", model: string, now = new Date()): JsonObject {
  const head = { model, created_at: now.toISOString() };
  const body = route === "chat" ? { ...head, message: { role: "assistant", content: "" } } : { ...head, response: "" };
  return { ...body, done_reason: "load", done: true };
}

/** Token counts of an Ollama answer (`prompt_eval_count`, `eval_count`), or of an OpenAI one (`usage`). */
export function countsOf(answer: unknown): Usage {
  if (!isObj(answer)) return { inputTokens: 0, outputTokens: 0 };
  const n = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : 0);
  if (isObj(answer.usage))
    return { inputTokens: n(answer.usage.prompt_tokens), outputTokens: n(answer.usage.completion_tokens) };
  return { inputTokens: n(answer.prompt_eval_count), outputTokens: n(answer.eval_count) };
}

/** A runtime's error body (OpenAI, vLLM, llama-server, Ollama or FastAPI style) as Ollama's `{error: "<message>"}`. */
export function ollamaErrorOf(status: number, text: string): { error: string } {
  // The Messages translation already reads every runtime's error dialect; only its message is kept.
  return { error: chatErrorToAnthropic(status, text).body.error.message };
}
