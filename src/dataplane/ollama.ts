/**
 * The Ollama API on both bases (`/endpoint/<project>/api/…`, routed by `model`, and
 * `/endpoint/<project>/<workload>/api/…`), for Ollama clients pointed at inferd: chat, generate,
 * embed and embeddings are translated to the runtime's OpenAI-style routes (./ollama-translate.ts,
 * ./ollama-stream.ts), or passed through to an `ollama` backend's own `/api/<name>`; tags, ps, show
 * and version answer from what the key may call. Streams are NDJSON, Ollama's default unless
 * `stream: false`; errors are `{"error": "<message>"}` (src/errors.ts shapes thrown ones so).
 */
import { keyOf } from "../auth/service";
import { AppError } from "../errors";
import { VERSION } from "../version";
import type { Workload } from "../workloads/service";
import type { JsonObject } from "./anthropic";
import {
  dispatch,
  firstByte,
  noteRuntimeError,
  unanswered,
  upstreamFailed,
  withAffinity,
  type Accounting,
} from "./forward";
import type { Usage } from "./meter";
import { knownModelOf, psOf, showOf, tagsOf } from "./ollama-models";
import { ChatStreamToOllama, meteredNdjson, sseToNdjson } from "./ollama-stream";
import {
  chatAnswerOf,
  chatRequestOf,
  countsOf,
  embedAnswerOf,
  embedRequestOf,
  generateAnswerOf,
  generateRequestOf,
  loadAnswerOf,
  ollamaErrorOf,
  streams,
  type RuntimeCall,
  type Timing,
} from "./ollama-translate";
import { callOf } from "../call";
import { accounting, syncTicket, readJsonObject, runOnBase, type DataplaneDeps, type ModelLookup } from "./service";
import { routeOf, withAdapterOf, type RouteBase } from "./target";
import type { OllamaRouteName } from "./table";

/** The routes that run on a replica. */
type Inference = "chat" | "generate" | "embed" | "embeddings";

/** What the Ollama routes use: the data plane's dependencies, and inferd's version when given (the app gives it). */
export type OllamaDeps = DataplaneDeps & { version?: string };

const NO_USAGE: Usage = { inputTokens: 0, outputTokens: 0 };

/** One Ollama API route on either base. */
export async function ollamaRoute(
  deps: OllamaDeps,
  request: Request,
  base: RouteBase,
  name: OllamaRouteName,
): Promise<Response> {
  try {
    switch (name) {
      case "tags":
        return Response.json(await tagsOf(deps, request, base));
      case "ps":
        return Response.json(await psOf(deps, request, base));
      case "version":
        // inferd's own version (the app's deps carry it; the build's stamp otherwise, the same string).
        return Response.json({ version: deps.version ?? VERSION });
      case "show":
        return await show(deps, request, base);
      default:
        return await inference(deps, request, base, name);
    }
  } finally {
    deps.bodyBudget.release(request);
  }
}

/**
 * Runs `find` for `model`, and again without a `:latest` tag when that name is unknown: Ollama
 * clients add the tag Ollama itself treats as implied.
 */
const tolerantOfLatest: ModelLookup = async (model, find) => {
  try {
    return await find(model);
  } catch (e) {
    const bare = typeof model === "string" && model.endsWith(":latest") ? model.slice(0, -":latest".length) : undefined;
    if (bare && e instanceof AppError && e.status < 500) return find(bare);
    throw e;
  }
};

/** The toggle and the name of an inference route, for `checkRoute`. */
const toggleOf = (name: Inference) => (name === "embed" || name === "embeddings" ? "embeddings" : "chat");

/** chat, generate, embed, embeddings: routed like every data-plane request (./target.ts), then run on the workload. */
const inference = (deps: DataplaneDeps, request: Request, base: RouteBase, name: Inference) =>
  runOnBase(
    deps,
    request,
    base,
    toggleOf(name),
    `POST /api/${name}`,
    (w, json) => inferOn(deps, request, w, json, name),
    tolerantOfLatest,
  );

/** The OpenAI-style call an Ollama request becomes on a non-Ollama runtime. */
function runtimeCallOf(name: Inference, json: JsonObject, servedModel: string): RuntimeCall {
  if (name === "chat") return chatRequestOf(json, servedModel);
  if (name === "generate") return generateRequestOf(json, servedModel);
  return embedRequestOf(json, servedModel, name === "embeddings");
}

/** True when a generation request has nothing to generate: Ollama then only loads the model. */
function onlyLoads(name: Inference, json: JsonObject): boolean {
  if (name === "chat")
    return (
      json.messages === undefined ||
      json.messages === null ||
      (Array.isArray(json.messages) && json.messages.length === 0)
    );
  if (name === "generate") return !json.prompt && !(Array.isArray(json.images) && json.images.length);
  return false;
}

/**
 * One Ollama request on one workload: answered at once when there is nothing to generate (the
 * model is loaded already), passed through to an Ollama runtime, or translated; metered either way.
 */
