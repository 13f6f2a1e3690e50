import { AppError } from "../errors";
import { classOf, SYNC, type Dispatcher, type Slot, type Target, type Ticket, type Upstream } from "../dispatch/queue";
import { prefixAffinity } from "../dispatch/prefix";
import { countsOf } from "../dispatch/lora";
import { meteredStream, usageOfText, type Usage } from "./meter";
import { pipeTranslator, type StreamTranslator } from "./stream-pipe";
import { runtimeError, type DispatchMarks, type Timeline } from "../tracing/timeline";

/** Where a forwarded request's usage and outcome are counted (a `RequestMeter`). */
export interface Accounting {
  /** The wait for a slot (ms), once a replica took the request. */
  queueMs: number;
  /** When the first byte came (see `firstByte`). */
  firstAt: number | null;
  /** The first byte was a stream's first token. */
  streamed: boolean;
  /** Ends the request (`errorCode`: why it failed, when known). */
  record(usage: Usage, ok: boolean, errorCode?: string): void;
  /** The request's timeline, where the answer is teed while its workload's capture is on. */
  readonly timeline?: Timeline;
}

/** Notes the first token of a stream (`stream`), or a whole answer's response headers, now: the first note counts. */
export function firstByte(acct: Pick<Accounting, "firstAt" | "streamed">, stream = false): void {
  if (acct.firstAt !== null) return;
  acct.firstAt = performance.now();
  acct.streamed = stream;
}

/**
 * The headers of the client's answer: the runtime's content type (`type`, read once), cache
 * control and Retry-After (an external provider's 429), the only ones worth passing on (its request
 * id is inferd's own, set by the app), over `extra`.
 */
function responseHeaders(upstream: Response, type: string | null, extra: Record<string, string> = {}): Headers {
  const h = new Headers(extra);
  if (type) h.set("content-type", type);
  const cache = upstream.headers.get("cache-control");
  if (cache) h.set("cache-control", cache);
  if (upstream.status === 429 || upstream.status === 503) {
    const after = upstream.headers.get("retry-after");
    if (after) h.set("retry-after", after);
  }
  return h;
}

/**
 * A runtime's 404 to a route it may not serve (`/v1/messages`, `/v1/responses`): `missing` when the
 * route is not there (FastAPI's `{"detail":"Not Found"}`, llama-server's "File Not Found", an empty
 * body), not when the route answered that the model does not exist (vLLM's NotFoundError "The model
 * `x` does not exist.", vllm/entrypoints/openai/serving_engine.py `_check_model`), which is the
 * client's answer (`answer`, readable again) and must not make inferd stop asking that route.
 */
export async function routeMissing(r: Response): Promise<{ missing: boolean; answer: Response }> {
  const text = await r.text().catch(() => "");
  const modelSaid =
    /model/i.test(text) && /(does not exist|not found)/i.test(text) && !/"detail"\s*:\s*"Not Found"/.test(text);
  return { missing: !modelSaid, answer: new Response(text, { status: r.status, headers: r.headers }) };
}

/** A 502 for a runtime that could not be reached or broke off. */
export const upstreamFailed = (e: unknown) =>
  new AppError(
    502,
    "upstream_unavailable",
    `the model runtime did not answer: ${e instanceof Error ? e.message : String(e)}`,
  );

/**
 * The catch of a metered dispatch: a failure before any answer (a queue timeout, a full queue, a
 * runtime that broke off) is recorded as a failed request, then thrown on.
 * @example const got = await dispatch(…, acct.timeline).catch(unanswered(acct));
 */
export const unanswered =
  (acct: Accounting) =>
  (e: unknown): never => {
    acct.record({ inputTokens: 0, outputTokens: 0 }, false);
    throw e;
  };

/** A request sent on a granted slot: the runtime's response to relay. */
export type Attempt = (target: Slot["target"], signal: AbortSignal) => Promise<Response>;

/**
 * Sends a request through the workload's queue: waits for a slot, runs `attempt` on that replica,
 * and gives the slot back when the response (or stream) is over or the client leaves. The slot
 * holds for the whole stream, so `concurrency` bounds what a replica runs at once.
 */
