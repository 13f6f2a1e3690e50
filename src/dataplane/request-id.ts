/**
 * Request ids: every data-plane answer carries `x-request-id`. A client's own well-formed id is
 * kept (so a caller's tracing id follows the request), otherwise one is made when the request
 * arrives. The id goes to the runtime, the job records and the logs.
 */

/** A request's ids: the one its answers carry (`x-request-id`) and inferd's own, which keys its records. */
export interface RequestIds {
  /** The client's own well-formed id, else inferd's. */
  id: string;
  /** inferd's own id (`req_…`): unique, never chosen by a client, so a record cannot be hidden or overwritten by one. */
  own: string;
}

const ids = new WeakMap<Request, RequestIds>();

/** What a client's own id may look like to be kept: printable, no spaces, at most 128 characters. */
const WELL_FORMED = /^[A-Za-z0-9._:\-/+=]{1,128}$/;

/** Notes the request's ids (the answers carry the client's when well-formed, else inferd's own) and returns them. */
export function noteRequestId(request: Request): RequestIds {
  const given = request.headers.get("x-request-id");
  const own = `req_${crypto.randomUUID().replaceAll("-", "")}`;
  const noted = { id: given && WELL_FORMED.test(given) ? given : own, own };
  ids.set(request, noted);
  return noted;
}

/** The id a request's answers carry (every request that reached the app has one). */
export const requestIdOf = (request: Request): string | undefined => ids.get(request)?.id;
