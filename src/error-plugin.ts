/**
 * The single error mapper, as the app's first plugin: AppError, validation, parse and not-found
 * errors, the store's failures and anything unknown become the contract's shapes (src/errors.ts),
 * with the request's id.
 */
import { Elysia } from "elysia";
import { log } from "./log";
import { storeFailure } from "./db/errors";
import { callOf } from "./call";
import {
  AppError,
  badRequest,
  conflict,
  errorResponse,
  fromSchemaIssue,
  type SchemaIssue,
  unauthorized,
} from "./errors";

/** When "storage full" was last logged: once, then at most every 10 minutes while it lasts. */
let storageFullLoggedAt = -Infinity;

/** 503 `storage_full` with Retry-After for SQLite's "database or disk is full"; logged at most every 10 minutes, not per request. */
function storageFull(error: unknown): AppError {
  if (Date.now() - storageFullLoggedAt > 600_000) {
    storageFullLoggedAt = Date.now();
    log.error(
      "the store cannot grow: the disk (or the database's size limit) is full; writes answer 503 storage_full until space is freed",
      error instanceof Error ? error.message : error,
    );
  }
  return new AppError(
    503,
    "storage_full",
    "the server's storage is full, so nothing can be saved; try again later (the operator must free disk space)",
    { "retry-after": "60" },
  );
}

/** Maps the store's constraint failures (either dialect) to 409, a full disk to 503, everything else unknown to a logged 500 with no details. */
function fromUnknown(error: unknown, requestId: string): AppError {
  const failure = storeFailure(error);
  if (failure === "unique") return conflict("a resource with that identity already exists");
  if (failure === "foreign_key")
    return conflict("the resource is referenced by or refers to another that does not allow this");
  if (failure === "full") return storageFull(error);
  log.error(`unhandled error in request ${requestId}`, error);
  return new AppError(500, "internal_error", "internal error; the server log has the details");
}

/**
 * The single error mapper: AppError, validation, parse and not-found errors and anything unknown
 * become the contract's shapes. Elysia's default body (which echoes schemas) never reaches a client.
 * `failed` is told of each request that ends here, with the error as the client gets it (the one end
 * path of a request that fails before an answer: its key's slot given back, the refusal recorded);
 * it must not throw.
 */
export const errorPlugin = (failed?: (request: Request, err: AppError) => void) =>
  new Elysia({ name: "inferd/errors" }).onError({ as: "global" }, ({ code, error, request, path }) => {
    const p = path ?? new URL(request.url).pathname;
    let err: AppError;
    if (error instanceof AppError) err = error;
    else if (code === "VALIDATION") {
      const v = error as unknown as { type?: string; valueError?: SchemaIssue };
      err = fromSchemaIssue(v.type === "body" ? "body" : (v.type ?? "request"), v.valueError);
    } else if (code === "PARSE") {
      const cause = (error as Error).cause;
      err = cause instanceof AppError ? cause : badRequest("invalid_json", "the request body is not valid JSON");
    } else if (code === "NOT_FOUND") err = new AppError(404, "not_found", `no route for ${request.method} ${p}`);
    else if (code === "INVALID_COOKIE_SIGNATURE")
      err = unauthorized("invalid_session", "the session cookie is not valid");
    else err = fromUnknown(error, callOf(request).id);
    failed?.(request, err);
    return errorResponse(p, err, callOf(request).id);
  });