export async function dispatchWith(
  dispatcher: Dispatcher,
  workloadId: string,
  signal: AbortSignal,
  attempt: Attempt,
  ticket: Ticket = SYNC,
  tl?: Timeline,
): Promise<{ slot: Slot; upstream: Response; waitedMs: number }> {
  const queuedAt = performance.now();
  // Its model sleeps: the wait is a wake (shown as such on its timeline).
  const waking = tl !== undefined && dispatcher.asleep.has(workloadId);
  for (let tries = 1; ; tries++) {
    const position = tl ? dispatcher.depth(workloadId) : 0;
    const slot = await dispatcher.acquire(workloadId, signal, ticket).catch((e) => {
      if (tl) tl.span("queue", queuedAt - tl.t0, tl.now(), { priority: classOf(ticket), position }), tl.failed(e);
      throw e;
    });
    const hit = ticket.affinity?.length
      ? dispatcher.prefix.granted(workloadId, ticket.affinity, slot.target.id)
      : undefined;
    const granted = performance.now();
    const waitedMs = granted - queuedAt;
    if (waking) tl!.span("wake", queuedAt - tl!.t0, granted - tl!.t0);
    const marks = tl ? markDispatch(tl, queuedAt, granted, slot.target, ticket, position, hit) : undefined;
    try {
      let target = tl?.trace ? traced(slot.target, tl.traceparent(), tl.trace.state) : slot.target;
      // The caller's own signal goes with the runtime's request (a client leaving, a job cancelled,
      // aborts it); a stream the client cancels is cut by cancelling the runtime's body.
      if (ticket.adapter) target = await withAdapter(dispatcher, slot, target, ticket.adapter.name, signal, tl);
      const upstream = await attempt(target, signal);
      if (marks) {
        marks.answeredAt = performance.now();
        marks.failedWith = upstream.ok ? 0 : upstream.status;
        tl!.status = upstream.status;
      }
      return { slot, upstream, waitedMs };
    } catch (e) {
      slot.release();
      const err = signal.aborted
        ? new AppError(499, "client_closed", "the client went away")
        : e instanceof AppError
          ? e
          : upstreamFailed(e);
      tl?.closeDispatch(undefined, err.code);
      // Its worker was lost before answering: nothing reached the client, so run it elsewhere.
      if (!signal.aborted && err.code === "worker_lost" && tries < MAX_TRIES) continue;
      tl?.failed(err);
      throw err;
    }
  }
}

/**
 * Marks on the timeline a slot granted on `target`: the queue wait (its class and place in line
 * when it came) and the dispatch (host, worker, replica, how it was routed), made spans at its end.
 */
function markDispatch(
  tl: Timeline,
  queuedAt: number,
  grantedAt: number,
  target: Target,
  ticket: Ticket,
  position: number,
  hit: boolean | undefined,
): DispatchMarks {
  const attrs: Record<string, string | number | boolean> = {
    replica: target.id,
    worker: target.workerId,
    routing: hit === undefined ? "least_loaded" : "prefix",
  };
  if (hit !== undefined) attrs.prefix_hit = hit;
  tl.placement = { assignmentId: target.id, workerId: target.workerId };
  tl.dispatch = {
    queuedAt,
    grantedAt,
    queue: { priority: classOf(ticket), position },
    attrs,
    answeredAt: 0,
    failedWith: 0,
    spanned: 0,
  };
  return tl.dispatch;
}

/**
 * `target` asking its runtime for LoRA adapter `name`: loaded first when the runtime does not hold
 * it (the load is the request's `adapter_load` span), counted in the workload's LoRA stats, and kept
 * in use until the slot is given back. A replica without adapters is a 503.
 */
