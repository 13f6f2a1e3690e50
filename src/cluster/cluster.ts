/**
 * This host's place in its cluster: its id, its row in `hosts` kept fresh by a heartbeat, whether it
 * leads, and the leader's chores of a cluster (jobs of a host that died go back to the queue, rows of
 * hosts long gone are dropped). With the embedded store it is a cluster of one that always leads.
 */
import type { SQL } from "bun";
import { inArray, eq } from "drizzle-orm";
import type { Db } from "../db";
import { hosts } from "../db/schema";
import { log } from "../log";
import { nowIso } from "../ids";
import {
  HOST_HEARTBEAT_MS,
  hostName,
  listHosts,
  pruneHosts,
  removeHost,
  touchHost,
  upsertHost,
  type HostView,
} from "./hosts";
import { LockLeadership, soleLeader, type Leadership } from "./leader";
import { plural } from "../words";

/** Where this host is reached, known once it listens. */
export interface HostAddress {
  url: string;
  agentUrl: string;
  fingerprint: string;
}

/** What `GET /admin/info` says of the cluster. */
export interface ClusterView {
  mode: "embedded" | "cluster";
  host_id: string;
  leader: { id: string; name: string; since: string | null } | null;
  hosts: (HostView & { leading: boolean })[];
}

/** This host in its cluster (see the module comment). */
export class Cluster {
  readonly leadership: Leadership;
  private timer?: ReturnType<typeof setInterval>;
  private beating = false;

  constructor(
    private db: Db,
    readonly hostId: string,
    private version: string,
    pg: SQL | undefined,
    /** Puts back in the queue the jobs of hosts not in `alive` (the jobs feature's own write): how many, and their workloads. */
    private requeueOrphans: (alive: string[]) => Promise<{ jobs: number; workloads: string[] }> = async () => ({
      jobs: 0,
      workloads: [],
    }),
  ) {
    this.leadership = pg ? new LockLeadership(pg) : soleLeader();
    this.leadership.onChange((leading) => void this.noteLeading(leading));
  }

  /** Whether this host runs the once-only duties now. */
  get leading(): boolean {
    return this.leadership.leading;
  }

  /** Records this host, starts its heartbeat and tries for the lead. */
  async start(address: HostAddress): Promise<void> {
    await upsertHost(this.db, {
      id: this.hostId,
      name: hostName(),
      url: address.url,
      agentUrl: address.agentUrl,
      fingerprint: address.fingerprint,
      version: this.version,
      leadingSince: null,
    });
    this.alive = (await listHosts(this.db)).filter((h) => h.alive);
    this.timer = setInterval(() => void this.beat(), HOST_HEARTBEAT_MS);
    await this.leadership.start();
  }

  /** The hosts alive at the last heartbeat (agents are told of them, to take work from each). */
  alive: HostView[] = [];

  private async beat(): Promise<void> {
    if (this.beating) return;
    this.beating = true;
    try {
      await touchHost(this.db, this.hostId);
      const before = this.alive;
      this.alive = (await listHosts(this.db)).filter((h) => h.alive);
      const gone = before.filter((h) => !this.alive.some((x) => x.id === h.id));
      for (const h of gone) for (const fn of this.goneListeners) fn(h.id);
      if (this.leading) await this.leaderChores();
    } catch (e) {
      log.warn(`could not record this host's heartbeat: ${(e as Error).message}`);
    } finally {
      this.beating = false;
    }
  }

  /** Jobs a dead host was running go back to the queue (at least once); long-gone hosts are forgotten. */
  private async leaderChores(): Promise<void> {
    const back = await this.requeueOrphans(this.alive.map((h) => h.id));
    if (back.jobs) {
      log.warn(`${plural(back.jobs, "job")} of a host that stopped answering will run again`);
      for (const fn of this.requeueListeners) fn(back.workloads);
    }
    await pruneHosts(this.db);
  }

  private async noteLeading(leading: boolean): Promise<void> {
    await this.db
      .update(hosts)
      .set({ leadingSince: leading ? nowIso() : null })
      .where(eq(hosts.id, this.hostId))
      .catch((e) => log.warn(`could not record the lead: ${(e as Error).message}`));
  }

  private goneListeners: ((hostId: string) => void)[] = [];
  private requeueListeners: ((workloadIds: string[]) => void)[] = [];

  /** Calls `fn` with the workloads whose jobs a dead host was running, once they are back in the queue (runners must be woken for them). */
  onJobsRequeued(fn: (workloadIds: string[]) => void): void {
    this.requeueListeners.push(fn);
  }

  /** Calls `fn` with the id of each host that stops answering (its machine's replicas are lost with it). */
  onHostGone(fn: (hostId: string) => void): void {
    this.goneListeners.push(fn);
  }

  /** Where agents reach each live host, and the certificate to pin (sent with join and heartbeat answers). */
  peers(): { id: string; agent_url: string; fingerprint: string }[] {
    return this.alive.map((h) => ({ id: h.id, agent_url: h.agent_url, fingerprint: h.fingerprint }));
  }

  /** The cluster as `/admin/info` shows it: the hosts with their heartbeats, and who leads. */
  async view(): Promise<ClusterView> {
    const all = await listHosts(this.db);
    const rows = await this.db
      .select({ id: hosts.id, since: hosts.leadingSince })
      .from(hosts)
      .where(
        inArray(
          hosts.id,
          all.map((h) => h.id),
        ),
      );
    const since = new Map(rows.map((r) => [r.id, r.since]));
    // A row may still say it leads after its host died: the newest live claim is the leader.
    const leader = all
      .filter((h) => h.alive && since.get(h.id))
      .sort((a, b) => (since.get(b.id)! > since.get(a.id)! ? 1 : -1))[0];
    return {
      mode: this.leadership instanceof LockLeadership ? "cluster" : "embedded",
      host_id: this.hostId,
      leader: leader ? { id: leader.id, name: leader.name, since: since.get(leader.id) ?? null } : null,
      hosts: all.map((h) => ({ ...h, leading: h.id === leader?.id })),
    };
  }

  /** Stops the heartbeat, gives up the lead and takes this host off the list (a clean stop). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.leadership.stop();
    await removeHost(this.db, this.hostId).catch(() => {});
  }
}
