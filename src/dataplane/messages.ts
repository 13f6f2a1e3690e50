import type { DataplaneDeps } from "./service";
import { keyOf } from "../auth/service";
import { AppError, badRequest } from "../errors";
import { engineOf } from "../../agent/engines";
import { stableMessages } from "./stable-prompt";
import { accounting, syncTicket, checkRoute, readJsonObject, runOnBase } from "./service";
import { checkModelOrAdapter, routeOf, tryInOrder, withAdapterOf, workloadOf, type RouteBase } from "./target";
import type { Workload } from "../workloads/service";
import {
  dispatchWith,
  unanswered,
  isEventStream,
  noteRuntimeError,
  relay,
  relayTranslated,
  routeMissing,
  upstreamFailed,
  withAffinity,
} from "./forward";
import { countPromptTokens, countWayOf, RuntimeRefused, tokenizeOn } from "./anthropic-count";
import type { Target } from "../dispatch/queue";
import { callOf } from "../call";
import { chatErrorToAnthropic, chatToMessage, messagesToChat } from "./anthropic";
import { ChatStreamToMessages } from "./anthropic-stream";

/** Replicas whose runtime has no `/v1/messages` (learnt from a 404), so requests are translated. */
const noMessagesRoute = new Set<string>();

/**
 * Re-shapes a runtime error into the Messages error shape: status and message unchanged, `type`
 * the Anthropic one for the status (runtimes name their own error classes there).
 */
async function anthropicError(r: Response): Promise<Response> {
  const text = await r.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {}
  const e = chatErrorToAnthropic(r.status, body);
  // A rate limit's wait (an external provider's) is the client's to honour.
  const after = r.headers.get("retry-after");
  return Response.json(e.body, { status: e.status, headers: after ? { "retry-after": after } : {} });
}

/**
 * `POST /v1/messages`: checks toggle and model, then passes the request through to the runtime's
 * own `/v1/messages`; a runtime without that route (404) gets it translated to chat completions
 * and the answer (or stream) translated back. Errors always come back in the Messages shape.
 */
export async function messagesRoute(deps: DataplaneDeps, request: Request, base: RouteBase): Promise<Response> {
  return runOnBase(deps, request, base, "chat", "POST /v1/messages", (w, json) =>
    messagesHeld(deps, request, w, w.stable_prompts ? stableMessages(json) : json),
  );
}

async function messagesHeld(
  deps: DataplaneDeps,
  request: Request,
  w: Workload,
  json: Record<string, unknown>,
): Promise<Response> {
  refuseForeignMessages(w);
  // Answers name the model as /v1/models does first, whichever name or alias the client used
  // (an adapter by its own name, as chat completions do).
  const servedName = callOf(request).adapter ?? w.model_name;
  const translated = messagesToChat(json, w.model_name);
  const stream = json.stream === true;
  let viaChat = false;
  let inputTokens: number | undefined;
  const key = keyOf(request);
  const acct = accounting(deps, request, key, w, json);
  // What the engine says of its own Messages route: false sends it to chat completions at once.
  const native = engineOf(w.backend)?.routes(undefined).messages;
  const got = await dispatchWith(
    deps.fleet.dispatcher,
    w.id,
    request.signal,
    async (target, signal) => {
      if (native !== false && !noMessagesRoute.has(target.id)) {
        const headers = {
          "content-type": "application/json",
          accept: stream ? "text/event-stream" : "application/json",
          "anthropic-version": request.headers.get("anthropic-version") ?? "2023-06-01",
        };
        const r = await target.send({ path: "/v1/messages", method: "POST", headers, body: null, json }, signal);
        if (r.status !== 404) return r;
        const { missing, answer } = await routeMissing(r);
        if (!missing) return answer;
        noMessagesRoute.add(target.id);
      }
      if ("error" in translated) throw badRequest("invalid_request", translated.error);
      viaChat = true;
      if (stream) inputTokens = await streamInputTokens(target, w, translated.body, signal);
      return target.send(
        {
          path: "/v1/chat/completions",
          method: "POST",
          headers: { "content-type": "application/json" },
          body: null,
          json: translated.body,
        },
        signal,
      );
    },
    withAffinity(deps.fleet.dispatcher, w, json, withAdapterOf(request, w, syncTicket(key))),
    acct.timeline,
  ).catch(unanswered(acct));
  const { upstream } = got;
  if (!upstream.ok) {
    const text = await upstream.text().catch(() => "");
    got.slot.release();
    noteRuntimeError(acct.timeline, text);
    acct.record({ inputTokens: 0, outputTokens: 0 }, false);
    return anthropicError(new Response(text, { status: upstream.status, headers: upstream.headers }));
  }
  if (!viaChat) return relay(got, acct, { model: servedName });
  if (stream && isEventStream(upstream) && upstream.body) {
    return relayTranslated(got, acct, new ChatStreamToMessages(servedName, inputTokens));
  }
  const message = chatToMessage(await upstream.json().catch(() => ({})), servedName);
  return relay({ ...got, upstream: Response.json(message) }, acct);
}