async function withAdapter(
  dispatcher: Dispatcher,
  slot: Slot,
  target: Target,
  name: string,
  signal: AbortSignal,
  tl?: Timeline,
): Promise<Target> {
  const lora = slot.target.lora;
  if (!lora)
    throw new AppError(503, "adapter_unavailable", `this replica has no LoRA adapters yet; retry in a moment`, {
      "retry-after": "5",
    });
  const counts = countsOf(dispatcher.lora, slot.target.workloadId);
  const t0 = performance.now();
  const { hit, loaded, done } = await lora.acquire(name, signal);
  counts.requests++;
  if (hit) counts.hits++;
  // Its wait for a load (its own, or one under way that it joined) is on its timeline.
  else if (tl) tl.span("adapter_load", t0 - tl.t0, tl.now(), { adapter: name });
  if (loaded) {
    counts.loads++;
    if (counts.loadMs.push(performance.now() - t0) > 1000) counts.loadMs.shift();
  }
  const release = slot.release;
  slot.release = () => {
    done();
    slot.release = release;
    release();
  };
  const t: Target = Object.create(target);
  t.send = (req, s) => target.send({ ...req, select: (body) => lora.select(body, name) }, s);
  return t;
}

/** `target` with every request it sends carrying the trace context (the runtime's own spans join the trace). */
function traced(target: Target, traceparent: string, tracestate: string | null): Target {
  const t: Target = Object.create(target);
  const trace: Record<string, string> = tracestate ? { traceparent, tracestate } : { traceparent };
  t.send = (req, signal) => target.send({ ...req, headers: { ...req.headers, ...trace } }, signal);
  return t;
}

/**
 * `ticket` with the prompt's prefix affinity (see ../dispatch/prefix.ts) when the workload routes by
 * prefix and has two ready replicas or more; otherwise as it was, and nothing is hashed.
 */
export function withAffinity(
  dispatcher: Dispatcher,
  w: { id: string; routing: string },
  body: Record<string, unknown> | undefined,
  ticket: Ticket = SYNC,
): Ticket {
  if (!body || w.routing !== "prefix" || dispatcher.replicaCount(w.id) < 2) return ticket;
  const affinity = prefixAffinity(body);
  return affinity.length ? { ...ticket, affinity } : ticket;
}

/** How many replicas a request may be tried on when workers are lost under it. */
const MAX_TRIES = 3;

/** `dispatchWith` for a single upstream request. */
export const dispatch = (
  dispatcher: Dispatcher,
  workloadId: string,
  req: Upstream,
  signal: AbortSignal,
  ticket: Ticket = SYNC,
  tl?: Timeline,
) => dispatchWith(dispatcher, workloadId, signal, (t, s) => t.send(req, s), ticket, tl);

/** True for an SSE response. */
export const isEventStream = (r: Response) => (r.headers.get("content-type") ?? "").includes("text/event-stream");

/** A `"model": "…"` member of a JSON text, at any depth (a key inside a string value is escaped, so never matches). */
const MODEL_FIELD = /"model"\s*:\s*"((?:[^"\\]|\\.)*)"/g;

/**
 * A function that sets every `model` member of a JSON text (a body, or one SSE event) to `name`
 * without parsing it; a text that already says `name` (the usual case) comes back as it was.
 * @example modelNamer("tiny")('data: {"model":"/d/models/x.gguf","choices":[]}\n\n') // → 'data: {"model":"tiny","choices":[]}\n\n'
 */
function modelNamer(name: string): (text: string) => string {
  const json = JSON.stringify(name);
  const inner = json.slice(1, -1);
  const rename = (m: string, v: string) => (v === inner ? m : `"model":${json}`);
  return (text) => {
    const at = text.indexOf('"model"');
    if (at < 0) return text;
    // Most texts already say `name`: they are only searched, and no new text is made.
    MODEL_FIELD.lastIndex = at;
    for (let m = MODEL_FIELD.exec(text); m; m = MODEL_FIELD.exec(text))
      if (m[1] !== inner) return text.replace(MODEL_FIELD, rename); // replace starts from 0
    return text;
  };
}

/**
 * Relays a runtime's SSE stream to the client through translator `t` (Messages or Responses events),
 * metered by the translator's own count: the stream is decoded once, by the translator. Ends as
 * `relay` does: the slot given back, usage and outcome recorded, the answer captured as it goes.
 */