async function inferOn(
  deps: DataplaneDeps,
  request: Request,
  w: Workload,
  json: JsonObject,
  name: Inference,
): Promise<Response> {
  const asked = typeof json.model === "string" && json.model && json.model !== "default" ? json.model : w.model_name;
  if ((name === "chat" || name === "generate") && onlyLoads(name, json)) {
    callOf(request).ticket?.release();
    // One JSON object, streamed or not, as Ollama answers it.
    return Response.json(loadAnswerOf(name, asked));
  }
  const stream = (name === "chat" || name === "generate") && streams(json);
  const passthrough = w.backend === "ollama";
  const call = passthrough ? { path: `/api/${name}`, body: json } : runtimeCallOf(name, json, w.model_name);
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: stream ? (passthrough ? "application/x-ndjson" : "text/event-stream") : "application/json",
  };
  headers["x-request-id"] = callOf(request).id;
  const key = keyOf(request);
  const acct = accounting(deps, request, key, w, json);
  const got = await dispatch(
    deps.fleet.dispatcher,
    w.id,
    { path: call.path, method: "POST", headers, body: null, json: call.body },
    request.signal,
    withAffinity(deps.fleet.dispatcher, w, json, withAdapterOf(request, w, syncTicket(key))),
    acct.timeline,
  ).catch(unanswered(acct));
  acct.queueMs = got.waitedMs;
  if (!got.upstream.ok) return runtimeError(got, acct);
  const timing = { arrived: callOf(request).arrivedAt, waited: got.waitedMs };
  const type = got.upstream.headers.get("content-type") ?? "";
  if (stream && got.upstream.body && (type.includes("text/event-stream") || type.includes("ndjson"))) {
    const body = passthrough
      ? got.upstream.body
      : sseToNdjson(got.upstream.body, new ChatStreamToOllama(name as "chat" | "generate", asked, timing));
    return ndjsonAnswer(got, acct, body, passthrough ? asked : undefined);
  }
  return jsonAnswer(got, acct, (answer) => {
    const t: Timing = { ...timing, end: performance.now() };
    if (passthrough)
      return typeof (answer as JsonObject)?.model === "string" ? { ...(answer as JsonObject), model: asked } : answer;
    if (name === "chat") return chatAnswerOf(answer, asked, t);
    if (name === "generate") return generateAnswerOf(answer, asked, t);
    return embedAnswerOf(answer, asked, t, name === "embeddings");
  });
}

/** A dispatched request: the replica's slot and its answer. */
type Got = Awaited<ReturnType<typeof dispatch>>;

/** A runtime's error answer as Ollama's `{error}` with the runtime's status; the slot is freed, the request counted as failed. */
async function runtimeError(got: Got, acct: Accounting): Promise<Response> {
  const text = await got.upstream.text().catch(() => "");
  got.slot.release();
  noteRuntimeError(acct.timeline, text);
  const answer = jsonOut(acct, ollamaErrorOf(got.upstream.status, text), got.upstream.status);
  acct.record(NO_USAGE, false);
  return answer;
}

/** A JSON answer made here; its body is kept while the workload's capture is on (before the meter ends the record). */
function jsonOut(acct: Accounting, value: unknown, status = 200): Response {
  const text = JSON.stringify(value);
  const capture = acct.timeline?.capture;
  if (capture) {
    capture.answerType(JSON_TYPE);
    capture.keepAnswer(text);
  }
  return new Response(text, { status, headers: { "content-type": JSON_TYPE } });
}

const JSON_TYPE = "application/json;charset=utf-8";

/** A whole JSON answer, read, counted (OpenAI `usage` or Ollama counts) and re-shaped. */
async function jsonAnswer(got: Got, acct: Accounting, shape: (answer: unknown) => unknown): Promise<Response> {
  firstByte(acct);
  let text: string;
  try {
    text = await got.upstream.text();
  } catch (e) {
    acct.record(NO_USAGE, false);
    throw upstreamFailed(e);
  } finally {
    got.slot.release();
  }
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch {
    acct.record(NO_USAGE, false);
    throw new AppError(502, "upstream_invalid", `the model runtime's answer is not JSON: ${text.slice(0, 200)}`);
  }
  const out = jsonOut(acct, shape(answer));
  acct.record(countsOf(answer), true);
  return out;
}

/** An NDJSON stream to the client, metered line by line; the slot is freed when it ends or the client leaves. */
function ndjsonAnswer(
  got: Got,
  acct: Accounting,
  body: ReadableStream<Uint8Array>,
  model: string | undefined,
): Response {
  const capture = acct.timeline?.capture;
  capture?.answerType("application/x-ndjson");
  const metered = meteredNdjson(body, {
    model,
    tee: capture ? (bytes) => capture.keepAnswer(bytes) : undefined,
    onFirst: () => firstByte(acct, true),
    onEnd: (usage, outcome) => {
      got.slot.release();
      acct.record(usage, outcome === "done");
    },
  });
  return new Response(metered, {
    headers: { "content-type": "application/x-ndjson", "cache-control": "no-cache", "x-accel-buffering": "no" },
  });
}

/**
 * `POST /api/show`: an Ollama runtime's own answer when one of its replicas is ready (its details
 * are real), else what inferd knows of the model; not metered, no slot taken.
 */
async function show(deps: DataplaneDeps, request: Request, base: RouteBase): Promise<Response> {
  const json = await readJsonObject(deps, request);
  const model = json.model ?? json.name;
  const route = await tolerantOfLatest(model, (m) => routeOf(deps, request, base, m));
  callOf(request).ticket?.release();
  const w = route.workloads[0];
  const target = w.backend === "ollama" ? deps.fleet.dispatcher.targetsOf(w.id)[0] : undefined;
  if (target) {
    const r = await target
      .send(
        {
          path: "/api/show",
          method: "POST",
          headers: { "content-type": "application/json" },
          body: null,
          json: { model: w.model_name },
        },
        AbortSignal.timeout(10_000),
      )
      .catch(() => undefined);
    if (r && !r.ok) await r.body?.cancel().catch(() => {});
    const answer = r?.ok ? await r.json().catch(() => undefined) : undefined;
    if (answer && typeof answer === "object") return Response.json(answer);
  }
  return Response.json(showOf(w, await knownModelOf(deps, w)));
}
