/**
 * What the soak serves: project `soak` with a live key and two fake-vLLM workloads, `alpha` with one
 * replica on each host's local worker, and `beta` with one replica on the first host's local worker
 * and one on the remote agent, each sending its jobs' results to all three receivers. With one host
 * that is `alpha` on the local worker and `beta` on the local worker and the remote agent; in a
 * cluster, while the first host is down `beta` is served by the remote agent alone, through the
 * other hosts (the agent joined the first host and learnt the others from it).
 */
import { allReady, benchProjectKey, createVllmWorkload, waitAssignments, type BenchAssignment } from "../lib";
import type { SoakAgent, SoakHost } from "./host";
import type { RuntimeRef } from "./faults";
import { RECEIVERS, type ReceiverName, type SoakReceiver } from "./receivers";

/** The project every workload of the soak is in. */
export const PROJECT = "soak";

/** One workload of the soak. */
export interface SoakWorkload {
  id: string;
  slug: string;
  model: string;
}

/** The served set-up: workloads, the live key, which receiver each webhook URL is, and the runtimes to kill. */
export interface SoakSetup {
  liveKey: string;
  workloads: SoakWorkload[];
  receiverOfUrl: Map<string, ReceiverName>;
  runtimes: RuntimeRef[];
  /** True when every replica is ready (those on the remote worker only while its agent runs). */
  whole(): Promise<boolean>;
}

/** A host of the soak and the id of its local worker (its own machine). */
export interface HostWorker {
  host: SoakHost;
  workerId: string;
}

/** Places `workloadId` by hand on `workerId` (replacing the automatic placement for the first one). */
async function place(host: SoakHost, workloadId: string, workerId: string): Promise<void> {
  await host.admin(`/admin/workloads/${workloadId}/assignments`, { body: { worker_id: workerId } });
}

/** The first host that is up (the admin API of any host of a cluster shows the same store). */
function upHost(hosts: SoakHost[]): SoakHost {
  return hosts.find((h) => h.up) ?? hosts[0];
}

/**
 * Creates the project, key, workloads and webhooks through the first host, and waits until every
 * replica is ready. `hosts` are the hosts with their local workers, the first one the agent's.
 */
export async function setupSoak(
  hosts: HostWorker[],
  agent: SoakAgent,
  receivers: Record<ReceiverName, SoakReceiver>,
): Promise<SoakSetup> {
  const first = hosts[0].host;
  const liveKey = await benchProjectKey(first, PROJECT);
  const alpha = {
    ...(await createVllmWorkload(first, { model: "soak-alpha", project: PROJECT, name: "alpha" })),
    model: "soak-alpha",
  };
  const beta = {
    ...(await createVllmWorkload(first, { model: "soak-beta", project: PROJECT, name: "beta" })),
    model: "soak-beta",
  };
  for (const h of hosts) await place(first, alpha.id, h.workerId);
  await place(first, beta.id, hosts[0].workerId);
  await place(first, beta.id, agent.workerId);
  const receiverOfUrl = new Map<string, ReceiverName>();
  for (const w of [alpha, beta]) {
    for (const name of RECEIVERS) {
      await first.admin(`/admin/workloads/${w.id}/webhooks`, { body: { url: receivers[name].url } });
      receiverOfUrl.set(receivers[name].url, name);
    }
  }
  await waitAssignments(first, alpha.id, (as) => as.length === hosts.length && allReady(as));
  await waitAssignments(first, beta.id, (as) => as.length === 2 && allReady(as));
  const all = hosts.map((h) => h.host);
  const whole = async () => {
    const host = upHost(all);
    for (const w of [alpha, beta]) {
      const as: BenchAssignment[] = (await host.admin(`/admin/workloads/${w.id}`)).assignments ?? [];
      const wanted = as.filter((a) => agent.running || a.worker_id !== agent.workerId);
      if (wanted.length === 0 || !wanted.every((a) => a.state === "ready")) return false;
    }
    return true;
  };
  // Killed in this order, one per runtime fault: with one host "local" names the host's machine.
  const on = (h: SoakHost) => (hosts.length === 1 ? "local" : h.name);
  const runtimes: RuntimeRef[] = [
    { label: `alpha (${on(first)})`, dataDir: first.dataDir, model: alpha.model },
    { label: "beta (remote agent)", dataDir: agent.dataDir, model: beta.model },
    ...hosts.slice(1).map(({ host }) => ({ label: `alpha (${on(host)})`, dataDir: host.dataDir, model: alpha.model })),
    { label: `beta (${on(first)})`, dataDir: first.dataDir, model: beta.model },
  ];
  return { liveKey, workloads: [alpha, beta], receiverOfUrl, runtimes, whole };
}
