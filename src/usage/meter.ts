/**
 * The one metering path: every inference request and job gets a `RequestMeter` when it is accepted
 * (its clock starts there), marks what happens to it (the wait for a slot, the first token or the
 * response headers) and ends exactly once; `Metering.finish` then records it everywhere — the key's
 * and the workload's usage, the daily usage, the limits, the Prometheus histograms and the
 * dashboard's series.
 */
import { Histogram, labelKey, LATENCY_BUCKETS, RATE_BUCKETS, TTFT_BUCKETS } from "./histogram";
import type { Ended, Timeline, Tracing } from "../tracing/timeline";
import { LoopLag } from "./lag";

/** Token counts found in a response, in either OpenAI or Anthropic naming. */
export interface Usage {
  inputTokens: number;
  outputTokens: number;
}

/** A request or job as it ended. Times in milliseconds from its acceptance. */
export interface Finished extends Ended {
  kind: "sync" | "job";
  usage: Usage;
  /** A failed try on a route that goes on to a fallback workload: counted only if it turns out to be the answer. */
  mayFallBack?: boolean;
}

/** A request refused before it reached a workload's runtime (auth, a key's limit, a quota, a switched-off route…). */
export interface Refusal {
  keyId: string | null;
  /** Its project, when its key says (an unknown key's request has none). */
  projectId: string | null;
  status: number;
  code: string;
  message: string;
}

/** Where a finished request is counted (besides the histograms). */
export interface MeterSinks {
  /** Key and workload usage, and the daily usage table. */
  usage: {
    record(keyId: string, delta: { inputTokens: number; outputTokens: number }): void;
    recordWorkload(
      workloadId: string,
      delta: { requests: number; errors: number; inputTokens: number; outputTokens: number },
    ): void;
    recordDaily(f: Finished): void;
  };
  /** The dashboard's time series. */
  series: { observe(f: Finished): void };
  /** Limits: concurrency slots given back, tokens charged. */
  limits?: { finished(f: Finished): void };
  /** The request inspector and traces: a request's timeline ends here (../tracing/timeline.ts `Tracing`). */
  timelines: Pick<Tracing, "finished">;
}

/**
 * One request's clock: started when it was accepted. What happens to it on the way is noted in its
 * fields (the wait for a slot, the first byte) by whoever sees it; it ends once, in `record`.
 */
export class RequestMeter {
  /** The wait for a slot (ms), noted once a replica took the request. */
  queueMs = 0;
  /**
   * When (`performance.now()`) the first token of a stream, or any other answer's response headers,
   * came; null until then (the first note counts: see ../dataplane/forward.ts `firstByte`).
   */
  firstAt: number | null = null;
  /** The answer is a stream: its first byte is a first token. */
  streamed = false;
  private ended = false;

  constructor(
    private metering: Metering,
    readonly workloadId: string,
    readonly projectId: string,
    readonly keyId: string | null,
    readonly kind: "sync" | "job",
    readonly startedAt = performance.now(),
    /** Given back when the request ends (the key's concurrency slot). */
    private release?: () => void,
    /** The request's timeline (none for a request the inspector does not list, e.g. the playground's). */
    readonly timeline?: Timeline,
  ) {
    this.mayFallBack = timeline?.mayFallBack ?? false;
  }

  /** The route has a fallback after this workload (read from the timeline when the try began). */
  private readonly mayFallBack: boolean;

  /** Ends the request with its usage and outcome (`errorCode`: why it failed, when known); later calls do nothing. */
  record(usage: Usage, ok: boolean, errorCode?: string): void {
    if (this.ended) return;
    this.ended = true;
    this.release?.();
    const end = performance.now();
    const firstByteMs = this.firstAt === null ? null : this.firstAt - this.startedAt;
    const f: Finished = {
      mayFallBack: !ok && this.mayFallBack,
      workloadId: this.workloadId,
      projectId: this.projectId,
      keyId: this.keyId,
      kind: this.kind,
      ok,
      usage,
      durationMs: end - this.startedAt,
      queueMs: this.queueMs,
      firstByteMs,
    };
    this.metering.finish(f);
    const tl = this.timeline;
    if (!tl) return;
    if (this.streamed && firstByteMs !== null) tl.streamed = true;
    this.metering.ended(tl, f, this.startedAt - tl.t0, errorCode);
  }
}

/** The histograms every request ends in, and the sinks it is counted in. */
export class Metering {
  readonly duration = new Histogram(
    "inferd_request_duration_seconds",
    "Time from a request's arrival (a job's start) to its last byte, per workload and kind.",
    LATENCY_BUCKETS,
  );
  readonly firstToken = new Histogram(
    "inferd_time_to_first_token_seconds",
    "Time from arrival to the first token of a stream, or to the response headers.",
    TTFT_BUCKETS,
  );
  readonly queueWait = new Histogram(
    "inferd_queue_wait_seconds",
    "Time a request waited in its workload's queue for a slot.",
    LATENCY_BUCKETS,
  );
  readonly tokenRate = new Histogram(
    "inferd_output_tokens_per_second",
    "Output tokens per second of generation (after the first token).",
    RATE_BUCKETS,
  );
  /** The event loop's stalls (started by the server). */
  readonly loop = new LoopLag();

