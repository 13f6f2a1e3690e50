/**
 * OpenAI Responses API ⇄ chat completions, for runtimes that serve only `/v1/chat/completions`.
 * Pure functions over parsed JSON: no I/O. The streaming half lives in `responses-stream.ts`.
 */
import { systemFirst } from "./system-first";
import { openAiType } from "../errors";

/** A parsed JSON object whose fields are checked before use. */
export type JsonObject = Record<string, unknown>;

/**
 * The chat name of a tool a namespace groups (`NamespaceTool`, as Codex sends its MCP tools): one
 * flat name a chat runtime accepts (`<namespace>__<name>`), mapped back to both on the way out.
 */
export type ToolNames = Map<string, { name: string; namespace: string }>;

/**
 * A translated Responses request: the chat-completions body to send, the hosted tools left out (a
 * runtime cannot run `web_search` and the like), and the chat names of namespaced tools; or why
 * the request is invalid.
 */
export type ChatRequestResult = { body: JsonObject; dropped: string[]; names: ToolNames } | { error: string };

/** A namespaced tool's chat name. */
const chatName = (namespace: string, name: string) => `${namespace}__${name}`;

/** Responses token usage, as `response.usage` carries it. */
export interface ResponseUsage {
  input_tokens: number;
  input_tokens_details: { cached_tokens: number };
  output_tokens: number;
  output_tokens_details: { reasoning_tokens: number };
  total_tokens: number;
}

/** One item of a response's `output`: an assistant message or a function call. */
export type OutputItem =
  | { id: string; type: "message"; status: "in_progress" | "completed"; role: "assistant"; content: JsonObject[] }
  | {
      id: string;
      type: "function_call";
      status: "in_progress" | "completed";
      call_id: string;
      name: string;
      /** The namespace of a namespaced tool (`NamespaceTool`). */
      namespace?: string;
      arguments: string;
    };

/** A `response` object (the fields inferd sets; the request's settings are echoed in the rest). */
export interface ResponseObject extends JsonObject {
  id: string;
  object: "response";
  created_at: number;
  status: "in_progress" | "completed" | "incomplete" | "failed";
  model: string;
  output: OutputItem[];
  incomplete_details: { reason: string } | null;
  usage: ResponseUsage | null;
}

/** Thrown inside request translation; `responsesToChat` turns it into `{error}`. */
class Invalid extends Error {}

const fail = (message: string): never => {
  throw new Invalid(message);
};
/** True for a JSON object (not an array, not null). */
export const isObj = (v: unknown): v is JsonObject => typeof v === "object" && v !== null && !Array.isArray(v);
const str = (v: unknown, path: string): string => (typeof v === "string" ? v : fail(`${path}: must be a string`));
const num = (v: unknown): number | undefined => (typeof v === "number" && Number.isFinite(v) ? v : undefined);
const given = (v: unknown) => v !== undefined && v !== null;

/** A random id with an OpenAI-style prefix (`resp_`, `msg_`, `fc_`, `call_`). */
export const newId = (prefix: string) => `${prefix}${crypto.randomUUID().replaceAll("-", "")}`;

/**
 * Why a request cannot be served at all, whatever the runtime: it leans on responses stored by an
 * earlier call, and inferd keeps none. Undefined when the request stands on its own.
 */
export function needsStoredResponses(req: JsonObject): string | undefined {
  const resend =
    "inferd keeps no responses: send the whole conversation in `input` (earlier output items included) instead";
  if (given(req.previous_response_id)) return `previous_response_id is not supported; ${resend}`;
  if (given(req.conversation)) return `conversation is not supported; ${resend}`;
  if (req.background === true)
    return "background is not supported: inferd keeps no responses to poll; use the workload's async jobs (POST …/jobs) for work that outlives the request";
  if (Array.isArray(req.input) && req.input.some((i) => isObj(i) && i.type === "item_reference")) {
    return `input items of type item_reference are not supported; ${resend} (the AI SDK sends them unless providerOptions.openai.store is false)`;
  }
  return undefined;
}

