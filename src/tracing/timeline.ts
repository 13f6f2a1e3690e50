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
 *
 * `Tracing` starts timelines as requests arrive and ends them: the request inspector's record is built
 * and handed to its sink, and, when tracing is on (./tracing.ts), the timeline goes out as a trace.
 */
import type { FallbackTry, RequestRecord, RequestSink, SpanRecord } from "../inspector/record";
import { log } from "../log";
import type { Capture } from "./capture";
import { newTrace, parseTraceparent, randomId, traceparentOf, type TraceContext } from "./context";

/** The replica a request ran on. */
export interface Placement {
  assignmentId: string;
  workerId: string;
}

/**
 * A dispatch under way, as the data plane marks it (`performance.now()` times): the queue wait that
 * led to it, the slot's replica and routing, and the runtime's answer once its headers came.
 */
export interface DispatchMarks {
  queuedAt: number;
  grantedAt: number;
  /** The queue span's attributes: the class it waited in and its place in line when it came. */
  queue: SpanRecord["attrs"];
  /** The dispatch span's: replica, worker, how it was routed. */
  attrs: Record<string, string | number | boolean>;
  /** When the runtime's response headers came (0: not yet), and their status when it was an error (0: ok). */
  answeredAt: number;
  failedWith: number;
  /** Which of its spans were made: none, `queue`, `queue` and `upstream`. */
  spanned: 0 | 1 | 2;
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
  /** Why it failed, in words (inferd's message or the runtime's own, cut short). */
  errorMessage: string | null = null;
  /** Where it came from: null for an API client, `playground` for the dashboard's playground. */
  source: "playground" | null = null;
  /** The workload it is on, once one was chosen (the record of a refusal names it when known), and its project. */
  workloadId: string | null = null;
  projectId: string | null = null;
  /** The answer is a stream: its first token is a time to first token (a whole answer's headers are not). */
  streamed = false;
  /** The workload being tried is not the route's last: a failure falls back to the next (set by `tryInOrder`). */
  mayFallBack = false;
  /** The workloads tried before this one, that failed and fell back (none made until one does). */
  tries: FallbackTry[] | null = null;
  /** The end of a failed try that may fall back, held until `tryInOrder` knows whether it did. */
  private heldEnd: (() => void) | null = null;
  /** The model the request went to (the workload's). */
  model: string | null = null;
  /** The replica of the open (or last) dispatch. */
  placement: Placement | null = null;
  /** The span id of the current dispatch, the parent the runtime is told in `traceparent`. */
  dispatchSpanId: string | null = null;
  /** Bodies kept while the workload's capture is on. */
  capture: Capture | null = null;
  /**
   * When authentication and the key's limits were done (`performance.now()`; 0: not yet, or already
   * a span). Set by the request path as it goes, like `dispatch`: a mark costs the path no call,
   * and the spans are made of the marks at the end (or before the next span, to keep their order).
   */
  authedAt = 0;
  /** The dispatch under way (set by the data plane once a slot is granted), its marks made spans when it closes. */
  dispatch: DispatchMarks | null = null;

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

  /** Whether the request's record was made (it ended in a meter, or as a refusal) or is held. */
  get ended(): boolean {
    return this.ends > 0 || this.heldEnd !== null;
  }

  /** Holds the end of a failed try that may fall back (see `fellBack`, `flushHeld`). */
  hold(end: () => void): void {
    this.heldEnd = end;
  }

  /**
   * The try on `workloadId` failed (`status`) and the request moves on to the route's next workload:
   * the try is listed in the record's route, its held end dropped, and the outcome starts afresh.
   */
  fellBack(workloadId: string, status: number): void {
    (this.tries ??= []).push({ workload_id: workloadId, status: this.status || status, error_code: this.errorCode });
    this.span("fallback", this.now(), this.now(), { from: workloadId, status: this.status || status });
    this.heldEnd = null;
    this.status = 0;
    this.errorCode = this.errorMessage = null;
    this.placement = null;
    this.streamed = false;
  }

