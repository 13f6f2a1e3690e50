/**
 * Which workload a data-plane request runs on. The per-workload base (`/endpoint/<project>/<workload>`)
 * names it in the path; the project base (`/endpoint/<project>`) picks it by the request's `model`:
 * a workload's slug, its model name or one of its aliases, else the longest alias pattern it matches
 * (`claude-*`: exact names win over patterns, longer patterns over shorter). Workloads answering to
 * the same name are one pool (the least busy is tried first); a workload's `fallbacks` follow, tried in order when the
 * ones before fail before sending anything (see `tryInOrder`). An endpoint-scoped key sees and
 * reaches only its endpoints. Every handler of both bases (chat, Messages, Responses, Ollama…) asks
 * here, so keys, scopes and routing are the same everywhere.
 */
import { andThen, type Maybe } from "../db/memo";
import type { Db } from "../db";
import type { Fleet } from "../workers/fleet";
import { AppError, badRequest, notFound } from "../errors";
import { keyOf, canTouchWorkload } from "../auth/service";
import { findProjectWorkloads, findWorkload, type Workload } from "../workloads/service";
import type { Timeline } from "../tracing/timeline";
import { callOf } from "../call";
import type { Ticket } from "../dispatch/queue";
import { projectAdapters, type AdapterRow } from "../adapters/service";

/** The workload of a data-plane path, or 404. */
export function workloadOf(deps: { db: Db }, project: string, workload: string): Maybe<Workload> {
  return andThen(findWorkload(deps.db, project, workload), (w) => {
    if (!w) throw notFound(`workload "${project}/${workload}"`);
    return w;
  });
}

/** The `model` names that mean a workload's own model: `default`, its slug, its model name. */
export const modelAliasesOf = (w: Workload): string[] => ["default", w.slug, w.model_name];

/**
 * Accepts `model` when it is absent, `default`, the workload slug or its model name; otherwise the
 * contract's model_not_available error, naming the queue and suggesting `default`.
 */
export function checkModel(w: Workload, model: unknown): void {
  if (model === undefined || model === null || modelAliasesOf(w).includes(model as string)) return;
  throw badRequest(
    "model_not_available",
    `model is not available on this endpoint: "${String(model)}" is not served by the queue ${w.project_slug}/${w.slug}, which serves "${w.model_name}"; use "default" (or "${w.slug}")`,
  );
}

/** The base a request came in on: a project's, or one workload's. */
export interface RouteBase {
  project: string;
  /** Set on the per-workload base. */
  workload?: string;
}

/** Where a request goes: workloads to try in order (the pool answering to its model, then fallbacks). */
export interface Route {
  workloads: Workload[];
  /** The model name the client asked for, when it named one other than `default`. */
  requested?: string;
}

declare module "../call" {
  interface Call {
    /** The LoRA adapter its `model` named (issue 39), once routed: the base workload serves it with that adapter. */
    adapter?: string;
  }
}

/**
 * The adapter `model` names among a project's ready adapters: its name, or `<base>:<adapter>` with
 * `<base>` a name of the adapter's workload (its model name, an alias or its slug). Undefined when
 * it names none.
 */
export function adapterNamed(
  adapters: ReadonlyMap<string, AdapterRow>,
  ws: readonly Workload[],
  model: string,
): { adapter: AdapterRow; workload: Workload } | undefined {
  if (adapters.size === 0) return undefined;
  let a = adapters.get(model);
  let base: string | undefined;
  if (!a) {
    const i = model.lastIndexOf(":");
    if (i <= 0) return undefined;
    a = adapters.get(model.slice(i + 1));
    base = model.slice(0, i);
  }
  const w = a && ws.find((x) => x.id === a!.workloadId);
  if (!a || !w || (base !== undefined && !namesOf(w).includes(base))) return undefined;
  return { adapter: a, workload: w };
}

/**
 * A route for an adapter name when `model` names one of the project's adapters the key may call
 * (its base workload is callable); notes the adapter on the request. Undefined otherwise.
 */
function adapterRoute(deps: { db: Db }, request: Request, ws: Workload[], model: string): Maybe<Route | undefined> {
  const projectId = ws[0]?.project_id;
  if (!projectId) return undefined;
  return andThen(projectAdapters(deps.db, projectId), (adapters) => {
    const hit = adapterNamed(adapters, ws, model);
    if (!hit) return undefined;
    callOf(request).adapter = hit.adapter.name;
    return { workloads: [hit.workload], requested: model };
  });
}

/**
 * `checkModel` on a workload's own base, where `model` may also name one of its adapters (noted on
 * the request as `routeOf` does).
 */
