import type { DataplaneDeps } from "./service";
import { keyOf } from "../auth/service";
import { badRequest } from "../errors";
import { engineOf } from "../../agent/engines";
import type { Workload } from "../workloads/service";
import { accounting, syncTicket, runOnBase } from "./service";
import { withAdapterOf, type RouteBase } from "./target";
import {
  dispatchWith,
  isEventStream,
  noteRuntimeError,
  relay,
  relayTranslated,
  routeMissing,
  unanswered,
  withAffinity,
} from "./forward";
import { callOf } from "../call";
import {
  chatToResponse,
  isObj,
  needsStoredResponses,
  openAiErrorOf,
  responsesToChat,
  responseShell,
  type ToolNames,
} from "./responses-translate";
import { ChatStreamToResponses, ResponsesRelay } from "./responses-stream";

/**
 * OpenAI's Responses API (`POST /v1/responses`) on both bases: passed through to a runtime that
 * serves it (vLLM ≥ 0.10), translated to chat completions for the others. inferd keeps no
 * responses, so `previous_response_id` and other references to stored ones are refused.
 */

/** Replicas whose runtime has no `/v1/responses` (learnt from a 404), so requests are translated. */
const noResponsesRoute = new Set<string>();

/**
 * `POST /v1/responses`: checks toggle and model, refuses what needs stored responses, then runs the
 * request on the runtime's own `/v1/responses` or, where it has none, as a chat completion whose
 * answer (or stream) is translated back. Errors come back in OpenAI's shape.
 */
export async function responsesRoute(deps: DataplaneDeps, request: Request, base: RouteBase): Promise<Response> {
  return runOnBase(deps, request, base, "chat", "POST /v1/responses", (w, json) =>
    responsesHeld(deps, request, w, json),
  );
}

async function responsesHeld(
  deps: DataplaneDeps,
  request: Request,
  w: Workload,
  json: Record<string, unknown>,
): Promise<Response> {
  const refused = needsStoredResponses(json);
  if (refused) throw badRequest("unsupported_parameter", refused);
  // Answers name the model as /v1/models does first, whichever name or alias the client used
  // (an adapter by its own name, as chat completions do).
  const servedName = callOf(request).adapter ?? w.model_name;
  const stream = json.stream === true;
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: stream ? "text/event-stream" : "application/json",
  };
  headers["x-request-id"] = callOf(request).id;
  let viaChat = false;
  let names: ToolNames | undefined;
  let dropped: string[] = [];
  const key = keyOf(request);
  const acct = accounting(deps, request, key, w, json);
  // What the engine says of its own Responses route: false sends it to chat completions at once.
  const native = engineOf(w.backend)?.routes(undefined).responses;
  const got = await dispatchWith(
    deps.fleet.dispatcher,
    w.id,
    request.signal,
    async (target, signal) => {
      if (native !== false && !noResponsesRoute.has(target.id)) {
        const r = await target.send({ path: "/v1/responses", method: "POST", headers, body: null, json }, signal);
        if (r.status !== 404) return r;
        const { missing, answer } = await routeMissing(r);
        if (!missing) return answer;
        noResponsesRoute.add(target.id);
      }
      const translated = responsesToChat(json, w.model_name);
      if ("error" in translated) throw badRequest("invalid_request", translated.error);
      viaChat = true;
      names = translated.names;
      dropped = translated.dropped;
      // Hosted tools left out are named in the inspector's record (and the answer's metadata).
      const tl = acct.timeline;
      if (dropped.length && tl) tl.span("translate", tl.now(), tl.now(), { dropped_tools: dropped.join(",") });
      return target.send(
        { path: "/v1/chat/completions", method: "POST", headers, body: null, json: translated.body },
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
    return Response.json(openAiErrorOf(upstream.status, text), { status: upstream.status });
  }
  const shell = responseShell(json, servedName);
  if (dropped.length) shell.metadata = { ...(shell.metadata as object), "inferd.dropped_tools": dropped.join(",") };
  if (stream && isEventStream(upstream) && upstream.body) {
    const t = viaChat ? new ChatStreamToResponses(shell, names) : new ResponsesRelay(servedName);
    return relayTranslated(got, acct, t);
  }
  const answer: unknown = await upstream.json().catch(() => ({}));
  const out = viaChat
    ? chatToResponse(answer, shell, names)
    : isObj(answer)
      ? { ...answer, model: servedName }
      : answer;
  return relay({ ...got, upstream: Response.json(out) }, acct);
}
