import type { Config } from "../config";
import type { Db } from "../db";
import type { ByteBudget } from "../http";
import type { Limiter } from "../limits/limiter";
import type { Metering } from "../usage/meter";
import type { Fleet } from "../workers/fleet";
import { AppError, badRequest } from "../errors";
import { jsonObjectOf, readBodyLimited, UploadSource } from "../http";
import type { Workload } from "../workloads/service";
import { JOB_ONLY_TASK_TYPES, type Toggle } from "../workloads/schema";
import { routesOf } from "../../agent/engines/custom";
import { dispatch, relay, unanswered, withAffinity, type Accounting } from "./forward";
import { SYNC, type Ticket } from "../dispatch/queue";
import type { KeyRecord } from "../keys/service";
import { callOf } from "../call";
import {
  checkModel,
  checkModelOrAdapter,
  modelAliasesOf,
  routeOf,
  tryInOrder,
  withAdapterOf,
  workloadOf,
  type RouteBase,
} from "./target";
import { uploadModel } from "../multipart";
import type { DataRoute } from "./table";
import { Capture } from "../tracing/capture";
import { capturing } from "../workloads/capture";

/** What this module uses of the app's dependencies. */
export interface DataplaneDeps {
  db: Db;
  config: Config;
  bodyBudget: ByteBudget;
  fleet: Fleet;
  limiter: Limiter;
  metering: Metering;
}

/**
 * The data plane's service functions, used by its routes, the jobs, the admin playground and the
 * Messages route: finding a path's workload, checking its toggle and model, and forwarding one
 * request through the workload's queue with its meter.
 */

/** A route forwarded to the runtime (a row of ./table.ts). */
export type RouteSpec = DataRoute;

/**
 * Refuses a route whose toggle is off (409) or whose workload only takes async jobs (400); the
 * admin's playground (`jobOnlyToo`) may try a job-only workload directly, without making a job.
 */
export function checkRoute(w: Workload, toggle: Toggle, what: string, jobOnlyToo = false): void {
  if (!w.endpoints[toggle])
    throw new AppError(
      409,
      "endpoint_disabled",
      `the ${toggle} endpoint of ${w.project_slug}/${w.slug} is switched off (${what})`,
    );
  checkServed(w, what);
  if (!jobOnlyToo && (JOB_ONLY_TASK_TYPES as readonly string[]).includes(w.task_type)) {
    throw badRequest(
      "async_only",
      `${w.task_type} workloads are served only through async jobs: POST /endpoint/${w.project_slug}/${w.slug}/jobs`,
    );
  }
}

/** Routes inferd answers by translating to chat completions (a custom server serves them when it serves that). */
const VIA_CHAT = new Set(["messages", "messages/count_tokens", "responses"]);

/**
 * Refuses (404 `route_not_served`) a request on a route a custom server's workload does not map to
 * a path of its own (agent/engines/custom.ts); every other workload serves every route it has.
 */
function checkServed(w: Workload, what: string): void {
  if (w.backend !== "custom") return;
  const routes = routesOf(w.config);
  const route = /^[A-Z]+ \/v1\/(.+)$/.exec(what)?.[1];
  if (!routes || !route || Object.hasOwn(routes, VIA_CHAT.has(route) ? "chat/completions" : route)) return;
  const served = Object.keys(routes).map((r) => `/v1/${r}`);
  throw new AppError(
    404,
    "route_not_served",
    `${w.project_slug}/${w.slug} is a custom server that does not serve /v1/${route}${VIA_CHAT.has(route) ? " (it is answered through /v1/chat/completions)" : ""}; it serves ${served.join(", ")}`,
  );
}

/** Reads a JSON object body of the data plane (up to the data-plane body limit). */
export async function readJsonObject(deps: DataplaneDeps, request: Request): Promise<Record<string, unknown>> {
  const json = jsonObjectOf(await readBodyLimited(request, deps.config.maxDataBodyBytes, deps.bodyBudget));
  callOf(request).json = json;
  return json.object;
}