/**
 * Translates a Responses request into an OpenAI chat-completions body for `servedModel`.
 * @example responsesToChat({input: "hi", instructions: "be brief"}, "m")
 * // → {body: {model: "m", messages: [{role: "system", content: "be brief"}, {role: "user", content: "hi"}]}}
 */
export function responsesToChat(req: JsonObject, servedModel: string): ChatRequestResult {
  try {
    const messages: JsonObject[] = [];
    if (given(req.instructions)) messages.push({ role: "system", content: str(req.instructions, "instructions") });
    if (typeof req.input === "string") messages.push({ role: "user", content: req.input });
    else if (Array.isArray(req.input)) req.input.forEach((item, i) => addItem(messages, item, `input.${i}`));
    else fail("input: required, must be a string or an array of input items");
    const body: JsonObject = { model: servedModel, messages: systemFirst(messages) };
    copySettings(req, body);
    const { tools, dropped, names } = given(req.tools)
      ? convertTools(req.tools)
      : { tools: [], dropped: [], names: new Map() };
    if (!tools.length && dropped.length)
      fail(
        `tools: ${dropped.join(", ")} ${dropped.length === 1 ? "is a hosted tool" : "are hosted tools"} the model runtime cannot run, and the request offers no function tool; send function tools, or none`,
      );
    if (tools.length) body.tools = tools; // runtimes reject an empty list, and tool_choice without tools
    if (tools.length && given(req.tool_choice)) body.tool_choice = convertToolChoice(req.tool_choice);
    if (tools.length && typeof req.parallel_tool_calls === "boolean")
      body.parallel_tool_calls = req.parallel_tool_calls;
    return { body, dropped, names };
  } catch (e) {
    if (e instanceof Invalid) return { error: e.message };
    throw e;
  }
}

/** One input item → chat messages: messages by role, function calls joined onto an assistant turn, outputs as `tool` messages. */
function addItem(messages: JsonObject[], item: unknown, path: string): void {
  if (!isObj(item)) return fail(`${path}: must be an input item object`);
  const type = item.type ?? "message";
  if (type === "message") return void messages.push(messageOf(item, path));
  if (type === "function_call") {
    const name = str(item.name, `${path}.name`);
    const call = {
      id: str(item.call_id, `${path}.call_id`),
      type: "function",
      function: {
        name: typeof item.namespace === "string" && item.namespace ? chatName(item.namespace, name) : name,
        arguments: str(item.arguments, `${path}.arguments`),
      },
    };
    const last = messages.at(-1);
    if (last?.role === "assistant") last.tool_calls = [...((last.tool_calls as JsonObject[] | undefined) ?? []), call];
    else messages.push({ role: "assistant", content: null, tool_calls: [call] });
    return;
  }
  if (type === "function_call_output") {
    return void messages.push({
      role: "tool",
      tool_call_id: str(item.call_id, `${path}.call_id`),
      content: toolOutput(item.output, `${path}.output`),
    });
  }
  if (type === "reasoning") return; // an earlier turn's reasoning: the runtime's chat template drops it anyway
  // An earlier turn's hosted tool call (the real API ran it): nothing a runtime can replay.
  if (typeof type === "string" && /_call$/.test(type) && type !== "function_call") return;
  fail(
    `${path}.type: input items of type ${JSON.stringify(type)} are not supported by this model runtime; use messages, function_call and function_call_output`,
  );
}

/** A message item: `developer` speaks as `system`; parts become text or image_url parts. */
function messageOf(item: JsonObject, path: string): JsonObject {
  const roles: Record<string, string> = { user: "user", assistant: "assistant", system: "system", developer: "system" };
  const role = typeof item.role === "string" ? roles[item.role] : undefined;
  if (!role)
    return fail(
      `${path}.role: unknown role ${JSON.stringify(item.role)}; expected "user", "assistant", "system" or "developer"`,
    );
  const content = item.content;
  if (typeof content === "string") return { role, content };
  if (!Array.isArray(content)) return fail(`${path}.content: must be a string or an array of content parts`);
  const parts = content.map((p, j) => partOf(p, `${path}.content.${j}`));
  if (role !== "user" && parts.some((p) => p.type !== "text"))
    fail(`${path}.content: images are supported in user messages only`);
  const textOnly = parts.every((p) => p.type === "text");
  return { role, content: textOnly ? parts.map((p) => p.text).join("\n") : parts };
}

