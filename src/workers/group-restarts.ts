import type { Db } from "../db";
import { log } from "../log";
import { withoutOutput } from "../../agent/reason";
import { SUPERVISOR_DEFAULTS, type RestartPolicy } from "../../agent/supervisor";
import type { AssignmentView } from "./service";
import { failGroup, noteGroup, restartGroup } from "./groups";

/** Options of `GroupRestarts`; time is injected for tests. */
export interface GroupRestartOptions {
  /** Back-off and crash limit, as a single runtime's (`--restart-backoff-ms`, `--max-crashes`). */
  policy?: RestartPolicy;
  /** Told after a group was restarted or given up (agents reconcile). */
  onChange: () => void;
  /** Writes a line into the log of every member of a group (what happened to the group, and why). */
  onNote?: (groupId: string, line: string) => void;
  now?: () => number;
  setTimeout?: (fn: () => void, ms: number) => unknown;
}

/**
 * Restarts multi-node groups as one: when a member fails (its process exited, or it could not
 * start), every member of the group starts anew after the usual back-off; past the crash limit the
 * whole group stops and shows `failed`, naming the member. A member's own agent never restarts it
 * alone (the others would wait on a rendezvous that is gone).
 */
export class GroupRestarts {
  private crashes = new Map<string, number[]>();
  /** Groups with a restart scheduled: further failures of that generation are the same event. */
  private pending = new Set<string>();
  private readonly policy: RestartPolicy;
  private readonly now: () => number;
  private readonly setTimer: (fn: () => void, ms: number) => unknown;

  constructor(
    private db: Db,
    private opts: GroupRestartOptions,
  ) {
    this.policy = opts.policy ?? SUPERVISOR_DEFAULTS.restart;
    this.now = opts.now ?? Date.now;
    this.setTimer = opts.setTimeout ?? ((fn, ms) => setTimeout(fn, ms));
  }

  /** A member of a running group failed: schedules the group's restart, or gives the group up. */
  async memberFailed(a: AssignmentView, workerName: string, reason: string | undefined): Promise<void> {
    const group = a.group_id!;
    const why = `member ${a.node_rank} on worker "${workerName}" failed${reason ? `: ${firstLine(reason)}` : ""}`;
    // The others of a group often fail with it (a leader loses its peer): each failure goes to the
    // log, whichever came first; the members' reason stays the first one's.
    if (this.pending.has(group)) return void this.opts.onNote?.(group, `${why} (the group is restarting already)`);
    const t = this.now();
    const { baseMs, maxMs, maxCrashes, windowMs } = this.policy;
    const times = [...(this.crashes.get(group) ?? []).filter((at) => t - at < windowMs), t];
    this.crashes.set(group, times);
    if (times.length > maxCrashes) {
      this.crashes.delete(group);
      const given = `${why}; the group failed ${times.length} times within ${Math.round(windowMs / 1000)} s, giving up (restart the workload to try again)`;
      this.opts.onNote?.(group, given);
      await failGroup(this.db, group, given);
      this.opts.onChange();
      return;
    }
    const delay = Math.min(maxMs, baseMs * 2 ** (times.length - 1));
    this.pending.add(group);
    this.opts.onNote?.(group, `${why}; restarting the whole group in ${delay} ms`);
    await noteGroup(this.db, group, `${why}; restarting the whole group in ${delay} ms`, a.id);
    this.setTimer(() => {
      void restartGroup(this.db, group, a.generation, `restarted after ${why}`)
        .then(() => this.opts.onChange())
        .catch((e) => log.warn(`could not restart group ${group}`, e))
        .finally(() => this.pending.delete(group));
    }, delay);
  }

  /** Forgets a group's crash history (the operator restarted it). */
  forget(groupId: string): void {
    this.crashes.delete(groupId);
  }
}

/** The first line of a reason, without the runtime's quoted output (which stays in the member's log). */
const firstLine = (reason: string) => withoutOutput(reason).split("\n")[0];
