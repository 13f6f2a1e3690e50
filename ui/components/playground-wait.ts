/**
 * What a playground answer shows before its first token: while no replica of the workload is ready
 * (scaled to zero, starting, downloading), each replica's progress as the workload page shows it
 * (state and time in it, reason, download or printed load progress, the runtime's last line) and how
 * long the request has waited; once one is ready, just the wait for the first token.
 */
import { html } from "htm/preact";
import { useApi, useNow } from "../lib/hooks";
import { duration } from "../lib/format";
import type { Workload } from "../lib/types";
import { ReplicaStatus } from "./replica-status";

/** How often the replicas are read while a request waits. */
const POLL_MS = 1000;

/**
 * The wait before the first token of an answer from workload `workloadId`, sent at `since` (epoch ms);
 * polls the workload only while it is shown.
 * @example html`<${AnswerWait} workloadId=${w.id} since=${sentAt} />`
 */
export function AnswerWait({ workloadId, since }: { workloadId: string; since: number }) {
  const wl = useApi<Workload>(`/admin/workloads/${encodeURIComponent(workloadId)}`, POLL_MS);
  const now = useNow(500);
  const waited = Math.max(0, (now - since) / 1000);
  const replicas = wl.data?.assignments ?? [];
  const cold = !!wl.data && !replicas.some((a) => a.state === "ready");
  if (!cold) {
    return html`<div class="text answer-wait" aria-label="Waiting for the first token">…${waited >= 2 ? html` <span class="muted">waiting ${duration(waited)}</span>` : null}</div>`;
  }
  const what =
    replicas.length === 0
      ? "Waiting for a replica to be placed"
      : replicas.some((a) => a.state === "sleeping" || a.state === "waking")
        ? "Waking the model (it was asleep: a moment, not a cold start)"
        : replicas.some((a) => a.state === "idle")
          ? "Starting the model (it was scaled to zero)"
          : "Waiting for the model to start";
  return html`<div class="cold-start" data-testid="cold-start" aria-label="Replica progress">
    <p class="cold-start-head"><strong>${what}</strong> <span class="muted" data-testid="waited">· waiting ${duration(waited)}</span></p>
    ${replicas.map((a) => html`<${ReplicaStatus} key=${a.id} now=${now} r=${{ workloadId, assignmentId: a.id, state: a.state, reason: a.reason, progress: a.progress, updatedAt: a.updated_at }} />`)}
    <p class="muted small-text">The answer follows as soon as a replica is ready.</p>
  </div>`;
}
