/**
 * An agent's links to every host of a cluster. The live request queue stays in each host's memory,
 * so a worker takes work from each host (a long poll per host, only while it has a free slot), and
 * tells each host what runs and how it goes (heartbeats, replica reports, logs): a request that
 * arrives at any host reaches this worker's runtimes, and a host that dies costs only the requests
 * in flight on it. What to run is the same from every host (the shared store); it is asked of the
 * primary host (the one joined, or for a host's own machine the host itself) and of another when
 * that one is away. With one host there are no peers and this is the primary link as it was.
 */
import type { HostLink } from "./agent";
import type { LogRing } from "./ring";
import type { MachineInfo, ReplicaReport, ReplicaSpec } from "./protocol";
import { WorkPuller } from "./puller";
import type { PeerHost, RemoteHostLink } from "./remote";

/** A peer host's link and the work puller on it. */
interface Peer {
  host: PeerHost;
  link: RemoteHostLink;
  puller: WorkPuller;
}

/** How the cluster link reaches a peer host (pinning its certificate) and tells of trouble. */
export interface ClusterLinkOptions {
  /** Opens a link to a peer host; rejects when it cannot be reached or its certificate is not the one given. */
  connect(host: PeerHost): Promise<RemoteHostLink>;
  /** Told when the peers change (to keep them for the next start). */
  onPeers?(hosts: PeerHost[]): void;
  /** Told of a peer that could not be reached (it is tried again at the next list). */
  onTrouble?(host: PeerHost, e: Error): void;
}

/** The composite link an Agent is given (see the module comment). */
export class ClusterLink implements HostLink {
  private peers = new Map<string, Peer>();
  private connecting = new Set<string>();
  private reports = new Map<string, ReplicaReport>();
  private listeners = new Set<() => void>();
  private forwarded = new Set<string>();
  private stopped = false;

  constructor(
    private primary: HostLink & { replica?(id: string): ReplicaReport | undefined },
    private opts: ClusterLinkOptions,
  ) {
    primary.subscribe(() => this.changed());
  }

  /** The hosts to take work from besides the primary: new ones are connected, gone ones dropped. */
  async setPeers(hosts: PeerHost[]): Promise<void> {
    if (this.stopped) return;
    const wanted = new Map(hosts.map((h) => [h.id, h]));
    for (const [id, p] of this.peers) {
      const h = wanted.get(id);
      if (h && h.agent_url === p.host.agent_url && h.fingerprint === p.host.fingerprint) continue;
      this.peers.delete(id);
      p.link.stop();
      void p.puller.stop();
    }
    await Promise.all(hosts.filter((h) => !this.peers.has(h.id) && !this.connecting.has(h.id)).map((h) => this.add(h)));
    this.opts.onPeers?.(hosts);
  }

  private async add(host: PeerHost): Promise<void> {
    this.connecting.add(host.id);
    try {
      const link = await this.opts.connect(host);
      if (this.stopped) return link.stop();
      link.subscribe(() => this.changed());
      const puller = new WorkPuller(link, (id) => this.replica(id));
      this.peers.set(host.id, { host, link, puller });
      puller.start();
      // The new host learns at once what runs here.
      for (const r of this.reports.values()) link.report("", r);
      this.changed();
    } catch (e) {
      this.opts.onTrouble?.(host, e as Error);
    } finally {
      this.connecting.delete(host.id);
    }
  }

  /** The ids of the peer hosts linked now. */
  peerIds(): string[] {
    return [...this.peers.keys()];
  }

  private changed(): void {
    for (const cb of this.listeners) cb();
  }

  register(machine: MachineInfo): Promise<string> {
    return this.primary.register(machine);
  }

  async heartbeat(workerId: string, machine: MachineInfo): Promise<void> {
    await Promise.all(
      [this.primary, ...[...this.peers.values()].map((p) => p.link)].map((l) =>
        l.heartbeat(workerId, machine).catch(() => {}),
      ),
    );
  }

  /** What to run: from the primary host, else from any peer that answers (they read the same store). */
  async desired(workerId: string): Promise<ReplicaSpec[]> {
    try {
      return await this.primary.desired(workerId);
    } catch (e) {
      for (const p of this.peers.values()) {
        try {
          return await p.link.desired();
        } catch {
          // try the next one
        }
      }
      throw e;
    }
  }

  report(workerId: string, r: ReplicaReport): void {
    if (r.state === "stopped") this.reports.delete(r.assignment_id);
    else this.reports.set(r.assignment_id, r);
    this.primary.report(workerId, r);
    for (const p of this.peers.values()) p.link.report(workerId, r);
  }

  /** The latest report of a replica (its runtime URL once ready), for work taken from any host. */
  replica(id: string): ReplicaReport | undefined {
    return this.reports.get(id) ?? this.primary.replica?.(id);
  }

  /** The primary's ring of a replica; its output goes to every peer host too. */
  ringFor(id: string): LogRing {
    const ring = this.primary.ringFor(id);
    if (!this.forwarded.has(id)) {
      this.forwarded.add(id);
      ring.subscribe((chunk) => {
        for (const p of this.peers.values()) p.link.queueLog(id, chunk);
      });
    }
    return ring;
  }

  subscribe(cb: () => void): () => void {
    this.listeners.add(cb);
    return () => this.listeners.delete(cb);
  }

  /** Stops every peer link and puller (the primary is its owner's to stop). */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(
      [...this.peers.values()].map((p) => {
        p.link.stop();
        return p.puller.stop();
      }),
    );
    this.peers.clear();
  }
}
