import { Elysia } from "elysia";
import { eq } from "drizzle-orm";
import type { AppDeps } from "../deps";
import { workloads } from "../db/schema";
import { conflict } from "../errors";
import { nowIso } from "../ids";
import { log } from "../log";
import { getWorkloadById, resolveWorkload, type Workload } from "../workloads/service";
import { bumpGeneration, createAssignment, deleteAssignment, getAssignment, listAssignments, setAssignmentDesired } from "../workers/service";
import { audit } from "../audit/service";
import { replicaRoom } from "../limits/project";

/** What this module uses of the app's dependencies. */
type Deps = Pick<AppDeps, "db" | "describeWorkload" | "fleet" | "scaler">;

/** How long a rolling restart waits for one replica to be ready before it gives up. */
const READY_WAIT_MS = 30 * 60_000;

/** Waits until an assignment is ready (true), failed or gone (false). */
async function readyOrNot(deps: Deps, id: string, limitMs: number): Promise<boolean> {
  const deadline = Date.now() + limitMs;
  while (Date.now() < deadline) {
    let state: string;
    try {
      state = getAssignment(deps.db, id).state;
    } catch {
      return false;
    }
    if (state === "ready") return true;
    if (state === "failed") return false;
    await Bun.sleep(250);
  }
  return false;
}

/**
 * Restarts a workload's replicas without a gap where GPUs allow: with one replica, a second is
 * started first and the old one removed once it is ready; with several, one at a time, each
 * started anew and ready before the next. Runs in the background; its steps are logged.
 */
export async function rollingRestart(deps: Deps, w: Workload): Promise<void> {
  const release = deps.scaler.hold(w.id);
  try {
    await restartSteps(deps, w);
  } finally {
    release();
  }
}

async function restartSteps(deps: Deps, w: Workload): Promise<void> {
  const running = listAssignments(deps.db, w.id).filter((a) => a.desired === "run");
  // A project at its max_replicas restarts in place: no second replica, even for a while.
  if (running.length === 1 && running[0].auto && replicaRoom(deps.db, w.project_id).room > 0) {
    const old = running[0];
    const extra = createAssignment(deps.db, w, { worker_id: old.worker_id, gpus: old.gpus }, true);
    deps.fleet.reconcile();
    if (await readyOrNot(deps, extra.id, READY_WAIT_MS)) {
      deleteAssignment(deps.db, old.id);
      log.info(`restart of ${w.project_slug}/${w.slug}: the new replica is ready, the old one stopped`);
    } else {
      // No room for two (or the new one failed): restart in place instead.
      deleteAssignment(deps.db, extra.id);
      bumpGeneration(deps.db, old.id);
      log.info(`restart of ${w.project_slug}/${w.slug}: restarted in place`);
    }
    deps.fleet.reconcile();
    return;
  }
  for (const a of running) {
    bumpGeneration(deps.db, a.id);
    deps.fleet.reconcile();
    await readyOrNot(deps, a.id, READY_WAIT_MS);
  }
}

/** Sets or clears a workload's `paused` flag (stopped by the operator). */
function setPaused(deps: Deps, w: Workload, paused: boolean): void {
  deps.db.update(workloads).set({ paused, updatedAt: nowIso() }).where(eq(workloads.id, w.id)).run();
}

/** Admin routes that control a workload's replicas: start, stop, rolling restart, retry a failed one. */
export const controlRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["admin"] } })
    .post("/workloads/:id/stop", ({ params }) => {
      const w = resolveWorkload(deps.db, params.id);
      setPaused(deps, w, true);
      audit(deps.db, "workload.stop", { type: "workload", id: w.id, label: `${w.project_slug}/${w.slug}` });
      for (const a of listAssignments(deps.db, w.id)) if (a.desired === "run") setAssignmentDesired(deps.db, a.id, "idle", "stopped by the operator");
      deps.fleet.reconcile();
      return deps.describeWorkload(getWorkloadById(deps.db, w.id)!);
    }, { detail: { summary: "Stop a workload: scale it to zero and keep it there until started (requests get 503, jobs wait)" } })
    .post("/workloads/:id/start", ({ params }) => {
      const w = resolveWorkload(deps.db, params.id);
      setPaused(deps, w, false);
      audit(deps.db, "workload.start", { type: "workload", id: w.id, label: `${w.project_slug}/${w.slug}` });
      deps.fleet.reconcile();
      deps.fleet.scaling?.wake(w.id);
      return deps.describeWorkload(getWorkloadById(deps.db, w.id)!);
    }, { detail: { summary: "Start a stopped workload (its policy decides how many replicas run)" } })
    .post("/workloads/:id/restart", ({ params, set }) => {
      const w = resolveWorkload(deps.db, params.id);
      if (w.paused) throw conflict("the workload is stopped; start it instead", "workload_stopped");
      audit(deps.db, "workload.restart", { type: "workload", id: w.id, label: `${w.project_slug}/${w.slug}` });
      void rollingRestart(deps, w).catch((e) => log.error(`restart of ${w.project_slug}/${w.slug} failed`, e));
      set.status = 202;
      return { restarting: true };
    }, { detail: { summary: "Rolling restart: a new replica is ready before the old one stops when GPUs allow" } })
    .post("/assignments/:id/retry", ({ params }) => {
      const a = getAssignment(deps.db, params.id);
      if (a.state !== "failed") throw conflict(`replica ${a.id} is ${a.state}, not failed`, "not_failed");
      bumpGeneration(deps.db, a.id);
      audit(deps.db, "assignment.retry", { type: "assignment", id: a.id }, { workload_id: a.workload_id });
      deps.fleet.reconcile();
      return getAssignment(deps.db, a.id);
    }, { detail: { summary: "Start a failed replica again" } });
