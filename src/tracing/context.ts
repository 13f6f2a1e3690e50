/**
 * W3C trace context (https://www.w3.org/TR/trace-context/): reading a client's `traceparent` and
 * `tracestate`, writing the one sent to a runtime, and making ids. A malformed header is ignored,
 * never an error: the request goes on as if none had been sent.
 */

/** The trace a request belongs to: its id, the caller's span (null: inferd starts the trace) and flags. */
export interface TraceContext {
  /** 32 lower-case hex digits. */
  traceId: string;
  /** The caller's span id (16 hex digits), the parent of the request's root span; null when inferd started the trace. */
  parentId: string | null;
  /** The trace flags as two hex digits ("01": sampled). */
  flags: string;
  /** The caller's `tracestate`, passed on unchanged; null when none (or a malformed one) came. */
  state: string | null;
}

const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;
const ZERO_TRACE = "0".repeat(32);
const ZERO_SPAN = "0".repeat(16);
/** What the spec allows of a `tracestate`: at most 32 list members, printable ASCII, 512 characters kept. */
const TRACESTATE = /^[\x20-\x7e]{1,512}$/;

/**
 * The trace context a client sent, or undefined when it sent none or a malformed `traceparent`
 * (wrong shape, version ff, an all-zero id, or extra fields on version 00).
 * @example parseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", null)?.traceId // → "4bf92f3577b34da6a3ce929d0e0e4736"
 */
export function parseTraceparent(header: string | null, state: string | null): TraceContext | undefined {
  if (!header) return undefined;
  const m = TRACEPARENT.exec(header.trim());
  if (!m || m[1] === "ff" || (m[1] === "00" && m[5] !== undefined) || m[2] === ZERO_TRACE || m[3] === ZERO_SPAN)
    return undefined;
  return { traceId: m[2], parentId: m[3], flags: m[4], state: state && TRACESTATE.test(state) ? state : null };
}

/**
 * The `traceparent` header naming `spanId` of the trace as the caller's span.
 * @example traceparentOf({traceId: "4bf9…4736", flags: "01"}, "00f067aa0ba902b7") // → "00-4bf9…4736-00f067aa0ba902b7-01"
 */
export const traceparentOf = (trace: Pick<TraceContext, "traceId" | "flags">, spanId: string): string =>
  `00-${trace.traceId}-${spanId}-${trace.flags}`;

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));

/**
 * A random id of `bytes` bytes in hex, never all zeros: 16 for a trace id, 8 for a span id.
 * @example randomId(8) // → "a3ce929d0e0e4736"
 */
export function randomId(bytes: 8 | 16): string {
  const b = crypto.getRandomValues(new Uint8Array(bytes));
  if (b.every((x) => x === 0)) b[bytes - 1] = 1;
  let s = "";
  for (const x of b) s += HEX[x];
  return s;
}

/** A new trace started by inferd (no caller span), sampled. */
export const newTrace = (): TraceContext => ({ traceId: randomId(16), parentId: null, flags: "01", state: null });
