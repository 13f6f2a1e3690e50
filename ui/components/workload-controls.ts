/** Start, stop and restart a workload, and what its execution policy wants now and why. */
import { html } from "htm/preact";
import { useEffect, useState } from "preact/hooks";
import { api } from "../lib/api";
import { useAction, useApi } from "../lib/hooks";
import { ago } from "../lib/format";
import { POLICIES, policyText } from "../lib/policy";
import type { Workload } from "../lib/types";
import { ConfirmButton, ErrorNote } from "./ui";

/** A note after an action, shown until `done` says the server got there (or the next action replaces it). */
interface Note {
  text: string;
  done(w: Workload): boolean;
}

/** States a replica rests in once it has come up or given up. */
const SETTLED = new Set(["ready", "failed"]);
/** States of a replica with no runtime running. */
const DOWN = new Set(["idle", "stopped"]);

/**
 * What each action says, and when what it said is over: started once every replica settled,
 * stopped once none runs, restarted once every replica is a new one or started anew (a higher
 * generation than when Restart was pressed) and settled.
 */
function noteFor(what: "start" | "stop" | "restart", before: Workload): Note {
  const settled = (w: Workload) =>
    (w.assignments ?? []).length > 0 && (w.assignments ?? []).every((a) => SETTLED.has(a.state));
  // A workload that scales to zero starts no replica until its first request (once the scaler looked again).
  const toZero = (w: Workload) => w.scaling?.desired === 0 && !w.scaling.reason.startsWith("stopped by the operator");
  if (what === "start")
    return { text: "Started: its replicas are coming up.", done: (w) => !w.paused && (settled(w) || toZero(w)) };
  if (what === "stop")
    return {
      text: "Stopped: its replicas are shutting down and stay idle until you start it.",
      done: (w) => w.paused && (w.assignments ?? []).every((a) => DOWN.has(a.state)),
    };
  const generation = new Map((before.assignments ?? []).map((a) => [a.id, a.generation]));
  const restarted = (a: NonNullable<Workload["assignments"]>[number]) =>
    !generation.has(a.id) || a.generation > generation.get(a.id)!;
  return {
    text: "Restarting: a new replica gets ready before the old one stops, where the GPUs allow.",
    done: (w) => settled(w) && (w.assignments ?? []).every(restarted),
  };
}

/** The buttons: Start when stopped, else Stop and Restart (a rolling restart), and a note on the last action until it is done. */
/**
 * What clients get while a workload is stopped: 503, except on the project base URL where its
 * fallbacks answer in its place (the per-workload URL names it, so no fallback there).
 */
export const stopNote = (w: Workload): string =>
  w.fallbacks.length
    ? `Requests by its model name on the project base URL fall back to ${w.fallbacks.join(", ")}; requests on its own URL get 503.`
    : "Requests get 503 meanwhile (it has no fallback workload).";

export function Controls({ w, onChange }: { w: Workload; onChange(): unknown }) {
  const [note, setNote] = useState<Note | null>(null);
  const act = useAction((what: "start" | "stop" | "restart") =>
    api(`/admin/workloads/${w.id}/${what}`, { method: "POST" }).then(() => what),
  );
  const run = async (what: "start" | "stop" | "restart") => {
    const before = w;
    setNote(null);
    const done = await act.run(what);
    if (!done) return;
    setNote(noteFor(done, before));
    await onChange();
  };
  useEffect(() => {
    if (note?.done(w)) setNote(null);
  }, [w, note]);
  return html`<div class="toolbar controls">
    ${
      w.paused
        ? html`<button type="button" class="primary" disabled=${act.busy} onClick=${() => run("start")}>Start</button>`
        : html`<${ConfirmButton} class="danger" label="Stop" title=${`Stop ${w.name}?`} confirm="Stop workload" onConfirm=${() => run("stop")}
            body=${html`<p>Its replicas stop and stay stopped until you start it again. ${stopNote(w)} Async jobs wait.</p>`} />
          <button type="button" disabled=${act.busy} onClick=${() => run("restart")}>Restart</button>`
    }
    <span class="muted" role="status" data-testid="control-note">${note?.text ?? ""}</span>
    <${ErrorNote} error=${act.error} />
  </div>`;
}