/** `json`'s text as the client sent it, when `json` is the object `readJsonObject` read from it, unchanged. */
function textAsSent(request: Request, json: Record<string, unknown>): string | undefined {
  const sent = callOf(request).json;
  return sent?.object === json ? sent.text : undefined;
}

/**
 * The meter of a forwarded request: its clock started when the request arrived (the auth gate
 * notes the time); its key (none for the dashboard's playground) and workload are charged at its end,
 * where its timeline becomes the inspector's record. While the workload's capture is on, the
 * request `body` (as read) is kept, and the answer teed (./forward.ts `relay`).
 */
export function accounting(
  deps: DataplaneDeps,
  request: Request,
  key: KeyRecord | null,
  w: Workload,
  body?: unknown,
): Accounting {
  const call = callOf(request);
  const tl = call.timeline;
  if (tl) {
    tl.model = callOf(request).adapter ?? w.model_name;
    // Most workloads capture nothing (`capture_until` null): they skip the check of its time.
    if (w.capture_until !== null && capturing(w)) {
      tl.capture = new Capture(body === undefined ? request.headers.get("content-type") : "application/json");
      tl.capture.keepRequest(body);
    }
  }
  return deps.metering.begin(w, key?.id ?? null, "sync", call.arrivedAt, call.ticket?.release, tl);
}

/**
 * The queue ticket of a synchronous request of `key` (null: keyless, the dashboard's playground):
 * its key, weight and priority, from the key already loaded to authenticate it (no store read).
 */
export function syncTicket(key: KeyRecord | null): Ticket {
  return key
    ? { kind: "sync", keyId: key.id, weight: key.weight ?? undefined, priority: key.priority ?? undefined }
    : SYNC;
}

/**
 * Forwards one synchronous request to a workload through its queue; `key` is charged for it.
 * The body counts against the buffered-bytes budget until the runtime has answered. `playground`
 * (the admin's, with no key) may also try a workload that otherwise only takes async jobs.
 */
export async function forwardToWorkload(
  deps: DataplaneDeps,
  spec: RouteSpec,
  request: Request,
  w: Workload,
  key: KeyRecord | null,
  parsed?: unknown,
  playground = false,
): Promise<Response> {
  try {
    return await forwardHeld(deps, spec, request, w, key, parsed, playground ? "playground" : "workload");
  } finally {
    deps.bodyBudget.release(request);
  }
}

/**
 * Forwards a synchronous request that came in on a project's base URL: routed by its `model` to the
 * pool of workloads answering to it, then their fallbacks (see ./target.ts).
 */
export async function forwardOnProject(
  deps: DataplaneDeps,
  spec: RouteSpec,
  request: Request,
  base: RouteBase,
  key: KeyRecord,
): Promise<Response> {
  try {
    if (spec.body === "raw") {
      const upload = await uploadModel(request, deps.config.maxDataBodyBytes);
      const route = await routeOf(deps, request, base, upload.model);
      try {
        return await tryInOrder(
          route,
          (w) => forwardHeld(deps, spec, request, w, key, undefined, "routed", upload.request),
          callOf(request).timeline,
        );
      } finally {
        deps.bodyBudget.release(upload.request);
      }
    }
    const json = await readJsonObject(deps, request);
    const route = await routeOf(deps, request, base, json.model);
    return await tryInOrder(
      route,
      (w) => forwardHeld(deps, spec, request, w, key, json, "routed"),
      callOf(request).timeline,
    );
  } finally {
    deps.bodyBudget.release(request);
  }
}

/** How a route looks a request's model up: `find` for the model as sent (Ollama's also tries it without `:latest`). */
export type ModelLookup = <T>(model: unknown, find: (model: unknown) => T | Promise<T>) => Promise<T>;

/**
 * Runs a translated JSON route (Messages, Responses, Ollama's) on its workload, on either base: the workload
 * base checks the route's toggle before reading the body and the model after; the project base
 * routes by the body's `model` and tries the route's workloads in order, each checked for the
 * toggle. The body's bytes count against the budget until the answer is made.
 */
