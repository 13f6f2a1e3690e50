/**
 * The OpenAI-style wire format of the built-in llama.cpp runtime: request checks and response
 * bodies, shaped as llama-server shapes them (errors are `{error: {code, message, type}}`).
 */

/** An error with its HTTP status and llama-server's error type. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly type: string,
    message: string,
  ) {
    super(message);
  }
}

/** 400 invalid_request_error. */
export const badRequest = (message: string) => new HttpError(400, "invalid_request_error", message);
/** 501 not_supported_error. */
export const notSupported = (message: string) => new HttpError(501, "not_supported_error", message);

/** The JSON error body for a status, message and type. */
export function errorBody(status: number, message: string, type: string) {
  return { error: { code: status, message, type } };
}

/** One chat message after checks; roles follow OpenAI, content is plain text. */
export interface ChatMessage {
  role: "system" | "user" | "assistant";
  content: string;
}

/** Sampling and length settings shared by chat and text completions. */
export interface Sampling {
  maxTokens?: number;
  temperature?: number;
  topK?: number;
  topP?: number;
  minP?: number;
  seed?: number;
  stop: string[];
  stream: boolean;
  includeUsage: boolean;
}

/** A checked chat completion request. */
export interface ChatParams extends Sampling {
  messages: ChatMessage[];
}

/** A checked text completion request. */
export interface CompletionParams extends Sampling {
  prompt: string;
}

/** A checked embeddings request: each input is text or token ids. */
export interface EmbeddingParams {
  inputs: (string | number[])[];
  base64: boolean;
}

type Json = Record<string, unknown>;

function asObject(body: unknown): Json {
  if (typeof body !== "object" || body === null || Array.isArray(body))
    throw badRequest("the request body must be a JSON object");
  return body as Json;
}

function optNumber(b: Json, key: string, min: number, max = Infinity, integer = false): number | undefined {
  const v = b[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v) || v < min || v > max || (integer && !Number.isInteger(v))) {
    throw badRequest(
      `'${key}' must be ${integer ? "an integer" : "a number"} >= ${min}${max < Infinity ? ` and <= ${max}` : ""}`,
    );
  }
  return v;
}

function sampling(b: Json): Sampling {
  const stop = b.stop;
  let stops: string[] = [];
  if (typeof stop === "string") stops = [stop];
  else if (Array.isArray(stop) && stop.every((s) => typeof s === "string")) stops = stop as string[];
  else if (stop !== undefined && stop !== null) throw badRequest("'stop' must be a string or an array of strings");
  const n = optNumber(b, "n", 1, Infinity, true);
  if (n !== undefined && n > 1) throw badRequest("Only one completion choice is allowed");
  if (b.stream !== undefined && b.stream !== null && typeof b.stream !== "boolean")
    throw badRequest("'stream' must be a boolean");
  const streamOptions = b.stream_options as Json | undefined;
  return {
    maxTokens:
      optNumber(b, "max_completion_tokens", -1, Infinity, true) ??
      optNumber(b, "max_tokens", -1, Infinity, true) ??
      optNumber(b, "n_predict", -1, Infinity, true),
    temperature: optNumber(b, "temperature", 0, 100),
    topK: optNumber(b, "top_k", 0, Infinity, true),
    topP: optNumber(b, "top_p", 0, 1),
    minP: optNumber(b, "min_p", 0, 1),
    seed: optNumber(b, "seed", -1, Number.MAX_SAFE_INTEGER, true),
    stop: stops.filter((s) => s !== ""),
    stream: b.stream === true,
    includeUsage: typeof streamOptions === "object" && streamOptions !== null && streamOptions.include_usage === true,
  };
}

function messageText(content: unknown, index: number): string {
  if (typeof content === "string") return content;
  if (content === null || content === undefined) return "";
  if (Array.isArray(content)) {
    return content
      .map((part) => {
        const p = part as Json;
        if (p?.type === "text" && typeof p.text === "string") return p.text;
        throw badRequest(`messages[${index}]: only text content parts are supported by this model`);
      })
      .join("");
  }
  throw badRequest(`messages[${index}].content must be a string or an array of text parts`);
}

