/** A replica's state under its badge: how long it has been so, why, download or printed progress, last output line, Retry when failed. */
import { html } from "htm/preact";
import { api } from "../lib/api";
import { since } from "../lib/format";
import { useAction } from "../lib/hooks";
import { percentIn, useLastLine } from "../lib/logs";
import type { Progress } from "../lib/types";
import { ErrorNote, StateBadge } from "./ui";
import { DownloadProgress } from "./progress";
import { splitReason } from "../../agent/reason";
import { can } from "../lib/me";

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

/** States in which a replica has no runtime process: it runs nowhere. */
const NOT_RUNNING = new Set(["stopped", "idle"]);

/** What a placement line needs of a replica (a workload's assignment, or a worker's replica). */
export interface Placed {
  state: string;
  gpu_indices: number[];
  /** The compute backend the ready runtime reports ("CUDA", "CPU (GPU build unavailable: …)"). */
  backend?: string | null;
}

/**
 * Where a replica runs, in one wording for every page: the backend the agent reports wins over the
 * GPUs it was given (one that fell back to the CPU says so, never "GPU 0"); Ollama's shared daemon
 * picks its GPUs itself; a stopped or scaled-to-zero replica runs nowhere; a failed one names what it
 * was given. `engine` is the workload's backend (llamacpp, vllm, ollama…).
 * @example replicaPlace({ state: "ready", gpu_indices: [0], backend: "CPU (GPU build unavailable: x)" }) // → "CPU (GPU build unavailable: x)"
 * @example replicaPlace({ state: "ready", gpu_indices: [0, 1], backend: "CUDA" }) // → "GPU 0, 1 · CUDA"
 * @example replicaPlace({ state: "stopped", gpu_indices: [0] }) // → "not running"
 */
export function replicaPlace(r: Placed, engine?: string | null): string {
  if (NOT_RUNNING.has(r.state)) return "not running";
  const gpus = r.gpu_indices.length ? `GPU ${r.gpu_indices.join(", ")}` : "CPU";
  if (r.state === "failed") return `not running (was given ${gpus === "CPU" ? "the CPU" : gpus})`;
  // Asleep: its process is kept on those GPUs, their memory freed until it wakes.
  if (r.state === "sleeping") return `asleep on ${gpus} (GPU memory freed)`;
  if (engine === "ollama") return "GPU chosen by Ollama";
  if (r.backend && (r.backend.startsWith("CPU") || !r.gpu_indices.length)) return r.backend;
  return `${gpus}${r.backend ? ` · ${r.backend}` : ""}`;
}

/** The reason's look: an error when failed, a quiet note when idle or on its way. */
const reasonClass = (state: string) =>
  state === "failed"
    ? "reason"
    : state === "idle" || state === "sleeping"
      ? "reason reason-idle"
      : "reason reason-quiet";

/** A reason; the runtime's last output that a failure carries is folded away under it. */
function Reason({ state, text }: { state: string; text: string }) {
  const [why, output] = splitReason(text);
  return html`<div class=${reasonClass(state)} aria-live="polite">${why}</div>
    ${output ? html`<details class="last-output"><summary>Last output</summary><pre>${output}</pre></details>` : null}`;
}

/**
 * Retry a failed replica (`logs`: with its logs a click away); `onChange` runs once the server took it.
 * @example html`<${RetryFailed} workloadId=${w.id} assignmentId=${a.id} onChange=${reload} />`
 */
export function RetryFailed({
  workloadId,
  assignmentId,
  onChange,
  logs = true,
}: {
  workloadId: string;
  assignmentId: string;
  onChange?(): unknown;
  logs?: boolean;
}) {
  const retry = useAction(() => api(`/admin/assignments/${assignmentId}/retry`, { method: "POST" }).then(() => true));
  return html`<div class="row-actions">
    ${can("workload.change") ? html`<button type="button" class="small" disabled=${retry.busy} onClick=${async () => (await retry.run()) && onChange?.()}>Retry</button>` : null}
    ${logs && can("logs.read") ? html`<a class="small button" href=${`/workloads/${workloadId}/logs?replica=${assignmentId}`}>See its logs</a>` : null}
    <${ErrorNote} error=${retry.error} />
  </div>`;
}

/** A percentage the runtime printed (a pull or load bar) as a small bar, for states without a download of our own. */
function PrintedProgress({ line }: { line: string }) {
  const pct = percentIn(line);
  if (pct === null) return null;
  return html`<div class="bar printed-progress" role="progressbar" aria-label="Runtime progress" aria-valuemin="0" aria-valuemax="100" aria-valuenow=${Math.floor(pct)}>
    <div class="bar-fill" style=${{ width: `${pct}%` }}></div></div>`;
}

/**
 * A replica's badge with the time in its state, the reason, a download bar while `downloading`,
 * the runtime's last output line (and a bar for a percentage in it) while it comes up, and Retry
 * with a link to its logs when it failed. The badge and reason are announced when they change.
 */
export function ReplicaStatus({ r, now, onChange }: { r: ReplicaLike; now: number; onChange?(): unknown }) {
  // Runtime output is for operators and admins (viewers are refused logs).
  const line = useLastLine(r.workloadId, r.assignmentId, COMING_UP.has(r.state) && can("logs.read"));
  const showLine = !!line && COMING_UP.has(r.state) && !(r.reason && line.includes(r.reason));
  return html`<div class="replica-status" data-testid="replica-status">
    <div class="status-line">
      <span aria-live="polite"><${StateBadge} state=${r.state} /></span>
      ${r.updatedAt ? html`<span class="muted since" title=${new Date(r.updatedAt).toLocaleString()}>for ${since(r.updatedAt, now)}</span>` : null}
    </div>
    ${r.reason ? html`<${Reason} state=${r.state} text=${r.reason} />` : null}
    ${r.state === "downloading" ? html`<${DownloadProgress} progress=${r.progress} label="Model download" />` : null}
    ${showLine && r.state !== "downloading" ? html`<${PrintedProgress} line=${line} />` : null}
    ${showLine ? html`<code class="last-line" title=${line}>${line}</code>` : null}
    ${r.state === "failed" ? html`<${RetryFailed} workloadId=${r.workloadId} assignmentId=${r.assignmentId} onChange=${onChange} />` : null}
  </div>`;
}
