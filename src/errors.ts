/** The one error family of inferd: an HTTP status, a stable machine code and a human message. */
export class AppError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly headers: Record<string, string> = {},
    readonly field?: string,
    /** More machine-readable detail for the body (e.g. the refused word and the setting that allows it). */
    readonly extra?: Record<string, string | number>,
  ) {
    super(message);
  }
}

/** 400 with `validation_error`, naming the offending field. */
export const validation = (field: string, message: string) =>
  new AppError(400, "validation_error", `${field}: ${message}`, {}, field);
/** 400 with a specific code. */
export const badRequest = (code: string, message: string) => new AppError(400, code, message);
/** 401: no credential, or one that is unknown or revoked. */
export const unauthorized = (code: string, message: string) => new AppError(401, code, message);
/** 403 with one of the contract's codes: wrong_credential_type, project_scope_mismatch, scope_insufficient. */
export const forbidden = (code: string, message: string) => new AppError(403, code, message);
/** 404 for a resource that does not exist (or is not visible to this credential). */
export const notFound = (what: string) => new AppError(404, "not_found", `${what} not found`);
/** 409 for a slug or name that is taken (naming its `field`), or a state that forbids the operation. */
export const conflict = (message: string, code = "conflict", field?: string) =>
  new AppError(409, code, message, {}, field);

/**
 * 429 `project_limit`: the project is at one of its caps; `limit` names it (`max_workloads`,
 * `max_replicas`, `model_bytes`) and `value` is its setting; `field` the request field it refuses, if any.
 */
export const projectLimit = (limit: string, value: number, message: string, field?: string) =>
  new AppError(429, "project_limit", message, {}, field, { limit, value });

/** Anthropic error `type` for each status, used on the Messages-style route. */
const ANTHROPIC_TYPES: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  403: "permission_error",
  404: "not_found_error",
  409: "invalid_request_error",
  413: "request_too_large",
  415: "invalid_request_error",
  429: "rate_limit_error",
  503: "overloaded_error",
};

/** OpenAI-style error `type` for the data plane, so the OpenAI SDK's error classes carry it. */
export function openAiType(status: number): string {
  if (status === 401) return "authentication_error";
  if (status === 403) return "permission_error";
  if (status === 404) return "not_found_error";
  if (status === 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

/** True for paths answered in the Anthropic Messages error shape (either base, count_tokens too). */
export const isMessagesPath = (path: string) => /^\/endpoint\/[^/]+\/(?:[^/]+\/)?v1\/messages(?:\/.*)?$/.test(path);

/** True for the Ollama API's paths, whose errors are `{"error": "<message>"}` as Ollama's clients read them. */
export const isOllamaPath = (path: string) => /^\/endpoint\/[^/]+\/(?:[^/]+\/)?api\/[a-z]+\/?$/.test(path);

/** Statuses a retry cannot fix: the official SDKs are told not to retry them (they retry 409 otherwise). */
const NO_RETRY = new Set([400, 401, 403, 404, 409, 413, 415, 422]);

/**
 * The retry hint of a data-plane answer: `x-should-retry: false` on errors a retry cannot fix,
 * `true` (with Retry-After, default 1 s) on 429 and 503. Sets nothing on other statuses.
 */
export function setRetryHint(headers: Headers, status: number): void {
  if (NO_RETRY.has(status)) headers.set("x-should-retry", "false");
  else if (status === 429 || status === 503) {
    headers.set("x-should-retry", "true");
    if (!headers.has("retry-after")) headers.set("retry-after", "1");
  }
}

/**
 * The body of an error response in the shape the route family promises:
 * `{type:"error", error:{type, message}}` on `/v1/messages`, `{error:{code, message, …}}` elsewhere
 * (the data plane adds OpenAI's `type` so its SDK reports the error well).
 */
export function errorBody(path: string, err: AppError): unknown {
  if (isMessagesPath(path)) {
    return { type: "error", error: { type: ANTHROPIC_TYPES[err.status] ?? "api_error", message: err.message } };
  }
  if (isOllamaPath(path)) return { error: err.message };
  const body: Record<string, unknown> = { code: err.code, message: err.message };
  if (err.field) body.field = err.field;
  if (err.extra) Object.assign(body, err.extra);
  if (path.startsWith("/endpoint/")) body.type = openAiType(err.status);
  return { error: body };
}

/** Builds the JSON response for an AppError on the given path, with its request id; a data-plane one also gets its retry hint. */
export function errorResponse(path: string, err: AppError, requestId?: string): Response {
  const r = Response.json(errorBody(path, err), { status: err.status, headers: err.headers });
  if (requestId) {
    r.headers.set("x-request-id", requestId);
    r.headers.set("request-id", requestId);
  }
  if (path.startsWith("/endpoint/")) setRetryHint(r.headers, err.status);
  return r;
}

/** An issue as zod reports it (through Elysia's Standard Schema support). */
export interface SchemaIssue {
  code?: string;
  path?: readonly PropertyKey[];
  message?: string;
  keys?: string[];
}

/** Turns a schema issue (zod through Elysia's Standard Schema support) into a validation AppError. */
export function fromSchemaIssue(where: string, issue: SchemaIssue | undefined): AppError {
  if (!issue) return validation(where, "invalid value");
  const path = (issue.path ?? []).map(String);
  if (issue.code === "unrecognized_keys" && issue.keys?.length) {
    const field = [...path, issue.keys[0]].join(".");
    return validation(
      field,
      `unknown field${issue.keys.length > 1 ? "s" : ""} ${issue.keys.map((k) => `"${k}"`).join(", ")}`,
    );
  }
  const field = path.length ? path.join(".") : where;
  const message = (issue.message ?? "invalid value").replace(/^Invalid input: /, "");
  return validation(field, path.length ? message : `must be a JSON object (${message})`);
}