export function checkModelOrAdapter(deps: { db: Db }, request: Request, w: Workload, model: unknown): Maybe<void> {
  if (typeof model !== "string" || modelAliasesOf(w).includes(model)) return checkModel(w, model);
  return andThen(adapterRoute(deps, request, [w], model), (r) => {
    if (!r) checkModel(w, model);
  });
}

/**
 * The queue ticket of a request with the adapter its route named, when any: it goes where the adapter
 * is loaded unless its workload routes by least load.
 */
export function withAdapterOf(request: Request, w: Pick<Workload, "routing">, ticket: Ticket): Ticket {
  const name = callOf(request).adapter;
  return name ? { ...ticket, adapter: { name, aware: w.routing !== "least_loaded" } } : ticket;
}

/** The names a workload answers to on its project's base URL, listed first to last. */
export const namesOf = (w: Workload): string[] => [w.model_name, ...w.aliases, w.slug];

/** Whether an alias is a pattern: a `*` in it stands for any run of characters (`claude-*`). */
export const isPattern = (alias: string): boolean => alias.includes("*");

/**
 * Whether `name` matches an alias pattern: `*` stands for any characters (none included), the rest
 * is literal and the whole name must match.
 * @example aliasMatches("claude-*", "claude-sonnet-4-5") // → true
 */
export function aliasMatches(pattern: string, name: string): boolean {
  const parts = pattern.split("*").map((p) => p.replace(/[.+?^${}()|[\]\\]/g, "\\$&"));
  return new RegExp(`^${parts.join(".*")}$`, "s").test(name);
}

/**
 * The workloads answering to `requested`: those whose model name, exact alias or slug it is; when
 * none, those with the longest alias pattern it matches (`claude-sonnet-*` before `claude-*`).
 */
export function answering(ws: Workload[], requested: string): Workload[] {
  const exact = ws.filter((w) => namesOf(w).includes(requested));
  if (exact.length) return exact;
  const literal = (a: string) => a.replaceAll("*", "").length;
  const longest = (w: Workload) =>
    Math.max(-1, ...w.aliases.filter((a) => isPattern(a) && aliasMatches(a, requested)).map(literal));
  const best = Math.max(-1, ...ws.map(longest));
  return best < 0 ? [] : ws.filter((w) => longest(w) === best);
}

/**
 * The names `/v1/models` lists for a workload: its model name and aliases (the slug is accepted too);
 * patterns are not names a client could pick, so they are not listed.
 */
export const listedNamesOf = (w: Workload): string[] => [w.model_name, ...w.aliases.filter((a) => !isPattern(a))];

/** The workloads of the base the request's key may call (one on the per-workload base). */
export function callableWorkloads(deps: { db: Db }, request: Request, base: RouteBase): Maybe<Workload[]> {
  if (base.workload !== undefined) return andThen(workloadOf(deps, base.project, base.workload), (w) => [w]);
  const key = keyOf(request);
  return andThen(findProjectWorkloads(deps.db, base.project), (all) =>
    all.filter((w) => canTouchWorkload(key, base.project, w.slug)),
  );
}

/**
 * The model ids the request's key may call on this base, each once, with the workloads answering
 * to it (what `/v1/models` and Ollama's `/api/tags` list); then the ready LoRA adapters of those
 * workloads, each with its base as `parent`.
 */
export function callableModels(
  deps: { db: Db },
  request: Request,
  base: RouteBase,
): Maybe<{ id: string; workloads: Workload[]; parent?: string }[]> {
  return andThen(callableWorkloads(deps, request, base), (ws) => {
    const byId = new Map<string, Workload[]>();
    for (const w of ws) for (const id of listedNamesOf(w)) byId.set(id, [...(byId.get(id) ?? []), w]);
    const models: { id: string; workloads: Workload[]; parent?: string }[] = [...byId].map(([id, workloads]) => ({
      id,
      workloads,
    }));
    if (!ws.length) return models;
    return andThen(projectAdapters(deps.db, ws[0].project_id), (adapters) => {
      for (const a of adapters.values()) {
        const w = ws.find((x) => x.id === a.workloadId);
        if (w && !byId.has(a.name)) models.push({ id: a.name, workloads: [w], parent: w.model_name });
      }
      return models;
    });
  });
}

/** The pool's members least busy first: waiting plus running requests per slot of their ready replicas. */
function byLoad(deps: { fleet: Fleet }, pool: Workload[]): Workload[] {
  if (pool.length < 2) return pool;
  const d = deps.fleet.dispatcher;
  const load = (w: Workload) => {
    let cap = 0;
    let busy = d.depth(w.id);
    for (const t of d.targetsOf(w.id)) {
      cap += t.capacity;
      busy += t.inFlight;
    }
    return cap ? busy / cap : Number.POSITIVE_INFINITY;
  };
  return pool
    .map((w) => ({ w, l: load(w) }))
    .sort((a, b) => a.l - b.l)
    .map((x) => x.w);
}