/** input_text / output_text / refusal → a text part; input_image → an image_url part. */
function partOf(p: unknown, path: string): JsonObject {
  if (!isObj(p)) return fail(`${path}: must be a content part object`);
  if (p.type === "input_text" || p.type === "output_text" || p.type === "text")
    return { type: "text", text: str(p.text, `${path}.text`) };
  if (p.type === "refusal") return { type: "text", text: str(p.refusal, `${path}.refusal`) };
  if (p.type === "input_image") {
    if (typeof p.image_url !== "string")
      fail(
        `${path}.image_url: required (a URL or a data: URL); uploaded files (file_id) are not supported by this model runtime`,
      );
    const image: JsonObject = { url: p.image_url };
    if (typeof p.detail === "string") image.detail = p.detail;
    return { type: "image_url", image_url: image };
  }
  return fail(
    `${path}.type: content part ${JSON.stringify(p.type)} is not supported by this model runtime; use input_text or input_image`,
  );
}

/** A function call's output: a string, or text parts joined. */
function toolOutput(v: unknown, path: string): string {
  if (typeof v === "string") return v;
  if (!Array.isArray(v)) return fail(`${path}: must be a string or an array of input_text parts`);
  return v
    .map((p, k) =>
      isObj(p) && p.type === "input_text"
        ? str(p.text, `${path}.${k}.text`)
        : fail(`${path}.${k}: only input_text parts are supported in a function call's output`),
    )
    .join("");
}

/** Sampling, length, output format, streaming (with usage) and the end user. */
function copySettings(r: JsonObject, body: JsonObject): void {
  for (const key of ["temperature", "top_p"]) {
    if (given(r[key])) body[key] = num(r[key]) ?? fail(`${key}: must be a number`);
  }
  if (given(r.max_output_tokens)) {
    if (!Number.isInteger(r.max_output_tokens) || (r.max_output_tokens as number) < 1)
      fail("max_output_tokens: must be a positive integer");
    body.max_tokens = r.max_output_tokens;
  }
  const format = isObj(r.text) ? r.text.format : undefined;
  if (given(format)) {
    const responseFormat = formatOf(format);
    if (responseFormat) body.response_format = responseFormat;
  }
  if (isObj(r.reasoning) && typeof r.reasoning.effort === "string") body.reasoning_effort = r.reasoning.effort;
  const user = r.safety_identifier ?? r.user;
  if (typeof user === "string") body.user = user;
  if (r.stream === true) {
    body.stream = true;
    body.stream_options = { include_usage: true };
  }
}

/** `text.format` → chat `response_format`: text is the default (nothing to send), json_object and json_schema carry over. */
function formatOf(f: unknown): JsonObject | undefined {
  if (!isObj(f)) return fail("text.format: must be an object with a type");
  if (f.type === "text") return undefined;
  if (f.type === "json_object") return { type: "json_object" };
  if (f.type !== "json_schema")
    return fail(
      `text.format.type: unknown type ${JSON.stringify(f.type)}; expected "text", "json_object" or "json_schema"`,
    );
  const schema: JsonObject = {
    name: str(f.name, "text.format.name"),
    schema: isObj(f.schema) ? f.schema : fail("text.format.schema: required, must be a JSON-schema object"),
  };
  if (typeof f.description === "string") schema.description = f.description;
  if (typeof f.strict === "boolean") schema.strict = f.strict;
  return { type: "json_schema", json_schema: schema };
}

/** One function tool (flat `{type, name, description, parameters, strict}`) → a chat tool named `name`. */
function chatTool(t: JsonObject, name: string): JsonObject {
  const fn: JsonObject = { name };
  if (typeof t.description === "string") fn.description = t.description;
  fn.parameters = isObj(t.parameters) ? t.parameters : { type: "object", properties: {} };
  if (typeof t.strict === "boolean") fn.strict = t.strict;
  return { type: "function", function: fn };
}

