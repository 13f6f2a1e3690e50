/**
 * Whether traces go out: when `OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is
 * set, finished timelines (./timeline.ts) are exported as OpenTelemetry traces. The SDK (./otel.ts)
 * is imported only then: with tracing off nothing of it loads.
 */
import type { TraceExporter } from "./timeline";

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
