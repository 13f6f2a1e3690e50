/**
 * One request's timeline, kept for the request inspector and, when tracing is on, exported as an
 * OpenTelemetry trace. It costs a few small objects per request: times are plain numbers (ms from
 * arrival, from the one `performance.now()` the arrival already took) and ids are made only when
 * tracing is on or the client sent a `traceparent`.
 *
 * Spans: `auth` (authentication and the key's limits), `queue` (the wait for a replica's slot),
 * `dispatch` (the slot held on a replica: host, worker, replica, routing), `upstream` (the runtime
 * call until its response headers), `ttft` (arrival to the first token the client gets), `stream`
 * (first token to the end) and `meter` (recording usage).
 */
import type { RequestRecord, SpanRecord } from "../inspector/record";
import type { Capture } from "./capture";
import { randomId, traceparentOf, type TraceContext } from "./context";

/** The replica a request ran on. */
export interface Placement {
  assignmentId: string;
  workerId: string;
}

/** A request's (or job run's) timeline, from its arrival to its end in the meter. */
export class Timeline {
  private spans: SpanRecord[] = [];
  /** The spans were handed to a record (a fallback workload may add more): copied before the next is added. */
  private handedOver = false;
  /** How many records this timeline made (more than one when a fallback workload took the request). */
  private ends = 0;
  /** The answer's status (the runtime's, or inferd's error status); 0 until known. */
  status = 0;
  errorCode: string | null = null;
  /** The model the request went to (the workload's). */
  model: string | null = null;
  placement: Placement | null = null;
  /** The span id of the current dispatch, the parent the runtime is told in `traceparent`. */
  dispatchSpanId: string | null = null;
  /** Bodies kept while the workload's capture is on. */
  capture: Capture | null = null;
  private dispatchOpen: { start: number; attrs: Record<string, string | number | boolean> } | null = null;

  constructor(
    /** When it arrived (`performance.now()`). */
    readonly t0: number,
    /** The record id: inferd's own request id, or the job id. */
    readonly id: string,
    /** What was asked: "POST /v1/chat/completions", or a job's kind. */
    readonly route: string,
    /** Its trace: the client's, or one made when tracing is on; undefined otherwise. */
    readonly trace: TraceContext | undefined,
    readonly kind: "request" | "job" = "request",
    /** The id the client's answers carry (`x-request-id`: its own, else the record id); null for a job run. */
    readonly requestId: string | null = null,
  ) {}

  /** Now, in ms from arrival. */
  now(): number {
    return performance.now() - this.t0;
  }

  /** Adds a finished span (times in ms from arrival). */
  span(name: string, start: number, end: number, attrs?: SpanRecord["attrs"]): void {
    if (this.handedOver) {
      this.spans = this.spans.slice();
      this.handedOver = false;
    }
    this.spans.push(attrs ? { name, start, end, attrs } : { name, start, end });
  }

  /**
   * The spans and the record id at the timeline's end in a meter: the request id, suffixed `#2`, `#3`…
   * when fallback workloads took the request after the first (each workload lists its own try).
   */
  handOver(): { id: string; spans: SpanRecord[] } {
    this.handedOver = true;
    this.ends++;
    return { id: this.ends === 1 ? this.id : `${this.id}#${this.ends}`, spans: this.spans };
  }

  /** Authentication and the key's limits are done. */
  authed(): void {
    this.span("auth", 0, this.now());
  }

  /**
   * A replica's slot was granted at `at` (ms from arrival): opens its dispatch span and returns the
   * `traceparent` to send the runtime (undefined when the request has no trace).
   */
  dispatched(at: number, placement: Placement, attrs: Record<string, string | number | boolean>): string | undefined {
    this.placement = placement;
    this.dispatchOpen = { start: at, attrs };
    if (!this.trace) return undefined;
    this.dispatchSpanId = randomId(8);
    return traceparentOf(this.trace, this.dispatchSpanId);
  }

  /** The dispatch ends (the slot is given back, or the attempt failed). */
  closeDispatch(end = this.now(), error?: string): void {
    const d = this.dispatchOpen;
    if (!d) return;
    this.dispatchOpen = null;
    this.span("dispatch", d.start, end, error ? { ...d.attrs, error } : d.attrs);
  }

  /** The request failed with `e` before an answer came (an AppError's status and code, else 502). */
  failed(e: unknown): void {
    const err = e as { status?: unknown; code?: unknown };
    this.status = typeof err?.status === "number" ? err.status : 502;
    this.errorCode = typeof err?.code === "string" ? err.code : "upstream_unavailable";
  }
}

declare module "../call" {
  interface Call {
    /** The timeline of a data-plane request (none for other requests, e.g. the dashboard's playground). */
    timeline?: Timeline;
  }
}

/** What exports finished timelines as traces (./otel.ts). */
export interface TraceExporter {
  export(record: RequestRecord, timeline: Timeline): void;
  /** Sends what is buffered and stops. */
  shutdown(): Promise<void>;
}