export async function runOnBase(
  deps: DataplaneDeps,
  request: Request,
  base: RouteBase,
  toggle: Toggle,
  what: string,
  run: (w: Workload, json: Record<string, unknown>) => Promise<Response>,
  lookup: ModelLookup = async (model, find) => find(model),
): Promise<Response> {
  try {
    if (base.workload !== undefined) {
      const w = await workloadOf(deps, base.project, base.workload);
      const tl = callOf(request).timeline;
      if (tl) (tl.workloadId = w.id), (tl.projectId = w.project_id);
      checkRoute(w, toggle, what);
      const json = await readJsonObject(deps, request);
      await lookup(json.model, (m) => checkModelOrAdapter(deps, request, w, m));
      return await run(w, json);
    }
    const json = await readJsonObject(deps, request);
    const route = await lookup(json.model, (m) => routeOf(deps, request, base, m));
    return await tryInOrder(
      route,
      (w) => {
        checkRoute(w, toggle, what);
        return run(w, json);
      },
      callOf(request).timeline,
    );
  } finally {
    deps.bodyBudget.release(request);
  }
}

/** How a forwarded request reached its workload: named by the path, routed by its model, or the admin's playground. */
type Reached = "workload" | "routed" | "playground";

async function forwardHeld(
  deps: DataplaneDeps,
  spec: RouteSpec,
  request: Request,
  w: Workload,
  key: KeyRecord | null,
  parsed: unknown,
  via: Reached,
  uploadFrom = request,
): Promise<Response> {
  const tl = callOf(request).timeline;
  if (tl) (tl.workloadId = w.id), (tl.projectId = w.project_id);
  checkRoute(w, spec.toggle, `POST /v1/${spec.path}`, via === "playground");
  const headers: Record<string, string> = { accept: request.headers.get("accept") ?? "*/*" };
  headers["x-request-id"] = callOf(request).id;
  let json: Record<string, unknown> | undefined;
  let injectedUsage = false;
  if (spec.body === "json") {
    if (parsed !== undefined && (!parsed || typeof parsed !== "object" || Array.isArray(parsed)))
      throw badRequest("invalid_request", "the request body must be a JSON object");
    json = (parsed as Record<string, unknown> | undefined) ?? (await readJsonObject(deps, request));
    if (via !== "routed") await checkModelOrAdapter(deps, request, w, json.model);
    headers["content-type"] = "application/json";
    const so = json.stream_options as Record<string, unknown> | undefined;
    if (
      json.stream === true &&
      (spec.path === "chat/completions" || spec.path === "completions") &&
      !so?.include_usage
    ) {
      json = { ...json, stream_options: { ...(so ?? {}), include_usage: true } };
      injectedUsage = true;
    }
  }
  // An upload goes to a local runtime as it arrives (not held in memory); JSON bodies are small.
  const source =
    spec.body === "raw" ? new UploadSource(uploadFrom, deps.config.maxDataBodyBytes, deps.bodyBudget) : undefined;
  if (source) headers["content-type"] = request.headers.get("content-type") ?? "application/octet-stream";
  const meter = accounting(deps, request, key, w, json);
  const got = await dispatch(
    deps.fleet.dispatcher,
    w.id,
    {
      path: `/v1/${spec.path}`,
      method: "POST",
      headers,
      body: null,
      json,
      text: json === undefined ? undefined : textAsSent(request, json),
      source,
      modelAliases: source ? (via === "routed" ? [...modelAliasesOf(w), ...w.aliases] : modelAliasesOf(w)) : undefined,
    },
    request.signal,
    withAffinity(deps.fleet.dispatcher, w, json, withAdapterOf(request, w, syncTicket(key))),
    meter.timeline,
  ).catch((e) => unanswered(meter)(source?.failure ?? e));
  // The answer names the model as /v1/models does, whatever the runtime calls it.
  return relay(got, meter, { dropUsageOnlyChunks: injectedUsage, model: callOf(request).adapter ?? w.model_name });
}