/** Replicas whose runtime runs or comes up, and those that failed (a failed one is not running). */
function replicaCounts(w: Workload): { running: number; failed: number } {
  const list = w.assignments ?? [];
  return {
    running: list.filter((a) => a.state !== "failed" && !DOWN.has(a.state)).length,
    failed: list.filter((a) => a.state === "failed").length,
  };
}

/** A server reason without the API call it suggests in parentheses: the button for it is right above. */
const withoutApiHint = (reason: string) => reason.replace(/\s*\((?:GET|POST|PATCH|PUT|DELETE) [^)]*\)/g, "");

/** The scaling state: the policy in words, replicas wanted against running and ready, the last decision. */
export function ScalingState({ w }: { w: Workload }) {
  const s = w.scaling;
  const states = replicaCounts(w);
  const label = POLICIES.find((p) => p.id === w.execution_policy)?.label ?? w.execution_policy;
  return html`<section class="card scaling" aria-labelledby="scaling" data-testid="scaling">
    <h2 id="scaling">Scaling</h2>
    <p><strong>${label}</strong>: ${policyText(w.execution_policy, w.execution_params)}.${w.paused ? html` <span class="badge state-idle">stopped by you</span>` : null}</p>
    ${
      s
        ? html`<dl class="facts">
      <div><dt>Wanted</dt><dd>${s.desired}</dd></div>
      <div><dt>Running</dt><dd data-testid="scaling-running">${states.running}</dd></div>
      <div><dt>Ready</dt><dd>${s.current}</dd></div>
      ${states.failed ? html`<div><dt>Failed</dt><dd data-testid="scaling-failed">${states.failed}</dd></div>` : null}
    </dl>
    <p class="muted">Now: ${withoutApiHint(s.reason)}</p>
    ${s.last_decision ? html`<p class="muted">Last change <span title=${new Date(s.last_decision.at).toLocaleString()}>${ago(s.last_decision.at)}</span>: ${s.last_decision.action} (${s.last_decision.reason}).</p>` : null}`
        : null
    }
  </section>`;
}

/**
 * What deleting a workload takes away, said in its Delete dialog: its runtimes and endpoint, and the
 * names clients send to the project's base URL (model name and aliases) that no other workload
 * answers to: they get 404 `model_not_found` afterwards. Workloads falling back to it are named too.
 */
export function DeleteWarning({ w }: { w: Workload }) {
  const siblings = useApi<Workload[]>(`/admin/projects/${encodeURIComponent(w.project_slug)}/workloads`);
  const others = (siblings.data ?? []).filter((o) => o.id !== w.id);
  const kept = new Set(others.flatMap((o) => [o.model_name, o.slug, ...(o.aliases ?? [])]));
  const names = [
    ...(kept.has(w.model_name) ? [] : [{ name: w.model_name, what: "model name" }]),
    ...(w.aliases ?? [])
      .filter((a) => !kept.has(a))
      .map((a) => ({ name: a, what: a.includes("*") ? "alias pattern" : "alias" })),
  ];
  const leaning = others.filter((o) => (o.fallbacks ?? []).includes(w.slug));
  return html`<p>Its runtimes stop and its endpoint goes away.</p>
    ${
      names.length
        ? html`<div class="warn" data-testid="delete-names"><p>Clients sending these names to the project's base URL will get <strong>404</strong> (<code>model_not_found</code>):</p>
      <ul>${names.map((n) => html`<li><code>${n.name}</code> <span class="muted small-text">${n.what}</span></li>`)}</ul></div>`
        : null
    }
    ${leaning.length ? html`<p class="warn" data-testid="delete-fallbacks">${leaning.map((o) => o.name).join(", ")} ${leaning.length === 1 ? "falls" : "fall"} back to it; that fallback goes too.</p>` : null}`;
}
