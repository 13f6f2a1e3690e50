import { AppError, badRequest } from "./errors";

/** 413 for a body over the limit, in the contract's error shape. */
export const tooLarge = (limit: number) => new AppError(413, "payload_too_large", `the request body is larger than the ${limit}-byte limit`);

/**
 * Reads a request body as bytes, refusing (413) as soon as it passes `limit` — by its
 * Content-Length when sent, else while it streams in — so a huge body is never held in memory.
 */
export async function readBodyLimited(request: Request, limit: number): Promise<Uint8Array> {
  const declared = Number(request.headers.get("content-length") ?? "NaN");
  if (Number.isFinite(declared) && declared > limit) throw tooLarge(limit);
  if (!request.body) return new Uint8Array(0);
  // A declared length within the limit: Bun reads it in one go (faster than iterating chunks).
  if (Number.isFinite(declared)) return request.bytes();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of request.body as unknown as AsyncIterable<Uint8Array>) {
    size += chunk.byteLength;
    if (size > limit) throw tooLarge(limit);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/**
 * Parses a JSON request body for `/api` and `/admin`: `application/json` only (415 otherwise),
 * at most `limit` bytes (413), valid JSON (400 invalid_json). An empty body parses as undefined,
 * which the route's schema then reports.
 */
export async function parseJsonBody(request: Request, limit: number): Promise<unknown> {
  const bytes = await readBodyLimited(request, limit);
  if (bytes.byteLength === 0) return null;
  const type = (request.headers.get("content-type") ?? "").split(";")[0].trim().toLowerCase();
  if (type !== "application/json" && !type.endsWith("+json")) {
    throw new AppError(415, "unsupported_media_type", `send the body as JSON with "Content-Type: application/json" (got "${type || "none"}")`);
  }
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw badRequest("invalid_json", "the request body is not valid JSON");
  }
}

/**
 * Route options for a JSON body checked by `schema`. The global parser reads the body first; the
 * `parse: "json"` here only tells the OpenAPI document that the body is JSON.
 * @example app.post("/x", handler, { ...jsonBody(MySchema), detail: { summary: "…" } })
 */
export const jsonBody = <T>(schema: T) => ({ body: schema, parse: "json" as const });
