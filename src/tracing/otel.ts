/**
 * The OpenTelemetry export of finished timelines, loaded (dynamic import from ./tracing.ts) only
 * when an OTLP endpoint is set. Each timeline becomes one trace: a root span (`POST
 * /v1/chat/completions`, kind SERVER; a job's `job <kind>`, kind CONSUMER) whose parent is the
 * client's `traceparent`, with the timeline's spans as its children at their recorded times; the
 * `dispatch` span keeps the id the runtime was told, so a runtime's own spans hang under it.
 * Spans go out in batches over OTLP/HTTP (`http/protobuf`, the default, or `http/json`); the
 * endpoint, headers and timeouts are the exporter's standard `OTEL_EXPORTER_OTLP_*` variables.
 */
import {
  ROOT_CONTEXT,
  SpanKind,
  SpanStatusCode,
  trace,
  type Attributes,
  type Context,
  type Tracer,
} from "@opentelemetry/api";
import {
  BatchSpanProcessor,
  RandomIdGenerator,
  TracerProvider,
  type IdGenerator,
  type SpanExporter,
} from "@opentelemetry/sdk-trace";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { TraceState } from "@opentelemetry/core";
import type { RequestRecord } from "../inspector/record";
import { log } from "../log";
import type { Timeline, TraceExporter } from "./timeline";

/**
 * Ids from the timeline where it has them (the trace id, the dispatch span's id), random otherwise:
 * `preset` is taken by the very next span started, synchronously.
 */
class PresetIds implements IdGenerator {
  private random = new RandomIdGenerator();
  traceId: string | undefined;
  spanId: string | undefined;

  generateTraceId(): string {
    const id = this.traceId ?? this.random.generateTraceId();
    this.traceId = undefined;
    return id;
  }

  generateSpanId(): string {
    const id = this.spanId ?? this.random.generateSpanId();
    this.spanId = undefined;
    return id;
  }
}

/** The GenAI operation of a route (OTel GenAI semantic conventions), where one fits. */
function operationOf(route: string): string | undefined {
  if (
    route.endsWith("/chat/completions") ||
    route.endsWith("/messages") ||
    route.endsWith("/responses") ||
    route.endsWith("/api/chat")
  )
    return "chat";
  if (route.endsWith("/completions") || route.endsWith("/api/generate")) return "text_completion";
  if (route.includes("embed")) return "embeddings";
  return undefined;
}

/** The root span's attributes: the GenAI and HTTP conventions where they fit, `inferd.*` for the rest. */
function rootAttributes(r: RequestRecord): Attributes {
  const a: Attributes = {
    "gen_ai.usage.input_tokens": r.tokensIn ?? 0,
    "gen_ai.usage.output_tokens": r.tokensOut ?? 0,
    "inferd.request_id": r.requestId ?? r.id,
    "inferd.workload": r.workloadId,
    "inferd.project": r.projectId,
    "inferd.kind": r.kind,
  };
  if (r.model) a["gen_ai.request.model"] = r.model;
  const op = operationOf(r.route);
  if (op) a["gen_ai.operation.name"] = op;
  if (r.kind === "request") {
    const space = r.route.indexOf(" ");
    a["http.request.method"] = r.route.slice(0, space);
    a["http.route"] = r.route.slice(space + 1);
    a["http.response.status_code"] = r.status;
  } else a["inferd.job.kind"] = r.route;
  if (r.keyId) a["inferd.key"] = r.keyId;
  if (r.assignmentId) a["inferd.replica"] = r.assignmentId;
  if (r.workerId) a["inferd.worker"] = r.workerId;
  if (r.hostId) a["inferd.host"] = r.hostId;
  if (r.errorCode) a["error.type"] = r.errorCode;
  if (r.queueMs !== null) a["inferd.queue_ms"] = r.queueMs;
  if (r.ttftMs !== null) a["inferd.ttft_ms"] = r.ttftMs;
  return a;
}

