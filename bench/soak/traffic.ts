/**
 * The soak's clients: closed loops that send synchronous chat completions, streaming chat
 * completions (read to the end) and async jobs (each with a unique `context` id) for the whole run,
 * and record every outcome as it happened; the report classifies them afterwards against the faults.
 * With several hosts each client takes them in turn, request by request (as behind a round-robin
 * balancer that does not check health): a host that is down refuses its share until it is back.
 */

/** What a client sends. */
export type Kind = "chat" | "stream" | "job";

/** One request as the client saw it. */
export interface Outcome {
  kind: Kind;
  workload: string;
  /** Which host it was sent to (index into `TrafficTarget.urls`). */
  host: number;
  /** Epoch ms when it was sent and when it was over (body read to the end). */
  t0: number;
  t1: number;
  /** HTTP status; undefined when no response came (connection refused, reset, timeout). */
  status?: number;
  /** `error.code` of an error body, or the code of a stream's error event. */
  code?: string;
  /** The fetch or body-read error, when there was one. */
  error?: string;
  /** Streams: `done` when `data: [DONE]` arrived; else why it was cut (an error event's code, `broken`, `no_done`). */
  stream?: string;
  /** Jobs: the `context.soak` id sent, and the job id of a 202. */
  ctx?: string;
  jobId?: string;
}

/** Where the clients send. */
export interface TrafficTarget {
  /** Each host's URL (stable across restarts: same port). */
  urls: string[];
  project: string;
  workloads: string[];
  liveKey: string;
  /** A prefix that makes this run's context ids unique. */
  runId: string;
}

/** How many clients of each kind, and how long each waits between its requests (ms). */
export interface TrafficPlan {
  clients: Record<Kind, number>;
  thinkMs: Record<Kind, number>;
}

/** A request that takes longer than this is a hang (counted as an unexplained error). */
export const REQUEST_TIMEOUT_MS = 30_000;
/** After a request that got no response, a client waits this long before the next (inferd may be down). */
const RETRY_PAUSE_MS = 200;

const errorText = (e: unknown) => (e instanceof Error ? `${e.name}: ${e.message}` : String(e));

/** `error.code` of a JSON error body, if any. */
function codeOf(text: string): string | undefined {
  try {
    const body = JSON.parse(text) as { error?: { code?: string; type?: string } };
    return body.error?.code ?? body.error?.type ?? undefined;
  } catch {
    return undefined;
  }
}

/** How an SSE body ended: `done` with `data: [DONE]`, an error event's code, or `no_done`. */
export function streamEnd(text: string): string {
  let done = false;
  for (const line of text.split(/\r?\n/)) {
    if (!line.startsWith("data:")) continue;
    const data = line.slice(5).trim();
    if (data === "[DONE]") done = true;
    else if (data.includes('"error"')) {
      try {
        const err = (JSON.parse(data) as { error?: { code?: string } }).error;
        if (err) return err.code ?? "error_event";
      } catch {}
    }
  }
  return done ? "done" : "no_done";
}

/** Sends one request of `kind` and records what happened. */
async function sendOne(t: TrafficTarget, kind: Kind, workload: string, host: number, seq: number): Promise<Outcome> {
  const o: Outcome = { kind, workload, host, t0: Date.now(), t1: 0 };
  const base = `${t.urls[host]}/endpoint/${t.project}/${workload}`;
  const messages = [{ role: "user", content: `soak ${kind} ${seq} one two three four five six` }];
  let path = "/v1/chat/completions";
  let body: unknown = { messages, max_tokens: 8, stream: kind === "stream" };
  if (kind === "job") {
    o.ctx = `${t.runId}-${workload}-${seq}`;
    path = "/jobs";
    body =
      seq % 2 === 0
        ? { kind: "chat", body: { messages, max_tokens: 8 }, context: { soak: o.ctx } }
        : { kind: "embeddings", body: { input: `soak job ${seq}` }, context: { soak: o.ctx } };
  }
  try {
    const r = await fetch(base + path, {
      method: "POST",
      headers: { authorization: `Bearer ${t.liveKey}`, "content-type": "application/json" },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    o.status = r.status;
    let text: string;
    try {
      text = await r.text();
    } catch (e) {
      o.error = errorText(e);
      if (kind === "stream" && r.ok) o.stream = "broken";
      return o;
    }
    if (!r.ok) o.code = codeOf(text);
    else if (kind === "stream") {
      o.stream = streamEnd(text);
      if (o.stream !== "done" && o.stream !== "no_done") o.code = o.stream;
    } else if (kind === "job" && r.status === 202) o.jobId = (JSON.parse(text) as { job_id?: string }).job_id;
  } catch (e) {
    o.error = errorText(e);
  } finally {
    o.t1 = Date.now();
  }
  return o;
}

/** Running clients: `stop()` lets each finish its current request, then resolves with every outcome. */
export interface Traffic {
  outcomes: Outcome[];
  stop(): Promise<Outcome[]>;
}

/** Starts the clients of `plan`, spreading each kind over the target's workloads and hosts. */
export function startTraffic(t: TrafficTarget, plan: TrafficPlan): Traffic {
  const outcomes: Outcome[] = [];
  let stopped = false;
  let seq = 0;
  const client = async (kind: Kind, index: number) => {
    for (let n = index; !stopped; n++) {
      // Every workload on every host in turn (the host changes once per round of workloads).
      const host = Math.floor(n / t.workloads.length) % t.urls.length;
      const o = await sendOne(t, kind, t.workloads[n % t.workloads.length], host, seq++);
      outcomes.push(o);
      if (!stopped) await Bun.sleep(o.status === undefined ? RETRY_PAUSE_MS : plan.thinkMs[kind]);
    }
  };
  const all = (Object.keys(plan.clients) as Kind[]).flatMap((kind) =>
    Array.from({ length: plan.clients[kind] }, (_, i) => client(kind, i)),
  );
  return {
    outcomes,
    stop: async () => {
      stopped = true;
      await Promise.all(all);
      return outcomes;
    },
  };
}