  /** The held try's failure is the request's answer after all (it did not fall back): its record goes out. */
  flushHeld(): void {
    const end = this.heldEnd;
    this.heldEnd = null;
    end?.();
  }

  /** Now, in ms from arrival. */
  now(): number {
    return performance.now() - this.t0;
  }

  /**
   * Adds a finished span (times in ms from arrival, kept to the microsecond: a clock's full double,
   * 0.27904499999999643, costs the record's writer more to print and store and says nothing more).
   */
  span(name: string, start: number, end: number, attrs?: SpanRecord["attrs"]): void {
    this.settle();
    this.push(name, start, end, attrs);
  }

  private push(name: string, start: number, end: number, attrs?: SpanRecord["attrs"]): void {
    if (this.handedOver) {
      this.spans = this.spans.slice();
      this.handedOver = false;
    }
    start = toMicros(start);
    end = toMicros(end);
    this.spans.push(attrs ? { name, start, end, attrs } : { name, start, end });
  }

  /** The marks set since the last span, as spans: `auth`, then the open dispatch's `queue` and `upstream`. */
  private settle(): void {
    if (this.authedAt) {
      this.push("auth", 0, this.authedAt - this.t0);
      this.authedAt = 0;
    }
    const d = this.dispatch;
    if (!d || d.spanned === 2) return;
    if (d.spanned === 0) this.push("queue", d.queuedAt - this.t0, d.grantedAt - this.t0, d.queue);
    d.spanned = 1;
    if (!d.answeredAt) return;
    this.push(
      "upstream",
      d.grantedAt - this.t0,
      d.answeredAt - this.t0,
      d.failedWith ? { error: d.failedWith } : undefined,
    );
    d.spanned = 2;
  }

  /**
   * The spans and the record id at the timeline's end: the request id (suffixed `#2`, `#3`… should a
   * request ever end twice; a fallback's tries end once, in the workload that answered).
   */
  handOver(): { id: string; spans: SpanRecord[] } {
    this.settle();
    this.handedOver = true;
    this.ends++;
    return { id: this.ends === 1 ? this.id : `${this.id}#${this.ends}`, spans: this.spans };
  }

  /**
   * The `traceparent` to send the runtime for the open dispatch (whose span id it makes). Only for a
   * timeline with a trace: the client sent one, or tracing is on.
   */
  traceparent(): string {
    this.dispatchSpanId = randomId(8);
    return traceparentOf(this.trace!, this.dispatchSpanId);
  }

  /** The dispatch ends (the slot is given back, or the attempt failed). */
  closeDispatch(end = this.now(), error?: string): void {
    const d = this.dispatch;
    if (!d) return;
    this.settle();
    this.dispatch = null;
    this.push("dispatch", d.grantedAt - this.t0, end, error ? { ...d.attrs, error } : d.attrs);
  }

  /**
   * The meter ended the request as `f` says, its clock started at `start` (ms from arrival): a
   * stream's time to first token and the stream itself, the dispatch closed, the meter's own time;
   * its error code when none was noted.
   */
  metered(start: number, f: Ended, errorCode: string | undefined): void {
    const end = start + f.durationMs;
    this.settle();
    if (f.firstByteMs !== null && this.streamed) {
      this.span("ttft", start, start + f.firstByteMs);
      this.span("stream", start + f.firstByteMs, end);
    }
    this.closeDispatch(end);
    this.span("meter", end, this.now());
    if (errorCode && !this.errorCode) this.errorCode = errorCode;
  }

  /** The request failed with `e` before an answer came (an AppError's status, code and message, else 502). */
  failed(e: unknown): void {
    const err = e as { status?: unknown; code?: unknown; message?: unknown };
    this.status = typeof err?.status === "number" ? err.status : 502;
    this.errorCode = typeof err?.code === "string" ? err.code : "upstream_unavailable";
    this.errorMessage = typeof err?.message === "string" ? cut(err.message) : null;
  }
}

