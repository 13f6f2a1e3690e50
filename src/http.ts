import { callOf } from "./call";
import { AppError, badRequest } from "./errors";

/** 413 for a body over the limit, in the contract's error shape. */
export const tooLarge = (limit: number) =>
  new AppError(413, "payload_too_large", `the request body is larger than the ${limit}-byte limit`);

/**
 * The bytes of request bodies inferd may hold at once across all requests (`--max-buffered-bytes`):
 * past it a request is answered 503 `server_busy` with `Retry-After` instead of growing memory.
 * What each request holds is kept on its call (../call.ts).
 */
export class ByteBudget {
  private used = 0;
  constructor(readonly limit: number) {}

  /** Bytes held now. */
  get inUse(): number {
    return this.used;
  }

  /** Counts `n` more bytes against `request`, or throws 503 when they do not fit. */
  take(request: Request, n: number): void {
    if (this.used + n > this.limit) {
      throw new AppError(
        503,
        "server_busy",
        `inferd is holding as many request bodies as it may (${Math.round(this.limit / 1048576)} MiB, --max-buffered-bytes); retry shortly`,
        { "retry-after": "1" },
      );
    }
    this.used += n;
    callOf(request).held += n;
  }

  /** Gives back `n` of the bytes `request` holds (a part of its body it no longer needs). */
  give(request: Request, n: number): void {
    const call = callOf(request);
    const back = Math.min(n, call.held);
    this.used -= back;
    call.held -= back;
  }

  /** Gives back what `request` held (call when its body is no longer needed; twice is harmless). */
  release(request: Request): void {
    const call = callOf(request);
    this.used -= call.held;
    call.held = 0;
  }
}

/**
 * Reads a request body as bytes, refusing (413) as soon as it passes `limit` — by its
 * Content-Length when sent, else while it streams in — so a huge body is never held in memory.
 * With a `budget`, the bytes are counted against it (503 past it) until `budget.release(request)`.
 */
export async function readBodyLimited(request: Request, limit: number, budget?: ByteBudget): Promise<Uint8Array> {
  const declared = Number(request.headers.get("content-length") ?? "NaN");
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(limit);
  // A declared length within the limit: Bun reads it in one go (faster than iterating chunks, and
  // `request.body`, a stream made when first asked for, is never made).
  if (Number.isFinite(declared)) {
    budget?.take(request, declared);
    return request.bytes();
  }
  if (!request.body) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  for await (const chunk of bodyChunks(request, limit)) {
    budget?.take(request, chunk.byteLength);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/**
 * A request body's chunks as they arrive, for a reader that keeps less than the whole: 413 past
 * `limit`, by its Content-Length when sent, else once that many bytes have streamed in.
 * @example for await (const chunk of bodyChunks(request, 1 << 20)) scan(chunk);
 */
export async function* bodyChunks(request: Request, limit: number): AsyncGenerator<Uint8Array> {
  if (Number(request.headers.get("content-length") ?? "NaN") > limit) throw tooLarge(limit);
  let size = 0;
  for await (const chunk of (request.body ?? []) as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > limit) throw tooLarge(limit);
    yield chunk;
  }
}

/**
 * An upload's body left unread: a local runtime gets it streamed as it arrives (never held whole in
 * memory, never counted against the buffered-bytes budget); a hop that needs it whole (a remote
 * agent) reads it once, within the limit and the budget. Past `limit` while streaming, the stream
 * fails and `failure` holds the 413 to answer.
 */
export class UploadSource {
  private streamed = false;
  private whole?: Promise<Uint8Array>;
  failure?: AppError;

  constructor(
    private request: Request,
    private limit: number,
    private budget?: ByteBudget,
  ) {
    const declared = Number(request.headers.get("content-length") ?? "NaN");
    if (Number.isFinite(declared) && declared > limit) throw tooLarge(limit);
  }

  /** The body as it arrives, once (or the kept copy when a remote try read it whole); it fails past the limit. */
  stream(): ReadableStream<Uint8Array> {
    const whole = this.whole;
    if (whole) return new ReadableStream({ start: async (c) => (c.enqueue(await whole), c.close()) });
    if (this.streamed) throw new Error("the upload was already streamed to another runtime");
    this.streamed = true;
    let seen = 0;
    const counter = new TransformStream<Uint8Array, Uint8Array>({
      transform: (chunk, c) => {
        seen += chunk.byteLength;
        if (seen > this.limit) {
          this.failure = tooLarge(this.limit);
          c.error(this.failure);
        } else c.enqueue(chunk);
      },
    });
    return this.request.body ? this.request.body.pipeThrough(counter) : new Response(new Uint8Array(0)).body!;
  }

  /** The body whole, read on the first call and kept. */
  bytes(): Promise<Uint8Array> {
    if (this.streamed) return Promise.reject(new Error("the upload was already streamed to another runtime"));
    return (this.whole ??= readBodyLimited(this.request, this.limit, this.budget));
  }
}

/** How deeply JSON request bodies may nest (objects and arrays); deeper ones are refused before parsing. */
export const MAX_JSON_DEPTH = 64;

/**
 * The index of the quote closing the JSON string opened at `open` (escaped quotes skipped); the text's
 * length when unclosed. It jumps from quote to quote (`indexOf`, native) instead of reading each
 * character: a coding agent's 100 KB body is mostly strings.
 */
function stringEnd(text: string, open: number): number {
  let i = open;
  for (;;) {
    i = text.indexOf('"', i + 1);
    if (i < 0) return text.length;
    // Escaped when an odd number of backslashes stands right before it.
    let b = i - 1;
    while (b > open && text.charCodeAt(b) === 92) b--;
    if ((i - 1 - b) % 2 === 0) return i;
  }
}

/** The index of the `}` closing the object opened at `open` (strings skipped); -1 when it does not close. */
export function objectEnd(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) i = stringEnd(text, i);
    else if (c === 123) depth++;
    else if (c === 125 && --depth === 0) return i;
  }
  return -1;
}

