/**
 * One request from its arrival to its end, as every layer sees it (PocketBase's `RequestEvent`):
 * made once when the request arrives (`beginCall`: by the HTTPS listener, else by the app's first
 * hook) and read through `callOf(request)`. It carries what is known of the request as it goes:
 * its ids, arrival time, listener and the request-body bytes it holds here; the features that learn
 * more fill their own slot, declared beside them on this interface (module augmentation: the key
 * and principal by auth, the ticket by limits, the timeline by tracing), so this file imports none
 * of them and every feature may import it.
 */

/** A request in flight (see the module comment); features add their slots with `declare module "…/call"`. */
export interface Call {
  readonly request: Request;
  /** The URL's path, as sent (not normalised). */
  readonly path: string;
  /** When it arrived (`performance.now()`): a data-plane meter's clock starts here. */
  readonly arrivedAt: number;
  /** The id its answers carry (`x-request-id`): the client's own when well-formed, else `own`. */
  readonly id: string;
  /** inferd's own id (`req_…`): unique, never chosen by a client, so a record cannot be hidden or overwritten by one. */
  readonly own: string;
  /** Whether it came in on the HTTPS listener. */
  readonly viaTls: boolean;
  /** Request-body bytes it holds against the server's budget (../http.ts `ByteBudget`). */
  held: number;
  /**
   * Its JSON body as the data plane read it: the object and the text as sent, so a body the runtime
   * takes unchanged is passed on as it came rather than printed again.
   */
  json?: { readonly object: Record<string, unknown>; readonly text: string };
}

const calls = new WeakMap<Request, Call>();

/** What a client's own id may look like to be kept: printable, no spaces, at most 128 characters. */
const WELL_FORMED = /^[A-Za-z0-9._:\-/+=]{1,128}$/;

/**
 * The path of a request URL without building a URL object (this runs on every request).
 * @example pathOf("http://h:1/a/b?x=1") // → "/a/b"
 */
export function pathOf(url: string): string {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  if (start < 0) return "/";
  const q = url.indexOf("?", start);
  return url.slice(start, q < 0 ? undefined : q);
}

/** Starts the call of a request that just arrived (the one place a `Call` is made). */
export function beginCall(request: Request, viaTls = false): Call {
  const given = request.headers.get("x-request-id");
  // Time-ordered (UUIDv7): the inspector's rows, keyed on it, are appended to the end of their
  // index instead of landing at random places in it, which cost more as the table grew.
  const own = `req_${Bun.randomUUIDv7().replaceAll("-", "")}`;
  const call: Call = {
    request,
    path: pathOf(request.url),
    arrivedAt: performance.now(),
    id: given && WELL_FORMED.test(given) ? given : own,
    own,
    viaTls,
    held: 0,
  };
  calls.set(request, call);
  return call;
}

/** Whether the client reached inferd over HTTPS: on the HTTPS listener, or through a proxy that says so. */
export const overHttps = (request: Request): boolean =>
  callOf(request).viaTls || request.headers.get("x-forwarded-proto") === "https";

/** The call of a request (begun now when none was: a request handed to the app in-process). */
export const callOf = (request: Request): Call => calls.get(request) ?? beginCall(request);
