/**
 * What the request inspector keeps of one finished data-plane request or job run: the figures a
 * workload's page lists and the request's timeline (its spans, as also exported to OpenTelemetry
 * when tracing is on). The data plane fills a record where a request ends; the sink stores it off
 * the request path (src/inspector/log.ts writes `request_log` and `request_bodies` in batches).
 */

/** One span of a timeline; times are ms from the request's arrival. */
export interface SpanRecord {
  name: string;
  start: number;
  end: number;
  attrs?: Record<string, string | number | boolean>;
}

/** Bodies kept while the workload's capture is on (`capture_until` in the future). */
export interface CapturedBodies {
  requestType: string | null;
  request: Uint8Array | null;
  responseType: string | null;
  response: Uint8Array | null;
  /** A body was longer than the capture limit and was cut. */
  truncated: boolean;
}

/** A workload a request was tried on before it fell back to the next one. */
export interface FallbackTry {
  workload_id: string;
  status: number;
  error_code: string | null;
}

/** One finished request or job run. */
export interface RequestRecord {
  /** inferd's own request id (never a client's), or the job id for a job run: the record's key. */
  id: string;
  /** The id the client's answer carried (`x-request-id`, its own when it sent one); null for a job run. */
  requestId: string | null;
  /** Arrival, epoch ms. */
  at: number;
  /** The workload that answered; "" for a request refused before one was chosen (a key's limit, a quota). */
  workloadId: string;
  projectId: string;
  keyId: string | null;
  kind: "request" | "job";
  /** What was asked, e.g. "POST /v1/chat/completions" or the job's kind. */
  route: string;
  model: string | null;
  status: number;
  errorCode: string | null;
  /** Why it failed, in words (inferd's message or the runtime's own, cut short); null when it did not. */
  errorMessage: string | null;
  /** Where it came from: null for an API client, `playground` for the dashboard's playground. */
  source: "playground" | null;
  /** The workloads tried before the one that answered (a fallback route), in order; empty when the first answered. */
  fellBackFrom: readonly FallbackTry[];
  tokensIn: number | null;
  tokensOut: number | null;
  queueMs: number | null;
  ttftMs: number | null;
  totalMs: number;
  assignmentId: string | null;
  workerId: string | null;
  hostId: string | null;
  traceId: string | null;
  spans: SpanRecord[];
  bodies?: CapturedBodies;
}

/** Where finished requests go: `add` is called on the request path and must not wait or throw. */
export interface RequestSink {
  add(record: RequestRecord): void;
  /** Writes what gathered (the inspector's reads call it, so a request just ended is found). */
  flush?(): Promise<void>;
}