/**
 * The nesting depth of JSON text, stopping early once it passes `limit` (strings are skipped, so
 * brackets inside them do not count). A linear scan: far cheaper than parsing a hostile body.
 * @example jsonDepth('{"a":[1,"]"]}') // → 2
 */
export function jsonDepth(text: string, limit = Infinity): number {
  let depth = 0;
  let max = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 34) i = stringEnd(text, i);
    else if (c === 123 || c === 91) {
      if (++depth > max && (max = depth) > limit) return max;
    } else if (c === 125 || c === 93) depth--;
  }
  return max;
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** A JSON body's text, strictly decoded: bytes that are not UTF-8 are a 400 `invalid_json` (naming `what`). */
export function utf8Text(bytes: Uint8Array, what = "the request body"): string {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    throw badRequest("invalid_json", `${what} is not valid UTF-8`);
  }
}

/**
 * A request body that must be a JSON object: the object and its text as sent (clear 400s as
 * `parseJsonBytes` gives, and when it is not an object).
 */
export function jsonObjectOf(bytes: Uint8Array): { object: Record<string, unknown>; text: string } {
  const text = utf8Text(bytes);
  const object = parseJsonBytes(text);
  if (!object || typeof object !== "object" || Array.isArray(object))
    throw badRequest("invalid_request", "the request body must be a JSON object");
  return { object: object as Record<string, unknown>, text };
}

/**
 * Decodes (strict UTF-8) and parses a JSON body, refusing one nested deeper than MAX_JSON_DEPTH
 * before `JSON.parse` sees it; every failure is a 400 `invalid_json` that never echoes the body and
 * names `what` was parsed (a line of a file, say).
 * @example parseJsonBytes(line, "line 3 of the file") // 400 "line 3 of the file nests JSON deeper than 64 levels, the limit"
 */
export function parseJsonBytes(bytes: Uint8Array | string, what = "the request body"): unknown {
  const text = typeof bytes === "string" ? bytes : utf8Text(bytes, what);
  if (jsonDepth(text, MAX_JSON_DEPTH) > MAX_JSON_DEPTH)
    throw badRequest("invalid_json", `${what} nests JSON deeper than ${MAX_JSON_DEPTH} levels, the limit`);
  try {
    return JSON.parse(text);
  } catch {
    throw badRequest("invalid_json", `${what} is not valid JSON`);
  }
}

/** 408 `request_timeout` for a body that did not arrive within `ms`; the connection is closed with it. */
export const tooSlow = (ms: number) =>
  new AppError(408, "request_timeout", `the request body did not arrive within ${ms / 1000} seconds`, {
    connection: "close",
  });

/**
 * Reads a request body as bytes within `limit` (413) and within `ms` for the whole of it (408 and
 * the connection closed), so a client trickling its body cannot hold a connection open.
 */
export async function readBodyBefore(request: Request, limit: number, ms: number): Promise<Uint8Array> {
  if (Number(request.headers.get("content-length") ?? "NaN") > limit) throw tooLarge(limit);
  if (!request.body) return new Uint8Array(0);
  const reader = request.body.getReader();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(tooSlow(ms)), ms)));
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await Promise.race([reader.read(), late]);
      if (done) return Buffer.concat(chunks);
      if ((size += value.byteLength) > limit) throw tooLarge(limit);
      chunks.push(value);
    }
  } catch (e) {
    reader.cancel().catch(() => {});
    throw e;
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Parses a JSON request body for `/api` and `/admin`: `application/json` only (415 otherwise),
 * at most `limit` bytes (413), valid JSON (400 invalid_json); with `deadlineMs`, the whole body
 * within that time (408). An empty body parses as undefined, which the route's schema then reports.
 */
export async function parseJsonBody(request: Request, limit: number, deadlineMs?: number): Promise<unknown> {
  const bytes =
    deadlineMs === undefined ? await readBodyLimited(request, limit) : await readBodyBefore(request, limit, deadlineMs);
  if (bytes.byteLength === 0) return null;
  const type = (request.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
  if (type !== "application/json" && !type.endsWith("+json")) {
    throw new AppError(
      415,
      "unsupported_media_type",
      `send the body as JSON with "Content-Type: application/json" (got "${type || "none"}")`,
    );
  }
  return parseJsonBytes(bytes);
}

/**
 * Route options for a JSON body checked by `schema`. The global parser reads the body first; the
 * `parse: "json"` here only tells the OpenAPI document that the body is JSON.
 * @example app.post("/x", handler, { ...jsonBody(MySchema), detail: { summary: "…" } })
 */
export const jsonBody = <T>(schema: T) => ({ body: schema, parse: "json" as const });