/**
 * Tools → chat tools: function tools as they are, a namespace's function tools flattened (named
 * `<namespace>__<name>`, mapped back on the way out), and the hosted tools (`web_search`,
 * `file_search`, `code_interpreter`, `image_generation`, `mcp`, …), which only the real API runs,
 * left out and named.
 */
function convertTools(v: unknown): { tools: JsonObject[]; dropped: string[]; names: ToolNames } {
  const list = Array.isArray(v) ? v : fail("tools: must be an array");
  const tools: JsonObject[] = [];
  const dropped: string[] = [];
  const names: ToolNames = new Map();
  list.forEach((t, i) => {
    const p = `tools.${i}`;
    if (!isObj(t)) return fail(`${p}: must be an object with type "function" and a name`);
    if (t.type === "function") return void tools.push(chatTool(t, str(t.name, `${p}.name`)));
    if (t.type === "namespace") {
      const namespace = str(t.name, `${p}.name`);
      const inner = Array.isArray(t.tools) ? t.tools : fail(`${p}.tools: must be an array of function tools`);
      inner.forEach((f, j) => {
        if (!isObj(f) || f.type !== "function") return fail(`${p}.tools.${j}: must be a function tool`);
        const name = str(f.name, `${p}.tools.${j}.name`);
        names.set(chatName(namespace, name), { name, namespace });
        tools.push(chatTool(f, chatName(namespace, name)));
      });
      return;
    }
    dropped.push(typeof t.type === "string" ? t.type : JSON.stringify(t.type));
  });
  return { tools, dropped: [...new Set(dropped)], names };
}

/** "auto" / "none" / "required" carry over; `{type: "function", name, namespace?}` names the function. */
function convertToolChoice(v: unknown): unknown {
  if (v === "auto" || v === "none" || v === "required") return v;
  if (isObj(v) && v.type === "function") {
    const name = str(v.name, "tool_choice.name");
    return {
      type: "function",
      function: { name: typeof v.namespace === "string" && v.namespace ? chatName(v.namespace, name) : name },
    };
  }
  // A hosted tool chosen (`{type: "web_search"}`): left out with its tool, the model chooses.
  if (isObj(v) && typeof v.type === "string") return "auto";
  return fail('tool_choice: must be "auto", "none", "required" or {type: "function", name}');
}

/** A chat tool call's name as the Responses client named it: the function's, and its namespace. */
export function responsesName(chat: string, names: ToolNames | undefined): { name: string; namespace?: string } {
  const n = names?.get(chat);
  return n ? { name: n.name, namespace: n.namespace } : { name: chat };
}

/** Chat-completions usage → Responses usage (cached prompt and reasoning tokens in their details). */
export function responseUsageOf(u: unknown): ResponseUsage {
  const usage = isObj(u) ? u : {};
  const input = num(usage.prompt_tokens) ?? 0;
  const output = num(usage.completion_tokens) ?? 0;
  const cached = isObj(usage.prompt_tokens_details) ? (num(usage.prompt_tokens_details.cached_tokens) ?? 0) : 0;
  const reasoning = isObj(usage.completion_tokens_details)
    ? (num(usage.completion_tokens_details.reasoning_tokens) ?? 0)
    : 0;
  return {
    input_tokens: input,
    input_tokens_details: { cached_tokens: cached },
    output_tokens: output,
    output_tokens_details: { reasoning_tokens: reasoning },
    total_tokens: input + output,
  };
}

/**
 * A new, empty `response` for `req`, named `model`, in progress: the request's settings echoed as
 * OpenAI does, `store` false (inferd keeps nothing).
 */
export function responseShell(req: JsonObject, model: string): ResponseObject {
  const text = isObj(req.text) && isObj(req.text.format) ? { format: req.text.format } : { format: { type: "text" } };
  return {
    id: newId("resp_"),
    object: "response",
    created_at: Math.floor(Date.now() / 1000),
    status: "in_progress",
    background: false,
    error: null,
    incomplete_details: null,
    instructions: typeof req.instructions === "string" ? req.instructions : null,
    max_output_tokens: num(req.max_output_tokens) ?? null,
    metadata: isObj(req.metadata) ? req.metadata : {},
    model,
    output: [],
    parallel_tool_calls: req.parallel_tool_calls !== false,
    previous_response_id: null,
    reasoning: {
      effort: isObj(req.reasoning) && typeof req.reasoning.effort === "string" ? req.reasoning.effort : null,
      summary: null,
    },
    service_tier: "default",
    store: false,
    temperature: num(req.temperature) ?? 1,
    text,
    tool_choice: req.tool_choice ?? "auto",
    tools: Array.isArray(req.tools) ? req.tools : [],
    top_p: num(req.top_p) ?? 1,
    truncation: "disabled",
    usage: null,
    user: typeof req.user === "string" ? req.user : null,
  };
}

