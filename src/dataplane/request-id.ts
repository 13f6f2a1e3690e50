/**
 * Request ids: every data-plane answer carries `x-request-id`. A client's own well-formed id is
 * kept (so a caller's tracing id follows the request), otherwise one is made when the request
 * arrives. The id goes to the runtime, the job records and the logs.
 */

const ids = new WeakMap<Request, string>();

/** What a client's own id may look like to be kept: printable, no spaces, at most 128 characters. */
const WELL_FORMED = /^[A-Za-z0-9._:\-/+=]{1,128}$/;

/** Notes the request's id (the client's when well-formed, else a new one) and returns it. */
export function noteRequestId(request: Request): string {
  const given = request.headers.get("x-request-id");
  const id = given && WELL_FORMED.test(given) ? given : `req_${crypto.randomUUID().replaceAll("-", "")}`;
  ids.set(request, id);
  return id;
}

/** The id noted for a request (every request that reached the app has one). */
export const requestIdOf = (request: Request): string | undefined => ids.get(request);
