/** The overview's banner: failed replicas and offline workers, each with a link to act on it. */
import { html } from "htm/preact";
import { ago } from "../lib/format";
import type { Worker } from "../lib/types";
import { can } from "../lib/me";

/** What needs attention in a list of workers: their failed replicas and the workers that went offline. */
export function attentionOf(workers: Worker[]) {
  const failed = workers.flatMap((w) =>
    w.replicas.filter((r) => r.state === "failed").map((r) => ({ ...r, worker: w.name })),
  );
  // A worker that never joined is waiting, not lost: the workers page says so.
  const offline = workers.filter((w) => w.state === "offline" && w.last_seen_at);
  return { failed, offline };
}

/** The banner, or nothing when all is well. */
export function Attention({ workers }: { workers: Worker[] }) {
  const { failed, offline } = attentionOf(workers);
  if (!failed.length && !offline.length) return null;
  return html`<section class="attention" aria-labelledby="attention" data-testid="attention">
    <h2 id="attention">Needs attention</h2>
    <ul>
      ${failed.map(
        (r) => html`<li key=${r.assignment_id}>
        <strong>${r.workload}</strong>: a replica failed on ${r.worker}${r.reason ? html` — <span class="attention-reason">${r.reason.split("\n")[0].replace(/\.$/, "")}</span>` : null}.${" "}<a href=${`/workloads/${r.workload_id}`}>Open workload</a>${can("logs.read") ? html` · <a href=${`/workloads/${r.workload_id}/logs`}>Logs</a>` : null}
      </li>`,
      )}
      ${offline.map(
        (w) => html`<li key=${w.id}>
        <strong>${w.name}</strong>: worker offline, last seen ${ago(w.last_seen_at)}.${" "}<a href="/workers">Workers</a>
      </li>`,
      )}
    </ul>
  </section>`;
}
