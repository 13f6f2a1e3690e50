/**
 * Which models the data plane offers in its lists (`GET /v1/models`, Ollama's `/api/tags`): a name
 * is listed only when a request for it could be answered. A workload whose every replica failed, or
 * that the operator stopped, answers nothing (503), so its names are left out unless another
 * workload answering to the same name, or one of its fallbacks, can serve. A workload with no
 * replica yet (scaled to zero, or waiting for its schedule) is offered: a request starts one.
 */
import type { Db } from "../db";
import { listAssignments } from "../workers/service";
import type { Workload } from "../workloads/service";
import { callableModels, callableWorkloads, type RouteBase } from "./target";

/**
 * Whether a workload can take a request now, from its state: not stopped, and not every one of its
 * replicas failed.
 * @example canServe({ paused: false }, [{ state: "failed" }, { state: "ready" }]) // → true
 */
export function canServe(w: Pick<Workload, "paused">, replicas: { state: string }[]): boolean {
  if (w.paused) return false;
  return replicas.length === 0 || replicas.some((a) => a.state !== "failed");
}

/** The ids of `ws` that can take a request now (see `canServe`). */
async function servingIds(db: Db, ws: Workload[]): Promise<Set<string>> {
  const ok = await Promise.all(ws.map(async (w) => canServe(w, await listAssignments(db, w.id))));
  return new Set(ws.filter((_, i) => ok[i]).map((w) => w.id));
}

/**
 * The model ids the request's key may call on this base that a request would be answered for, each
 * with the workloads answering to it that can serve (its first when only a fallback can).
 */
export async function offeredModels(
  deps: { db: Db },
  request: Request,
  base: RouteBase,
): Promise<{ id: string; workloads: Workload[]; parent?: string }[]> {
  const [models, all] = await Promise.all([
    callableModels(deps, request, base),
    callableWorkloads(deps, request, base),
  ]);
  const serving = await servingIds(deps.db, all);
  const fallbackServes = (w: Workload) =>
    base.workload === undefined && w.fallbacks.some((slug) => all.some((f) => f.slug === slug && serving.has(f.id)));
  return models.flatMap(({ id, workloads, parent }) => {
    const up = workloads.filter((w) => serving.has(w.id));
    const named = parent ? { parent } : {};
    if (up.length) return [{ id, workloads: up, ...named }];
    return workloads.some(fallbackServes) ? [{ id, workloads, ...named }] : [];
  });
}
