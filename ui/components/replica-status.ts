/** A replica's state under its badge: how long it has been so, why, download progress, last output line. */
import { html } from "htm/preact";
import { since } from "../lib/format";
import { useLastLine } from "../lib/logs";
import type { Progress } from "../lib/types";
import { StateBadge } from "./ui";
import { DownloadProgress } from "./progress";

/** States on the way to ready, when the runtime's latest output line says most. */
const COMING_UP = new Set(["pending", "downloading", "installing", "starting"]);

/** What a status line needs of a replica (from a workload's assignments or a worker's replicas). */
export interface ReplicaLike {
  workloadId: string;
  assignmentId: string;
  state: string;
  reason?: string | null;
  progress?: Progress | null;
  updatedAt?: string;
}

/** The reason's look: an error when failed, a quiet note when idle or on its way. */
const reasonClass = (state: string) => (state === "failed" ? "reason" : state === "idle" ? "reason reason-idle" : "reason reason-quiet");

/** A reason; the runtime's last output that a failure carries is folded away under it. */
function Reason({ state, text }: { state: string; text: string }) {
  const [why, output] = text.split(/\n--- last output ---\n/);
  return html`<div class=${reasonClass(state)} aria-live="polite">${why}</div>
    ${output ? html`<details class="last-output"><summary>Last output</summary><pre>${output}</pre></details>` : null}`;
}

/**
 * A replica's badge with the time in its state, the reason, a download bar while `downloading`
 * and the runtime's last output line while it comes up. The badge and reason are announced when they change.
 */
export function ReplicaStatus({ r, now }: { r: ReplicaLike; now: number }) {
  const line = useLastLine(r.workloadId, r.assignmentId, COMING_UP.has(r.state));
  return html`<div class="replica-status" data-testid="replica-status">
    <div class="status-line">
      <span aria-live="polite"><${StateBadge} state=${r.state} /></span>
      ${r.updatedAt ? html`<span class="muted since" title=${new Date(r.updatedAt).toLocaleString()}>for ${since(r.updatedAt, now)}</span>` : null}
    </div>
    ${r.reason ? html`<${Reason} state=${r.state} text=${r.reason} />` : null}
    ${r.state === "downloading" ? html`<${DownloadProgress} progress=${r.progress} label="Model download" />` : null}
    ${line && COMING_UP.has(r.state) && !(r.reason && line.includes(r.reason)) ? html`<code class="last-line" title=${line}>${line}</code>` : null}
  </div>`;
}
