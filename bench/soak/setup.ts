/**
 * What the soak serves: project `soak` with a live key and two fake-vLLM workloads, `alpha` on the
 * host's local worker and `beta` with one replica on the local worker and one on the remote agent,
 * each sending its jobs' results to all three receivers.
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

/** Places `workloadId` by hand on `workerId` (replacing the automatic placement for the first one). */
async function place(host: SoakHost, workloadId: string, workerId: string): Promise<void> {
  await host.admin(`/admin/workloads/${workloadId}/assignments`, { body: { worker_id: workerId } });
}

/** Creates the project, key, workloads and webhooks, and waits until every replica is ready. */
export async function setupSoak(host: SoakHost, agent: SoakAgent, receivers: Record<ReceiverName, SoakReceiver>): Promise<SoakSetup> {
  const liveKey = await benchProjectKey(host, PROJECT);
  const workers: { id: string; kind: string }[] = await host.admin("/admin/workers");
  const local = workers.find((w) => w.kind === "local");
  if (!local) throw new Error(`no local worker: ${JSON.stringify(workers)}`);
  const alpha = { ...(await createVllmWorkload(host, { model: "soak-alpha", project: PROJECT, name: "alpha" })), model: "soak-alpha" };
  const beta = { ...(await createVllmWorkload(host, { model: "soak-beta", project: PROJECT, name: "beta" })), model: "soak-beta" };
  await place(host, alpha.id, local.id);
  await place(host, beta.id, local.id);
  await place(host, beta.id, agent.workerId);
  const receiverOfUrl = new Map<string, ReceiverName>();
  for (const w of [alpha, beta]) {
    for (const name of RECEIVERS) {
      await host.admin(`/admin/workloads/${w.id}/webhooks`, { body: { url: receivers[name].url } });
      receiverOfUrl.set(receivers[name].url, name);
    }
  }
  await waitAssignments(host, alpha.id, (as) => as.length === 1 && allReady(as));
  await waitAssignments(host, beta.id, (as) => as.length === 2 && allReady(as));
  const whole = async () => {
    for (const w of [alpha, beta]) {
      const as: BenchAssignment[] = (await host.admin(`/admin/workloads/${w.id}`)).assignments ?? [];
      const wanted = as.filter((a) => agent.running || a.worker_id !== agent.workerId);
      if (wanted.length === 0 || !wanted.every((a) => a.state === "ready")) return false;
    }
    return true;
  };
  const runtimes: RuntimeRef[] = [
    { label: "alpha (local)", dataDir: host.dataDir, model: alpha.model },
    { label: "beta (remote agent)", dataDir: agent.dataDir, model: beta.model },
    { label: "beta (local)", dataDir: host.dataDir, model: beta.model },
  ];
  return { liveKey, workloads: [alpha, beta], receiverOfUrl, runtimes, whole };
}
