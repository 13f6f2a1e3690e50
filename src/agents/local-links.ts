/**
 * In a cluster, this host's own machine serves every host: its local agent, which reaches this host
 * in-process, also takes work from the other hosts over HTTPS like a remote agent, with a credential
 * this host issues for it at start, pinning each host's certificate as the cluster lists it.
 */
import type { HostLink } from "../../agent/agent";
import { ClusterLink } from "../../agent/cluster-link";
import { peerState, RemoteHostLink } from "../../agent/remote";
import type { Db } from "../db";
import { log } from "../log";
import { issueLocalCredential } from "./service";
import { HOST_HEARTBEAT_MS } from "../cluster/hosts";
import type { Cluster } from "../cluster/cluster";

/** The local agent's cluster link: `wrap` its in-process link, `start` once it has registered, `stop` at the end. */
export function localClusterLinks(db: Db, cluster: Cluster, version: string) {
  let link: ClusterLink | undefined;
  let base: { worker_id: string; credential: string } | undefined;
  let timer: ReturnType<typeof setInterval> | undefined;
  const others = () => cluster.peers().filter((h) => h.id !== cluster.hostId);
  return {
    wrap(primary: HostLink): HostLink {
      link = new ClusterLink(primary, {
        connect: async (h) =>
          new RemoteHostLink(await peerState(base!, h), version, (e) =>
            log.warn(`host ${h.id} refused this machine's agent: ${e.message}`),
          ),
        onTrouble: (h, e) =>
          log.warn(`this machine's agent cannot take work from host ${h.id} (${h.agent_url}): ${e.message}`),
      });
      return link;
    },
    async start(workerId: string): Promise<void> {
      base = { worker_id: workerId, credential: await issueLocalCredential(db, workerId) };
      await link?.setPeers(others());
      timer = setInterval(() => void link?.setPeers(others()), HOST_HEARTBEAT_MS);
    },
    async stop(): Promise<void> {
      clearInterval(timer);
      await link?.stop();
    },
  };
}