/** Checks a /v1/chat/completions body. */
export function parseChatRequest(body: unknown): ChatParams {
  const b = asObject(body);
  if (!Array.isArray(b.messages)) throw badRequest("'messages' is required and must be an array");
  if (b.messages.length === 0) throw badRequest("'messages' must not be empty");
  const messages = b.messages.map((m, i): ChatMessage => {
    const msg = m as Json;
    if (typeof msg !== "object" || msg === null || typeof msg.role !== "string")
      throw badRequest(`messages[${i}] must be an object with a 'role'`);
    const content = messageText(msg.content, i);
    switch (msg.role) {
      case "system":
      case "developer":
        return { role: "system", content };
      case "user":
      case "tool":
      case "function":
        return { role: "user", content };
      case "assistant":
        return { role: "assistant", content };
      default:
        throw badRequest(`messages[${i}].role '${msg.role}' is not one of system, developer, user, assistant, tool`);
    }
  });
  return { ...sampling(b), messages };
}

/** Checks a /v1/completions body; `prompt` is one string (or an array holding one). */
export function parseCompletionRequest(body: unknown): CompletionParams {
  const b = asObject(body);
  let prompt = b.prompt;
  if (Array.isArray(prompt) && prompt.length === 1 && typeof prompt[0] === "string") prompt = prompt[0];
  if (typeof prompt !== "string") throw badRequest("'prompt' is required and must be a string");
  return { ...sampling(b), prompt };
}

/** Checks a /v1/embeddings body: `input` is a string, token ids, or an array of either. */
export function parseEmbeddingRequest(body: unknown): EmbeddingParams {
  const b = asObject(body);
  const input = b.input ?? b.content;
  const isTokens = (v: unknown): v is number[] =>
    Array.isArray(v) && v.length > 0 && v.every((t) => Number.isInteger(t) && (t as number) >= 0);
  let inputs: (string | number[])[];
  if (typeof input === "string") inputs = [input];
  else if (isTokens(input)) inputs = [input];
  else if (Array.isArray(input) && input.length > 0 && input.every((v) => typeof v === "string" || isTokens(v)))
    inputs = input as (string | number[])[];
  else throw badRequest("'input' is required: a string, an array of strings, or token ids");
  if (inputs.some((v) => v === "")) throw badRequest("'input' must not contain empty strings");
  const format = b.encoding_format ?? "float";
  if (format !== "float" && format !== "base64") throw badRequest("'encoding_format' must be 'float' or 'base64'");
  return { inputs, base64: format === "base64" };
}

/** Token counts of one request. */
export interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** OpenAI's finish reason for a node-llama-cpp stop reason. */
export function finishReason(stopReason: string): "stop" | "length" {
  return stopReason === "maxTokens" ? "length" : "stop";
}

/** Builds the ids, timestamps and bodies of one completion (chat or text) for one model name. */
export function responseShapes(model: string, kind: "chat" | "text") {
  const id = `${kind === "chat" ? "chatcmpl" : "cmpl"}-${crypto.randomUUID().replaceAll("-", "")}`;
  const created = Math.floor(Date.now() / 1000);
  const base = { id, created, model, system_fingerprint: "inferd-llama" };
  if (kind === "chat") {
    return {
      full: (content: string, finish: string, usage: Usage) => ({
        ...base,
        object: "chat.completion",
        choices: [{ index: 0, message: { role: "assistant", content }, logprobs: null, finish_reason: finish }],
        usage,
      }),
      chunk: (delta: Json, finish: string | null) => ({
        ...base,
        object: "chat.completion.chunk",
        choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      }),
      usageChunk: (usage: Usage) => ({ ...base, object: "chat.completion.chunk", choices: [], usage }),
    };
  }
  return {
    full: (text: string, finish: string, usage: Usage) => ({
      ...base,
      object: "text_completion",
      choices: [{ index: 0, text, logprobs: null, finish_reason: finish }],
      usage,
    }),
    chunk: (delta: Json, finish: string | null) => ({
      ...base,
      object: "text_completion",
      choices: [{ index: 0, text: (delta.content as string) ?? "", logprobs: null, finish_reason: finish }],
    }),
    usageChunk: (usage: Usage) => ({ ...base, object: "text_completion", choices: [], usage }),
  };
}

/** The /v1/embeddings body; vectors as float arrays or base64 of little-endian float32. */
export function embeddingsBody(model: string, vectors: number[][], promptTokens: number, base64: boolean) {
  return {
    object: "list",
    model,
    data: vectors.map((v, index) => ({
      object: "embedding",
      index,
      embedding: base64 ? Buffer.from(new Float32Array(v).buffer).toString("base64") : v,
    })),
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens },
  };
}
