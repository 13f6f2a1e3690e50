/** Start, stop and restart a workload, and what its execution policy wants now and why. */
import { html } from "htm/preact";
import { useState } from "preact/hooks";
import { api } from "../lib/api";
import { useAction } from "../lib/hooks";
import { ago } from "../lib/format";
import { POLICIES, policyText } from "../lib/policy";
import type { Workload } from "../lib/types";
import { ConfirmButton, ErrorNote } from "./ui";

/** The buttons: Start when stopped, else Stop and Restart (a rolling restart). */
export function Controls({ w, onChange }: { w: Workload; onChange(): unknown }) {
  const [said, setSaid] = useState("");
  const act = useAction((what: "start" | "stop" | "restart") => api(`/admin/workloads/${w.id}/${what}`, { method: "POST" }).then(() => what));
  const run = async (what: "start" | "stop" | "restart") => {
    const done = await act.run(what);
    if (!done) return;
    setSaid(done === "start" ? "Started: its replicas are coming up." : done === "stop" ? "Stopped: its replicas are shutting down and stay idle until you start it." : "Restarting: a new replica gets ready before the old one stops, where the GPUs allow.");
    await onChange();
  };
  return html`<div class="toolbar controls">
    ${w.paused
      ? html`<button type="button" class="primary" disabled=${act.busy} onClick=${() => run("start")}>Start</button>`
      : html`<${ConfirmButton} class="danger" label="Stop" title=${`Stop ${w.name}?`} confirm="Stop workload" onConfirm=${() => run("stop")}
            body=${html`<p>Its replicas stop and stay stopped until you start it again. Requests get 503 meanwhile; async jobs wait.</p>`} />
          <button type="button" disabled=${act.busy} onClick=${() => run("restart")}>Restart</button>`}
    <span class="muted" role="status">${said}</span>
    <${ErrorNote} error=${act.error} />
  </div>`;
}

/** The scaling state: the policy in words, replicas wanted against running and ready, the last decision. */
export function ScalingState({ w }: { w: Workload }) {
  const s = w.scaling;
  const label = POLICIES.find((p) => p.id === w.execution_policy)?.label ?? w.execution_policy;
  return html`<section class="card scaling" aria-labelledby="scaling" data-testid="scaling">
    <h2 id="scaling">Scaling</h2>
    <p><strong>${label}</strong>: ${policyText(w.execution_policy, w.execution_params)}.${w.paused ? html` <span class="badge state-idle">stopped by you</span>` : null}</p>
    ${s ? html`<dl class="facts">
      <div><dt>Wanted</dt><dd>${s.desired}</dd></div>
      <div><dt>Running</dt><dd>${s.running}</dd></div>
      <div><dt>Ready</dt><dd>${s.current}</dd></div>
    </dl>
    <p class="muted">Now: ${s.reason}</p>
    ${s.last_decision ? html`<p class="muted">Last change <span title=${new Date(s.last_decision.at).toLocaleString()}>${ago(s.last_decision.at)}</span>: ${s.last_decision.action} (${s.last_decision.reason}).</p>` : null}` : null}
  </section>`;
}