/** The route of a request that did not fall back (shared: records never change it). */
const NO_TRIES: readonly never[] = Object.freeze([]);

/** Starts timelines as requests arrive and ends them into the inspector (and the exporter, when on). */
export class Tracing {
  constructor(
    private sink: RequestSink,
    /** This inferd host's id (the record's `hostId`). */
    private hostId: string | null,
    private exporter?: TraceExporter,
  ) {}

  /** True when traces are exported. */
  get on(): boolean {
    return this.exporter !== undefined;
  }

  /**
   * The timeline of a data-plane request that arrived at `t0`: in the client's trace when it sent a
   * well-formed `traceparent`, in a new one when tracing is on, else in none (no id is made).
   */
  begin(request: Request, path: string, t0: number, recordId: string, requestId: string): Timeline {
    const header = request.headers.get("traceparent");
    const trace =
      (header ? parseTraceparent(header, request.headers.get("tracestate")) : undefined) ??
      (this.exporter ? newTrace() : undefined);
    return new Timeline(t0, recordId, traceName(request.method, path), trace, "request", requestId);
  }

  /**
   * The timeline of a job run that was submitted `queuedMs` ago (its clock starts at submission): in
   * the submitter's trace when it sent a `traceparent`, in a new one when tracing is on, else in none.
   */
  beginJob(jobId: string, kind: string, queuedMs: number, traceparent: string | null = null): Timeline {
    const trace = parseTraceparent(traceparent, null) ?? (this.exporter ? newTrace() : undefined);
    const tl = new Timeline(performance.now() - queuedMs, jobId, kind, trace, "job");
    tl.span("queue", 0, queuedMs, { priority: "batch", stored: true });
    return tl;
  }

  /**
   * A request (or job run) ended: in the meter (its clock started at `meteredFrom`, ms from arrival;
   * `Timeline.metered` closes its spans) or refused. Its record goes to the inspector and, when on,
   * its trace out. A failed try that may fall back (`later`: what to count should it be the answer)
   * is held on the timeline until the route knows.
   */
  finished(tl: Timeline, f: Ended, meteredFrom?: number, errorCode?: string, later?: () => void): void {
    if (meteredFrom !== undefined) tl.metered(meteredFrom, f, errorCode);
    if (later) {
      tl.hold(() => {
        later();
        this.record(tl, f);
      });
      return;
    }
    this.record(tl, f);
  }

  /** The record of an ended timeline, to the inspector and, when on, the exporter. */
  private record(tl: Timeline, f: Ended): void {
    const totalMs = tl.kind === "job" ? tl.now() : f.durationMs;
    const firstByte = f.firstByteMs === null ? null : f.firstByteMs + (tl.kind === "job" ? totalMs - f.durationMs : 0);
    const { id, spans } = tl.handOver();
    for (const s of spans) if (s.name === "dispatch" && s.attrs && this.hostId) s.attrs.host = this.hostId;
    const record: RequestRecord = {
      id,
      requestId: tl.requestId,
      at: Math.round(performance.timeOrigin + tl.t0),
      workloadId: f.workloadId,
      projectId: f.projectId,
      keyId: f.keyId,
      kind: tl.kind,
      route: tl.route,
      model: tl.model,
      status: tl.status || (f.ok ? 200 : 502),
      errorCode: tl.errorCode,
      errorMessage: tl.errorMessage === null ? null : cut(tl.errorMessage),
      source: tl.source,
      fellBackFrom: tl.tries ?? NO_TRIES,
      tokensIn: f.usage.inputTokens,
      tokensOut: f.usage.outputTokens,
      queueMs: tl.kind === "job" ? totalMs - f.durationMs + f.queueMs : f.queueMs,
      // A whole answer's headers are not a first token: only a stream has a time to first token.
      ttftMs: tl.streamed ? firstByte : null,
      totalMs,
      assignmentId: tl.placement?.assignmentId ?? null,
      workerId: tl.placement?.workerId ?? null,
      hostId: this.hostId,
      traceId: tl.trace?.traceId ?? null,
      spans,
    };
    if (tl.capture) record.bodies = tl.capture.bodies();
    // A failure on inferd's or the runtime's side is a line of the server log, with the ids to find it by.
    if (record.status >= 500)
      log.info(
        `${tl.kind} ${tl.requestId ?? id}${tl.requestId && tl.requestId !== id ? ` (record ${id})` : ""} failed: ${record.status} ${record.errorCode ?? ""}${record.errorMessage ? `: ${record.errorMessage}` : ""}${record.workloadId ? ` (workload ${record.workloadId})` : ""}`,
      );
    try {
      this.sink.add(record);
      this.exporter?.export(record, tl);
    } catch (e) {
      log.warn(`could not keep the record of request ${tl.id}`, e);
    }
  }

