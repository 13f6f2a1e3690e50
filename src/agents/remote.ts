import type { Db } from "../db";
import { log } from "../log";
import type { Fleet } from "../workers/fleet";
import { listWorkers } from "../workers/service";
import { AgentHub } from "./hub";

/**
 * Liveness of remote agents: each request of an agent counts as a sign of life; one silent past the
 * timeout is offline — its replicas leave the dispatcher (queued work goes to other replicas), the
 * requests it held fail over or end with a clear error, and jobs it ran run again.
 */
export class RemoteAgents {
  private lastSeen = new Map<string, number>();
  private offline = new Set<string>();
  private timer?: ReturnType<typeof setInterval>;

  constructor(
    private db: Db,
    private fleet: Fleet,
    private timeoutMs: number,
    /** The channel to the agents' replicas (the fleet's targets send through it). */
    readonly hub: AgentHub = new AgentHub(),
  ) {}

  /** Starts watching for silent agents. */
  async start(): Promise<void> {
    const now = Date.now();
    for (const w of await listWorkers(this.db))
      if (w.kind === "remote") this.lastSeen.set(w.id, w.last_seen_at ? Date.parse(w.last_seen_at) : now);
    this.timer = setInterval(() => this.check(), Math.min(1000, this.timeoutMs / 3));
  }

  /** Records a sign of life from an agent. */
  touch(workerId: string): void {
    this.lastSeen.set(workerId, Date.now());
    if (this.offline.delete(workerId)) {
      log.info(`worker ${workerId} is back online`);
      void this.fleet.setOffline(workerId, false).catch((e) => log.warn(`could not mark worker ${workerId} online`, e));
    }
  }

  private check(): void {
    const now = Date.now();
    for (const [id, seen] of this.lastSeen) {
      if (now - seen <= this.timeoutMs || this.offline.has(id)) continue;
      this.offline.add(id);
      log.warn(
        `worker ${id} is offline (silent for ${Math.round((now - seen) / 1000)} s): its work goes to other replicas`,
      );
      this.lose(id, `worker ${id} went offline`);
      void this.fleet.setOffline(id, true).catch((e) => log.warn(`could not mark worker ${id} offline`, e));
    }
  }

  /** Takes a worker out of service at once (offline or deleted). */
  lose(workerId: string, why: string): void {
    this.fleet.forgetWorker(workerId);
    this.hub.failWorker(workerId, why);
  }

  /** Forgets a deleted worker. */
  forget(workerId: string): void {
    this.lose(workerId, `worker ${workerId} was deleted`);
    this.lastSeen.delete(workerId);
    this.offline.delete(workerId);
  }

  /** Stops the liveness checks. */
  stop(): void {
    clearInterval(this.timer);
  }
}
