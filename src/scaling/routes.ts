import { Elysia } from "elysia";
import type { Db } from "../db";
import type { Fleet, WorkloadDetail } from "../workers/fleet";
import type { Scaler } from "./scaler";
import { conflict } from "../errors";
import { log } from "../log";
import { getWorkloadById, resolveWorkload, setPaused, type Workload } from "../workloads/service";
import {
  bumpGeneration,
  createAssignment,
  deleteAssignment,
  getAssignment,
  listAssignments,
  setAssignmentDesired,
  type AssignmentView,
} from "../workers/service";
import { restartGroup } from "../workers/groups";
import { audit } from "../audit/service";
import { replicaRoom } from "../limits/project";

/** What this module uses of the app's dependencies. */
interface Deps {
  db: Db;
  fleet: Fleet;
  scaler: Scaler;
  /** The admin view of a workload: the stored fields plus what the serving side knows. */
  describeWorkload(w: Workload): Promise<WorkloadDetail>;
}

/** How long a rolling restart waits for one replica to be ready before it gives up. */
const READY_WAIT_MS = 30 * 60_000;

/** Waits until an assignment is ready (true), failed or gone (false). */
async function readyOrNot(deps: Deps, id: string, limitMs: number): Promise<boolean> {
  const deadline = Date.now() + limitMs;
  while (Date.now() < deadline) {
    let state: string;
    try {
      state = (await getAssignment(deps.db, id)).state;
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
  const all = await listAssignments(deps.db, w.id);
  // A group restarts whole (its members cannot run apart), the failed one too.
  const leaders = all.filter((a) => a.group_id && a.node_rank === 0);
  if (leaders.length) {
    for (const a of leaders) await restartWholeGroup(deps, a, "restarted by the operator");
    return;
  }
  const running = all.filter((a) => a.desired === "run");
  // A project at its max_replicas restarts in place: no second replica, even for a while.
  if (running.length === 1 && running[0].auto && (await replicaRoom(deps.db, w.project_id)).room > 0) {
    const old = running[0];
    const extra = await createAssignment(deps.db, w, { worker_id: old.worker_id, gpus: old.gpus }, true);
    await deps.fleet.reconcile();
    if (await readyOrNot(deps, extra.id, READY_WAIT_MS)) {
      await deleteAssignment(deps.db, old.id);
      log.info(`restart of ${w.project_slug}/${w.slug}: the new replica is ready, the old one stopped`);
    } else {
      // No room for two (or the new one failed): restart in place instead.
      await deleteAssignment(deps.db, extra.id);
      await bumpGeneration(deps.db, old.id);
      log.info(`restart of ${w.project_slug}/${w.slug}: restarted in place`);
    }
    await deps.fleet.reconcile();
    return;
  }
  for (const a of running) {
    await bumpGeneration(deps.db, a.id);
    await deps.fleet.reconcile();
    await readyOrNot(deps, a.id, READY_WAIT_MS);
  }
}

/** Starts a multi-node group anew, every member at once, with a fresh crash count. */
async function restartWholeGroup(deps: Deps, a: AssignmentView, reason: string): Promise<void> {
  deps.fleet.groups.forget(a.group_id!);
  await restartGroup(deps.db, a.group_id!, a.generation, reason);
  await deps.fleet.reconcile();
}

/** Admin routes that control a workload's replicas: start, stop, rolling restart, retry a failed one. */
export const controlRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["admin"] } })
    .post(
      "/workloads/:id/stop",
      async ({ params }) => {
        const w = await resolveWorkload(deps.db, params.id);
        await setPaused(deps.db, w.id, true);
        await audit(deps.db, "workload.stop", { type: "workload", id: w.id, label: `${w.project_slug}/${w.slug}` });
        for (const a of await listAssignments(deps.db, w.id))
          if (a.desired === "run") await setAssignmentDesired(deps.db, a.id, "idle", "stopped by the operator");
        await deps.fleet.reconcile();
        return deps.describeWorkload((await getWorkloadById(deps.db, w.id))!);
      },
      {
        detail: {
          summary: "Stop a workload: scale it to zero and keep it there until started (requests get 503, jobs wait)",
        },
      },
    )
    .post(
      "/workloads/:id/start",
      async ({ params }) => {
        const w = await resolveWorkload(deps.db, params.id);
        await setPaused(deps.db, w.id, false);
        await audit(deps.db, "workload.start", { type: "workload", id: w.id, label: `${w.project_slug}/${w.slug}` });
        await deps.fleet.reconcile();
        deps.fleet.scaling?.wake(w.id);
        return deps.describeWorkload((await getWorkloadById(deps.db, w.id))!);
      },
      { detail: { summary: "Start a stopped workload (its policy decides how many replicas run)" } },
    )
    .post(
      "/workloads/:id/restart",
      async ({ params, set }) => {
        const w = await resolveWorkload(deps.db, params.id);
        if (w.paused) throw conflict("the workload is stopped; start it instead", "workload_stopped");
        await audit(deps.db, "workload.restart", { type: "workload", id: w.id, label: `${w.project_slug}/${w.slug}` });
        void rollingRestart(deps, w).catch((e) => log.error(`restart of ${w.project_slug}/${w.slug} failed`, e));
        set.status = 202;
        return { restarting: true };
      },
      { detail: { summary: "Rolling restart: a new replica is ready before the old one stops when GPUs allow" } },
    )
    .post(
      "/assignments/:id/retry",
      async ({ params }) => {
        const a = await getAssignment(deps.db, params.id);
        if (a.state !== "failed") throw conflict(`replica ${a.id} is ${a.state}, not failed`, "not_failed");
        if (a.group_id) await restartWholeGroup(deps, a, "started again by the operator");
        else await bumpGeneration(deps.db, a.id);
        await audit(deps.db, "assignment.retry", { type: "assignment", id: a.id }, { workload_id: a.workload_id });
        await deps.fleet.reconcile();
        return getAssignment(deps.db, a.id);
      },
      { detail: { summary: "Start a failed replica again" } },
    );
