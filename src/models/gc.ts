/**
 * The collection of unused tenant models: a model pulled because a project's workload named it
 * (never one the admin pulled by hand) that no workload has used for `--model-gc-after-hours` is
 * removed through the store's own removal (files, row, audit entry), which refuses one in use.
 * The clock is injected, so a test drives it without timers.
 */
import type { Db } from "../db";
import { log } from "../log";
import type { ModelManager } from "./manager";
import { listModelRows, usersOfModels } from "./service";
import { setUnusedSince, tenancy } from "./tenants";

/** Marks unused tenant models and removes those unused past the grace period. */
export class ModelCollector {
  constructor(
    private db: Db,
    private models: Pick<ModelManager, "remove">,
    /** Grace period in ms (0: nothing is collected). */
    private afterMs: number,
    private now: () => number = Date.now,
  ) {}

  /**
   * Notes since when each tenant model has had no workload (cleared when one uses it again) and
   * returns those unused for the whole grace period. Cheap: called after every workload change.
   */
  async mark(): Promise<{ id: string; project: string }[]> {
    if (this.afterMs <= 0) return [];
    const tenants = await tenancy(this.db);
    if (tenants.size === 0) return [];
    const users = await usersOfModels(this.db, await listModelRows(this.db));
    const now = this.now();
    const due: { id: string; project: string }[] = [];
    for (const [id, t] of tenants) {
      if (users.get(id)?.length) {
        if (t.unused_since) await setUnusedSince(this.db, id, null);
      } else if (!t.unused_since) await setUnusedSince(this.db, id, new Date(now).toISOString());
      else if (now - Date.parse(t.unused_since) >= this.afterMs)
        due.push({ id, project: t.project_slug ?? t.project_id });
    }
    return due;
  }

  /** Removes every tenant model unused for the grace period; returns the sources removed. */
  async sweep(): Promise<string[]> {
    const removed: string[] = [];
    for (const m of await this.mark()) {
      try {
        const v = await this.models.remove(m.id, {
          reason: `unused for ${this.afterMs / 3_600_000} h`,
          pulled_for: m.project,
        });
        removed.push(v.source);
        log.info(
          `removed model ${v.source}: pulled for project "${m.project}" and unused for ${this.afterMs / 3_600_000} h`,
        );
      } catch (e) {
        // Used again since it was marked (409 model_in_use), or already gone: it stays until the next sweep.
        log.debug(`model ${m.id} not collected: ${(e as Error).message}`);
      }
    }
    return removed;
  }
}