/**
 * The route of a request for `model`. On a workload's base: that workload when `model` is absent,
 * `default`, its slug or its model name (else 400 model_not_available). On a project's base: the
 * pool of callable workloads answering to `model` (`default` or none: the project's only workload),
 * then the fallbacks of the first of them the key may call; an unknown model is 404
 * `model_not_found` naming the models the key may use.
 */
export function routeOf(
  deps: { db: Db; fleet: Fleet },
  request: Request,
  base: RouteBase,
  model: unknown,
): Maybe<Route> {
  const requested = typeof model === "string" && model !== "default" ? model : undefined;
  if (base.workload !== undefined) {
    return andThen(workloadOf(deps, base.project, base.workload), (w) => {
      if (requested === undefined || modelAliasesOf(w).includes(requested)) return { workloads: [w], requested };
      // One of its adapters, else the contract's 400.
      return andThen(adapterRoute(deps, request, [w], requested), (r) => {
        if (!r) checkModel(w, model);
        return r!;
      });
    });
  }
  return andThen(callableWorkloads(deps, request, base), (ws) => {
    let pool: Workload[];
    if (requested === undefined) pool = ws.length === 1 ? ws : [];
    else pool = answering(ws, requested);
    if (!pool.length && requested !== undefined)
      return andThen(adapterRoute(deps, request, ws, requested), (r) => {
        if (!r) throw modelNotFound(base.project, model, ws);
        return r;
      });
    if (!pool.length) throw modelNotFound(base.project, model, ws);
    const ordered = byLoad(deps, pool);
    const seen = new Set(ordered.map((w) => w.id));
    const fallbacks: Workload[] = [];
    for (const slug of ordered[0].fallbacks) {
      const f = ws.find((w) => w.slug === slug);
      if (f && !seen.has(f.id)) {
        seen.add(f.id);
        fallbacks.push(f);
      }
    }
    return { workloads: [...ordered, ...fallbacks], requested };
  });
}

/** 404 model_not_found naming the models the key may use. */
function modelNotFound(project: string, model: unknown, callable: Workload[]): AppError {
  const names = [...new Set(callable.flatMap((w) => [w.model_name, ...w.aliases]))];
  const asked =
    model === undefined || model === null || model === "default"
      ? "no model was named and the project serves more than one (or none)"
      : `the model "${String(model)}" is not served in project "${project}" for this key`;
  const offer = names.length
    ? `; models you may use: ${names.map((n) => `"${n}"`).join(", ")}`
    : "; this key may not call any model here";
  return new AppError(404, "model_not_found", `${asked}${offer}`, {}, "model");
}

/**
 * Whether a failed try may go to the next workload of the route: nothing reached the client and the
 * failure is the workload's, not the request's (unavailable, queue full or timed out, runtime 5xx or
 * unreachable).
 */
export function worthFallingBack(e: unknown): boolean {
  if (!(e instanceof AppError)) return false;
  return e.status >= 500 || e.code === "queue_full";
}

/**
 * Runs `attempt` on the route's workloads in order until one answers: a thrown failure that
 * `worthFallingBack`, or a response with a 5xx status (its body not read yet, so nothing reached the
 * client), moves on to the next; the last one's answer or error stands. Once a response with a
 * status below 500 is returned, its bytes are the client's and nothing else is tried. The request's
 * timeline `tl` lists the tries that fell back, and its one record is the answering workload's.
 */
export async function tryInOrder(
  route: Route,
  attempt: (w: Workload) => Promise<Response>,
  tl?: Timeline,
): Promise<Response> {
  const last = route.workloads.length - 1;
  for (let i = 0; ; i++) {
    const w = route.workloads[i];
    if (tl) {
      tl.workloadId = w.id;
      tl.projectId = w.project_id;
      tl.mayFallBack = i !== last;
    }
    if (i === last) return attempt(w);
    let r: Response;
    try {
      r = await attempt(w);
    } catch (e) {
      if (worthFallingBack(e)) {
        tl?.fellBack(w.id, (e as AppError).status);
        continue;
      }
      tl?.flushHeld();
      throw e;
    }
    if (r.status < 500) {
      tl?.flushHeld();
      return r;
    }
    await r.body?.cancel().catch(() => {});
    tl?.fellBack(w.id, r.status);
  }
}