/**
 * The prompt tokens of a translated stream, for its `message_start` (the runtime reports usage
 * only at the end): counted by the runtime's tokenizer on the replica about to run it, when it has
 * one (a loopback call, no generation); undefined otherwise or when the count fails.
 */
async function streamInputTokens(
  target: Target,
  w: Workload,
  chat: Record<string, unknown>,
  signal: AbortSignal,
): Promise<number | undefined> {
  const way = countWayOf(w.backend);
  if (way === "generate") return undefined;
  return tokenizeOn(target, way, chat, signal).catch((e) => {
    if (e instanceof RuntimeRefused) void e.response.body?.cancel().catch(() => {});
    return undefined;
  });
}

/**
 * `POST /v1/messages/count_tokens` (Anthropic's token counting): `{"input_tokens": N}` for the
 * Messages request, counted by the runtime's tokenizer on a replica of the workload (see
 * ./anthropic-count.ts). Routed and checked like `/v1/messages`; not metered (nothing is generated).
 */
export async function countTokensRoute(deps: DataplaneDeps, request: Request, base: RouteBase): Promise<Response> {
  try {
    const json = await readJsonObject(deps, request);
    const count = (w: Workload) => {
      checkRoute(w, "chat", "POST /v1/messages/count_tokens");
      return countHeld(deps, request, w, json);
    };
    if (base.workload !== undefined) {
      const w = await workloadOf(deps, base.project, base.workload);
      await checkModelOrAdapter(deps, request, w, json.model);
      return await count(w);
    }
    return await tryInOrder(await routeOf(deps, request, base, json.model), count, callOf(request).timeline);
  } finally {
    deps.bodyBudget.release(request);
    callOf(request).ticket?.release();
  }
}

/**
 * The contract's 501 (`api_error`) on `/v1/messages` for a workload forwarding to an external
 * provider that does not speak Anthropic's Messages API (an OpenAI-compatible one): its requests
 * are the provider's to answer, and inferd does not rewrite them into another API for it.
 */
function refuseForeignMessages(w: Workload): void {
  const engine = engineOf(w.backend);
  if (engine?.external && engine.routes(undefined).messages === false)
    throw new AppError(
      501,
      "provider_without_messages",
      `${w.project_slug}/${w.slug} forwards to an external provider (${engine.label}) that does not speak Anthropic's Messages API: call /v1/chat/completions instead`,
    );
}

async function countHeld(
  deps: DataplaneDeps,
  request: Request,
  w: Workload,
  json: Record<string, unknown>,
): Promise<Response> {
  refuseForeignMessages(w);
  const translated = messagesToChat({ ...json, max_tokens: 1, stream: false }, w.model_name);
  if ("error" in translated) throw badRequest("invalid_request", translated.error);
  const { max_tokens: _max, ...chat } = translated.body;
  try {
    return Response.json({
      input_tokens: await countPromptTokens(
        deps.fleet.dispatcher,
        w.id,
        countWayOf(w.backend),
        chat,
        request.signal,
        runtimeHeaders(request),
      ),
    });
  } catch (e) {
    if (e instanceof RuntimeRefused) return anthropicError(e.response);
    if (e instanceof AppError) throw e;
    throw upstreamFailed(e);
  }
}

/** The request id, passed to the runtime. */
function runtimeHeaders(request: Request): Record<string, string> {
  return { "x-request-id": callOf(request).id };
}
