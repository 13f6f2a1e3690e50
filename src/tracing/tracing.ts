/**
 * Where a request's timeline ends: the request inspector's record is built and handed to its sink,
 * and, when tracing is on (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
 * set), the same timeline goes out as an OpenTelemetry trace. The SDK (./otel.ts) is imported only
 * then: with tracing off nothing of it loads.
 */
import type { RequestRecord, RequestSink } from "../inspector/record";
import type { Finished } from "../usage/meter";
import { log } from "../log";
import { newTrace, parseTraceparent } from "./context";
import { cut, Timeline, type TraceExporter } from "./timeline";

/** The OTLP endpoint the environment names for traces, or undefined (tracing off). */
export const traceEndpointOf = (env: Record<string, string | undefined>): string | undefined =>
  env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT || undefined;

/**
 * The trace exporter the environment asks for (see ./otel.ts), or undefined when no OTLP endpoint
 * is set; the OpenTelemetry SDK is imported only in the first case.
 */
export async function loadTraceExporter(
  env: Record<string, string | undefined>,
  version: string,
): Promise<TraceExporter | undefined> {
  if (!traceEndpointOf(env)) return undefined;
  const { startOtlpExporter } = await import("./otel");
  return startOtlpExporter(env, version);
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
  begin(request: Request, route: string, t0: number, recordId: string, requestId: string): Timeline {
    const header = request.headers.get("traceparent");
    const trace =
      (header ? parseTraceparent(header, request.headers.get("tracestate")) : undefined) ??
      (this.exporter ? newTrace() : undefined);
    return new Timeline(t0, recordId, route, trace, "request", requestId);
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

  /** A request (or job run) ended in the meter: its record goes to the inspector and, when on, its trace out. */
  finished(tl: Timeline, f: Finished): void {
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
