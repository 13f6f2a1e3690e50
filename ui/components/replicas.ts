/** A workload's replicas: where each runs, its state with progress under the badge (and Retry when failed), remove. */
import { html } from "htm/preact";
import { api } from "../lib/api";
import { plural } from "../lib/format";
import { useAction, useNow } from "../lib/hooks";
import type { Assignment, Workload, Worker } from "../lib/types";
import { ConfirmButton, ErrorNote } from "./ui";
import { replicaPlace, ReplicaStatus } from "./replica-status";
import { can } from "../lib/me";

/** Remove a replica placed by hand (its runtime stops). */
function RemoveReplica({ a, worker, onChange }: { a: Assignment; worker: string; onChange(): unknown }) {
  const remove = useAction(() => api(`/admin/assignments/${a.id}`, { method: "DELETE" }).then(() => true));
  if (!can("workload.change")) return null;
  return html`<${ConfirmButton} class="danger small" label="Remove" title="Remove this replica?" confirm="Remove replica" onConfirm=${async () => (await remove.run()) && onChange()} body=${html`<p>Its runtime on ${worker} stops.</p>`} />
    <${ErrorNote} error=${remove.error} />`;
}

/** "leader · member 0 of 2" / "member 1 of 2" (with its group endpoint, once known). */
const memberLabel = (a: Assignment, nodes: number) =>
  `${a.node_rank === 0 ? "leader · " : ""}member ${a.node_rank} of ${nodes}${a.endpoint ? ` · ${a.endpoint}` : ""}`;

/** The replicas table; the state column holds each replica's progress and, when it failed, Retry. */
export function Replicas({ w, workers, onChange }: { w: Workload; workers: Worker[]; onChange(): unknown }) {
  const now = useNow();
  const name = (id: string) => workers.find((x) => x.id === id)?.name ?? id;
  const list = w.assignments ?? [];
  const manual = list.some((a) => !a.auto);
  return html`<section aria-labelledby="replicas"><h2 id="replicas">Replicas</h2>
    ${w.nodes > 1 ? html`<p class="muted">One replica spans ${w.nodes} machines: its members start, stop and restart together, and the leader receives the requests.</p>` : null}
    ${w.scheduling_error ? html`<p class="note error" role="alert">${w.scheduling_error}</p>` : null}
    ${
      list.length === 0
        ? html`<p class="muted">No replica yet.</p>`
        : html`<div class="table-wrap"><table>
      <thead><tr><th scope="col">Worker</th><th scope="col">State</th><th scope="col">In flight</th>${manual ? html`<th scope="col"><span class="offscreen">Actions</span></th>` : null}</tr></thead>
      <tbody>${list.map(
        (a) => html`<tr key=${a.id}>
        <td>${name(a.worker_id)}<div class="muted small-text"><span data-testid="replica-gpus">${replicaPlace(a, w.backend)}</span>${a.auto && !a.group_id && !["stopped", "idle", "sleeping"].includes(a.state) ? " · automatic" : ""}</div>${a.group_id ? html`<div class="small-text" data-role="member">${memberLabel(a, w.nodes)}</div>` : null}</td>
        <td><${ReplicaStatus} now=${now} onChange=${onChange} r=${{ workloadId: w.id, assignmentId: a.id, state: a.state, reason: a.reason, progress: a.progress, updatedAt: a.updated_at }} /></td>
        <td>${a.group_id && a.node_rank > 0 ? html`<span class="muted" title="the leader receives the group's requests">—</span>` : html`<span data-testid="in-flight" title=${`${plural(a.in_flight, "request")} running of the ${plural(a.concurrency, "slot")} this replica serves at once`}>${a.in_flight} / ${a.concurrency}</span>`}</td>
        ${manual ? html`<td>${a.auto ? null : html`<${RemoveReplica} a=${a} worker=${name(a.worker_id)} onChange=${onChange} />`}</td>` : null}
      </tr>`,
      )}</tbody></table></div>`
    }
  </section>`;
}