  constructor(private sinks: MeterSinks) {}

  /** A meter for a request accepted now (or at `startedAt`, a `performance.now()` time), with its timeline when it has one. */
  begin(
    w: { id: string; project_id: string },
    keyId: string | null,
    kind: "sync" | "job",
    startedAt?: number,
    release?: () => void,
    timeline?: Timeline,
  ): RequestMeter {
    return new RequestMeter(this, w.id, w.project_id, keyId, kind, startedAt, release, timeline);
  }

  /** Requests refused before a runtime, by `<project id> <key id> <code>` (ids "" when unknown), for `/metrics`. */
  readonly refusals = new Map<string, number>();

  /**
   * A request's timeline ended (after `finish`); its meter's clock started at `start` (ms from its
   * arrival), and `errorCode` says why it failed when the meter knows. Its record and trace go out.
   * A failed try that may fall back is held on the timeline until the route knows whether it did;
   * it is counted then.
   */
  ended(tl: Timeline, f: Finished, start: number, errorCode: string | undefined): void {
    this.sinks.timelines.finished(tl, f, start, errorCode, f.mayFallBack ? () => this.count(f) : undefined);
  }

  /**
   * A data-plane request refused before it reached a runtime (the app's error path): counted for its
   * key (an error in its daily usage and in `/metrics`) and, with its timeline, recorded for the
   * inspector with the reason (a request whose key is unknown has no project: counted only).
   */
  refused(r: Refusal, tl?: Timeline): void {
    const k = `${r.projectId ?? ""} ${r.keyId ?? ""} ${r.code}`;
    this.refusals.set(k, (this.refusals.get(k) ?? 0) + 1);
    if (!r.projectId || !tl || tl.ended) return;
    tl.span("refused", 0, tl.now(), { error: r.code });
    tl.status = r.status;
    tl.errorCode = r.code;
    tl.errorMessage = r.message;
    const f: Finished = {
      workloadId: tl.workloadId ?? "",
      projectId: r.projectId,
      keyId: r.keyId,
      kind: "sync",
      ok: false,
      usage: { inputTokens: 0, outputTokens: 0 },
      durationMs: tl.now(),
      queueMs: 0,
      firstByteMs: null,
    };
    if (r.keyId) this.sinks.usage.recordDaily(f);
    this.sinks.timelines.finished(tl, f);
  }

  /** Records a finished request everywhere (a failed try that may fall back: only its limits, for now). */
  finish(f: Finished): void {
    if (f.mayFallBack) this.sinks.limits?.finished(f);
    else {
      this.count(f);
      this.sinks.limits?.finished(f);
    }
  }

  /** Each workload's histogram labels and their key, per kind (made once, not per request). */
  private labels = new Map<
    string,
    Partial<Record<Finished["kind"], { labels: Record<string, string>; key: string }>>
  >();

  /** Counts a finished request in the histograms, usage and series. */
  private count(f: Finished): void {
    let kinds = this.labels.get(f.workloadId);
    if (!kinds) this.labels.set(f.workloadId, (kinds = {}));
    let made = kinds[f.kind];
    if (!made) {
      const labels = { workload: f.workloadId, kind: f.kind };
      kinds[f.kind] = made = { labels, key: labelKey(labels) };
    }
    const { labels, key } = made;
    this.duration.observe(labels, f.durationMs / 1000, key);
    this.queueWait.observe(labels, f.queueMs / 1000, key);
    if (f.firstByteMs !== null) this.firstToken.observe(labels, f.firstByteMs / 1000, key);
    const genMs = f.durationMs - (f.firstByteMs ?? f.queueMs);
    if (f.usage.outputTokens > 0 && genMs > 0)
      this.tokenRate.observe(labels, f.usage.outputTokens / (genMs / 1000), key);
    const { usage } = this.sinks;
    if (f.keyId) usage.record(f.keyId, f.usage);
    usage.recordWorkload(f.workloadId, {
      requests: 1,
      errors: f.ok ? 0 : 1,
      inputTokens: f.usage.inputTokens,
      outputTokens: f.usage.outputTokens,
    });
    usage.recordDaily(f);
    this.sinks.series.observe(f);
  }

  /** Forgets a deleted workload's histograms. */
  drop(workloadId: string): void {
    this.labels.delete(workloadId);
    for (const h of [this.duration, this.firstToken, this.queueWait, this.tokenRate])
      h.drop((l) => l.workload === workloadId);
  }
}