  /** Sends the traces still buffered (at shutdown). */
  async stop(): Promise<void> {
    await this.exporter?.shutdown().catch((e) => log.warn("could not send the last traces", e));
  }
}

/** How a request (or job run) ended, as the meter tells it (../usage/meter.ts `Finished`). Times in ms from its acceptance. */
export interface Ended {
  workloadId: string;
  projectId: string;
  keyId: string | null;
  ok: boolean;
  usage: { inputTokens: number; outputTokens: number };
  durationMs: number;
  queueMs: number;
  /** To the first token of a stream, or to the response headers; null when no response came. */
  firstByteMs: number | null;
}

/**
 * A data-plane request's route name (its trace's and the inspector's), without the
 * `/endpoint/<project>[/<workload>]` base: the method and the path from `/v1/` or `/api/` on.
 * @example traceName("POST", "/endpoint/p/w/v1/chat/completions") // → "POST /v1/chat/completions"
 */
export function traceName(method: string, path: string): string {
  const i = path.search(/\/(v1|api)\//);
  return `${method} ${i < 0 ? path : path.slice(i)}`;
}

/** Most characters of an error message a record keeps. */
export const MAX_ERROR_MESSAGE = 500;

/** A message cut to `MAX_ERROR_MESSAGE` characters. */
export const cut = (m: string): string => (m.length > MAX_ERROR_MESSAGE ? `${m.slice(0, MAX_ERROR_MESSAGE - 1)}…` : m);

/**
 * Why a runtime's error answer failed, from its body: OpenAI's `{"error":{"message","code"|"type"}}`,
 * vLLM's `{"object":"error","message","type"}` (vllm/entrypoints/openai/protocol.py ErrorResponse),
 * FastAPI's `{"detail": …}`, Ollama's `{"error":"…"}`, else the text itself; cut short.
 * @example runtimeError('{"error":{"message":"bad temperature","type":"invalid_request_error"}}') // → { code: "invalid_request_error", message: "bad temperature" }
 */
export function runtimeError(text: string): { code: string | null; message: string | null } {
  let message: unknown = text.trim() || null;
  let code: unknown = null;
  try {
    const j = JSON.parse(text) as Record<string, unknown>;
    const e = (j && typeof j.error === "object" && j.error ? j.error : j) as Record<string, unknown>;
    const m = e.message ?? j.detail ?? j.error;
    message = typeof m === "string" ? m : m === undefined ? message : JSON.stringify(m);
    code = typeof e.code === "string" ? e.code : typeof e.type === "string" ? e.type : null;
  } catch {
    // not JSON: the text is the message
  }
  return { code: code as string | null, message: typeof message === "string" ? cut(message) : null };
}

declare module "../call" {
  interface Call {
    /** The timeline of a data-plane or playground request (none for other requests). */
    timeline?: Timeline;
  }
}

/** What exports finished timelines as traces (./otel.ts). */
export interface TraceExporter {
  export(record: RequestRecord, timeline: Timeline): void;
  /** Sends what is buffered and stops. */
  shutdown(): Promise<void>;
}

/** A time in ms rounded to the microsecond (rounding keeps order: a span never ends before it starts). */
const toMicros = (ms: number): number => Math.round(ms * 1000) / 1000;