/** Turns finished timelines into OTel spans and sends them in batches. */
class OtlpExporter implements TraceExporter {
  private ids = new PresetIds();
  private provider: TracerProvider;
  private tracer: Tracer;

  constructor(exporter: SpanExporter, serviceName: string, version: string, delayMs: number | undefined) {
    this.provider = new TracerProvider({
      resource: resourceFromAttributes({ "service.name": serviceName, "service.version": version }),
      idGenerator: this.ids,
      spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis: delayMs })],
    });
    this.tracer = this.provider.getTracer("inferd", version);
  }

  export(r: RequestRecord, tl: Timeline): void {
    const t = tl.trace;
    if (!t) return;
    let parent: Context = ROOT_CONTEXT;
    if (t.parentId) {
      parent = trace.setSpanContext(ROOT_CONTEXT, {
        traceId: t.traceId,
        spanId: t.parentId,
        traceFlags: parseInt(t.flags, 16),
        isRemote: true,
        traceState: t.state ? new TraceState(t.state) : undefined,
      });
    } else this.ids.traceId = t.traceId;
    const name = r.kind === "job" ? `job ${r.route}` : r.route;
    const root = this.tracer.startSpan(
      name,
      { kind: r.kind === "job" ? SpanKind.CONSUMER : SpanKind.SERVER, startTime: r.at, attributes: rootAttributes(r) },
      parent,
    );
    if (r.status >= 500 || r.errorCode)
      root.setStatus({ code: SpanStatusCode.ERROR, message: r.errorCode ?? `status ${r.status}` });
    const under = trace.setSpan(ROOT_CONTEXT, root);
    const dispatches = r.spans.filter((s) => s.name === "dispatch");
    let end = r.totalMs;
    for (const s of r.spans) {
      end = Math.max(end, s.end);
      // The last dispatch is the one the runtime answered: it keeps the span id sent in traceparent.
      if (s === dispatches[dispatches.length - 1] && tl.dispatchSpanId) this.ids.spanId = tl.dispatchSpanId;
      const span = this.tracer.startSpan(
        s.name,
        {
          kind: s.name === "dispatch" ? SpanKind.CLIENT : SpanKind.INTERNAL,
          startTime: r.at + s.start,
          attributes: s.attrs,
        },
        under,
      );
      if (s.attrs?.error) span.setStatus({ code: SpanStatusCode.ERROR, message: String(s.attrs.error) });
      span.end(r.at + s.end);
    }
    root.end(r.at + end);
  }

  async shutdown(): Promise<void> {
    await this.provider.shutdown();
  }
}

/**
 * The OTLP exporter the environment asks for: `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL` or
 * `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf` by default, `http/json`; `grpc` is not offered and
 * falls back to `http/protobuf` with a warning), `OTEL_SERVICE_NAME` (default `inferd`),
 * `OTEL_BSP_SCHEDULE_DELAY` (ms between batches, default 5000).
 */
export async function startOtlpExporter(
  env: Record<string, string | undefined>,
  version: string,
): Promise<TraceExporter> {
  let protocol = env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL || env.OTEL_EXPORTER_OTLP_PROTOCOL || "http/protobuf";
  if (protocol !== "http/json" && protocol !== "http/protobuf") {
    log.warn(`OTEL_EXPORTER_OTLP_PROTOCOL=${protocol} is not supported; traces go out as http/protobuf`);
    protocol = "http/protobuf";
  }
  const { OTLPTraceExporter } =
    protocol === "http/json"
      ? await import("@opentelemetry/exporter-trace-otlp-http")
      : await import("@opentelemetry/exporter-trace-otlp-proto");
  const delay = Number(env.OTEL_BSP_SCHEDULE_DELAY);
  return new OtlpExporter(
    new OTLPTraceExporter(),
    env.OTEL_SERVICE_NAME || "inferd",
    version,
    Number.isFinite(delay) && delay > 0 ? delay : undefined,
  );
}