/** The status a chat `finish_reason` gives a response, with OpenAI's reason when it is cut short. */
export function endOf(finish: unknown): Pick<ResponseObject, "status" | "incomplete_details"> {
  if (finish === "length") return { status: "incomplete", incomplete_details: { reason: "max_output_tokens" } };
  if (finish === "content_filter") return { status: "incomplete", incomplete_details: { reason: "content_filter" } };
  return { status: "completed", incomplete_details: null };
}

/** An `output_text` content part. */
export const outputText = (text: string): JsonObject => ({ type: "output_text", text, annotations: [], logprobs: [] });

/**
 * Translates an OpenAI `chat.completion` into the `response` begun as `shell`.
 * @example chatToResponse({choices: [{message: {content: "hi"}, finish_reason: "stop"}]}, responseShell({}, "m")).output[0].content
 * // → [{type: "output_text", text: "hi", annotations: [], logprobs: []}]
 */
export function chatToResponse(chat: unknown, shell: ResponseObject, names?: ToolNames): ResponseObject {
  const c = isObj(chat) ? chat : {};
  const choice = Array.isArray(c.choices) && isObj(c.choices[0]) ? c.choices[0] : {};
  const msg = isObj(choice.message) ? choice.message : {};
  const output: OutputItem[] = [];
  const text =
    typeof msg.content === "string" && msg.content ? msg.content : typeof msg.refusal === "string" ? msg.refusal : "";
  if (text)
    output.push({
      id: newId("msg_"),
      type: "message",
      status: "completed",
      role: "assistant",
      content: [outputText(text)],
    });
  const calls = Array.isArray(msg.tool_calls) ? msg.tool_calls.filter(isObj) : [];
  for (const tc of calls) {
    const fn = isObj(tc.function) ? tc.function : {};
    const args =
      typeof fn.arguments === "string" ? fn.arguments : isObj(fn.arguments) ? JSON.stringify(fn.arguments) : "";
    const callId = typeof tc.id === "string" && tc.id ? tc.id : newId("call_");
    output.push({
      id: newId("fc_"),
      type: "function_call",
      status: "completed",
      call_id: callId,
      ...responsesName(typeof fn.name === "string" ? fn.name : "", names),
      arguments: args,
    });
  }
  return { ...shell, ...endOf(choice.finish_reason), output, usage: responseUsageOf(c.usage) };
}

/**
 * A runtime's error body (vLLM's nested or flat shape, llama-server's, FastAPI's `detail`, plain
 * text) → OpenAI's `{error: {message, type, param, code}}`, the message passed through unchanged.
 * @example openAiErrorOf(400, {object: "error", message: "bad", param: null}) // → {error: {message: "bad", type: "invalid_request_error", param: null, code: null}}
 */
export function openAiErrorOf(
  status: number,
  body: unknown,
): { error: { message: string; type: string; param: string | null; code: string | null } } {
  let b = body;
  if (typeof body === "string") {
    try {
      b = JSON.parse(body);
    } catch {
      b = { message: body.trim() };
    }
  }
  const top = isObj(b) ? b : {};
  const o = isObj(top.error) ? top.error : top;
  let message = typeof o.message === "string" ? o.message : typeof top.error === "string" ? top.error : "";
  if (!message && top.detail !== undefined)
    message = typeof top.detail === "string" ? top.detail : JSON.stringify(top.detail);
  return {
    error: {
      message: message || `the model runtime answered HTTP ${status}`,
      type: openAiType(status),
      param: typeof o.param === "string" ? o.param : null,
      code: typeof o.code === "string" ? o.code : null,
    },
  };
}