export function relayTranslated(
  got: { slot: Slot; upstream: Response; waitedMs: number },
  acct: Accounting,
  t: StreamTranslator & { readonly usage: Usage },
): Response {
  const { slot, upstream } = got;
  acct.queueMs = got.waitedMs;
  const capture = acct.timeline?.capture;
  capture?.answerType("text/event-stream");
  const body = pipeTranslator(upstream.body!, t, {
    onFirst: () => firstByte(acct, true),
    tee: capture ? (bytes) => capture.keepAnswer(bytes) : undefined,
    onEnd: (outcome) => {
      slot.release();
      acct.record(
        t.usage,
        outcome === "done",
        outcome === "cancelled" ? "client_closed" : outcome === "error" ? "upstream_unavailable" : undefined,
      );
    },
  });
  return new Response(body, {
    status: 200,
    headers: { "content-type": "text/event-stream", "cache-control": "no-cache", "x-accel-buffering": "no" },
  });
}

/**
 * Turns a runtime response into the client's: streams pass through event by event (metered), other
 * bodies are read, metered and answered with the runtime's status and content type. With `model`
 * (the workload's model name, first in `/v1/models`, whichever name or alias the client used),
 * every `model` member of the answer says that name, whatever the runtime calls its model. The
 * slot is released when the body is done.
 */
export async function relay(
  got: { slot: Slot; upstream: Response; waitedMs: number },
  acct: Accounting,
  opts: { dropUsageOnlyChunks?: boolean; model?: string } = {},
): Promise<Response> {
  const { slot, upstream } = got;
  acct.queueMs = got.waitedMs;
  const rename = opts.model === undefined ? undefined : modelNamer(opts.model);
  const capture = acct.timeline?.capture;
  const type = upstream.headers.get("content-type");
  capture?.answerType(type);
  if (type?.includes("text/event-stream") && upstream.body) {
    const body = meteredStream(upstream.body, {
      dropUsageOnlyChunks: !!opts.dropUsageOnlyChunks,
      rename,
      onFirst: () => firstByte(acct, true),
      tee: capture ? (bytes) => capture.keepAnswer(bytes) : undefined,
      onEnd: (usage, outcome) => {
        slot.release();
        acct.record(
          usage,
          outcome === "done" && upstream.ok,
          outcome === "cancelled" ? "client_closed" : outcome === "error" ? "upstream_unavailable" : undefined,
        );
      },
    });
    return new Response(body, {
      status: upstream.status,
      headers: responseHeaders(upstream, type, { "cache-control": "no-cache", "x-accel-buffering": "no" }),
    });
  }
  firstByte(acct);
  let bytes: ArrayBuffer;
  try {
    bytes = await upstream.arrayBuffer();
  } catch (e) {
    acct.record({ inputTokens: 0, outputTokens: 0 }, false, "upstream_unavailable");
    throw upstreamFailed(e);
  } finally {
    slot.release();
  }
  let usage: Usage = { inputTokens: 0, outputTokens: 0 };
  let body: ArrayBuffer | string = bytes;
  if (type?.includes("json")) {
    const text = utf8.decode(bytes);
    usage = usageOfText(text) ?? usage;
    const renamed = rename?.(text);
    if (renamed !== undefined && renamed !== text) body = renamed;
  }
  capture?.keepAnswer(body);
  if (!upstream.ok) noteRuntimeError(acct.timeline, bytes);
  acct.record(usage, upstream.ok);
  return new Response(body, { status: upstream.status, headers: responseHeaders(upstream, type) });
}

const utf8 = new TextDecoder();

/** Keeps on the timeline why a runtime's error answer (its body, text or bytes) failed: the runtime's own code and message. */
export function noteRuntimeError(tl: Timeline | undefined, body: string | ArrayBuffer): void {
  if (!tl) return;
  const text = typeof body === "string" ? body : utf8.decode(body.byteLength > 64_000 ? body.slice(0, 64_000) : body);
  const { code, message } = runtimeError(text.length > 64_000 ? text.slice(0, 64_000) : text);
  tl.errorCode = code ?? `runtime_${tl.status || "error"}`;
  tl.errorMessage = message;
}
