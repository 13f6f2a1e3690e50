/**
 * A host's services tied to its cluster: the once-only duties follow the lead (the scaler with
 * placement, the webhook delivery sweeper), and what other hosts change or signal reaches this
 * host's parts (a placement made by the leader wakes this host's agents; a job submitted elsewhere
 * wakes this host's job runner). With the embedded store the one host leads from the start and no
 * other host signals anything.
 */
import type { SQL } from "bun";
import { eq } from "drizzle-orm";
import { workers } from "../db/schema";
import type { Db } from "../db";
import { coalesce, onChange, onSignal, signal, SIGNALS } from "../db/notify";
import { log } from "../log";
import type { Cluster } from "./cluster";

/** The parts a host's cluster drives. */
export interface ClusterParts {
  fleet: { reconcile(): Promise<void>; setOffline(workerId: string, offline: boolean): Promise<void> };
  agents: { lose(workerId: string, why: string): void };
  scaler: { start(): void; standBy(): void };
  deliveries: { start(): void; standBy(): void; wake(): void };
  jobs: { wake(workloadId?: string): void };
}

/** Starts and stops the leader's duties with the lead; returns a stop for the listeners set up here. */
export async function wireCluster(
  db: Db,
  pg: SQL | undefined,
  cluster: Cluster,
  parts: ClusterParts,
): Promise<() => Promise<void>> {
  cluster.leadership.onChange((leading) => {
    if (leading) {
      parts.scaler.start();
      parts.deliveries.start();
    } else {
      parts.scaler.standBy();
      parts.deliveries.standBy();
    }
    void parts.fleet.reconcile();
  });
  // A host that stops answering takes its machine's replicas with it: its requests go elsewhere now.
  cluster.onHostGone((hostId) => {
    void db
      .select({ id: workers.id })
      .from(workers)
      .where(eq(workers.hostId, hostId))
      .then(async (rows) => {
        for (const w of rows) {
          parts.agents.lose(w.id, `host ${hostId} stopped answering`);
          await parts.fleet.setOffline(w.id, true);
        }
      })
      .catch((e) => log.warn(`could not take host ${hostId}'s machine out of service`, e));
  });
  // Jobs of a dead host back in the queue: every host's runner looks for them now (no other job may come to wake one).
  const jobs = jobsWaker(db, pg, parts.jobs);
  cluster.onJobsRequeued((workloads) => workloads.forEach((w) => jobs.wake(w)));
  // A change of workloads, workers or placements by any host: re-place (the leader) and wake agents.
  const unwatch = onChange(db, (table) => {
    if (["workloads", "workers", "assignments", "projects", "*"].includes(table)) void parts.fleet.reconcile();
  });
  if (!pg) return async () => unwatch();
  const stops = [
    // The payload: the workloads that got jobs, comma-separated ("" for any).
    await onSignal(pg, SIGNALS.jobs, (workloads) =>
      workloads ? workloads.split(",").forEach((w) => parts.jobs.wake(w)) : parts.jobs.wake(),
    ),
    await onSignal(pg, SIGNALS.deliveries, () => parts.deliveries.wake()),
  ];
  return async () => {
    unwatch();
    for (const s of stops) await s().catch((e) => log.debug(`could not stop listening: ${(e as Error).message}`));
  };
}

/** Wakes job runners on every host (a job was stored for `workloadId`): this one at once, the others by signal. */
export function jobsWaker(
  db: Db,
  pg: SQL | undefined,
  local: { wake(workloadId?: string): void },
): { wake(workloadId?: string): void } {
  const others = coalesce((payload) => signal(db, pg, SIGNALS.jobs, payload));
  return {
    wake: (workloadId) => {
      local.wake(workloadId);
      if (pg) others(workloadId ?? "");
    },
  };
}

/** Wakes the delivery sweeper wherever it runs (a job finished): here at once, on the leader by signal. */
export function deliveriesWaker(db: Db, pg: SQL | undefined, local: { wake(): void }): () => void {
  const others = coalesce(() => signal(db, pg, SIGNALS.deliveries));
  return () => {
    local.wake();
    if (pg) others();
  };
}
