/** Each replica's runtime output, live, in a terminal: follow or pause, and download. */
import { html } from "htm/preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "../lib/api";
import { useApi } from "../lib/hooks";
import { useLocation } from "../lib/router";
import type { Workload } from "../lib/types";
import { ErrorNote, Loading, StateBadge } from "../components/ui";
import { WorkloadHead } from "../components/workload-head";
import { Term, type TermHandle } from "../components/terminal";

/** Saves text as a file through a temporary link. */
function saveFile(name: string, text: string): void {
  const url = URL.createObjectURL(new Blob([text], { type: "text/plain" }));
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

/** The live view of one replica's log. */
function ReplicaLog({ w, assignment }: { w: Workload; assignment: string }) {
  const term = useRef<TermHandle>();
  const [paused, setPaused] = useState(false);
  const [held, setHeld] = useState<string[]>([]);
  const pausedRef = useRef(paused);
  pausedRef.current = paused;
  const [live, setLive] = useState(false);
  const [ready, setReady] = useState(false);
  useEffect(() => {
    if (!ready) return;
    const es = new EventSource(`/admin/workloads/${w.id}/logs?follow=1&assignment=${encodeURIComponent(assignment)}`);
    es.onopen = () => setLive(true);
    es.onerror = () => setLive(false);
    es.onmessage = (ev) => {
      const { text } = JSON.parse(ev.data as string) as { text: string };
      if (pausedRef.current) setHeld((h) => [...h, text]);
      else term.current?.write(text);
    };
    return () => es.close();
  }, [ready, assignment]);
  const toggle = () => {
    if (paused) {
      term.current?.write(held.join(""));
      setHeld([]);
    }
    setPaused(!paused);
  };
  const download = async () => {
    const logs = await api<{ replicas: { text: string }[] }>(`/admin/workloads/${w.id}/logs?assignment=${encodeURIComponent(assignment)}&bytes=1048576`);
    saveFile(`${w.project_slug}-${w.slug}-${assignment}.log`, logs.replicas[0]?.text ?? "");
  };
  const heldBytes = held.reduce((n, s) => n + s.length, 0);
  return html`<div class="toolbar">
      <button type="button" aria-pressed=${paused} onClick=${toggle}>${paused ? "Resume" : "Pause"}</button>
      <button type="button" onClick=${download}>Download</button>
      <span class="muted" role="status">${paused ? `Paused${heldBytes ? ` · ${heldBytes} new characters held` : ""}` : live ? "Following live" : "Connecting…"}</span>
    </div>
    <${Term} label="Runtime output" onReady=${(t: TermHandle) => {
      term.current = t;
      setReady(true);
    }} />`;
}

/** The logs page of a workload (`?replica=<assignment id>` picks the replica shown first). */
export function LogsPage({ id }: { id: string }) {
  const wl = useApi<Workload>(`/admin/workloads/${id}`, 3000);
  const { query } = useLocation();
  const [chosen, setChosen] = useState(query.get("replica") ?? "");
  if (wl.error) return html`<${ErrorNote} error=${wl.error} />`;
  if (!wl.data) return html`<${Loading} />`;
  const list = wl.data.assignments ?? [];
  const current = list.find((a) => a.id === chosen) ?? list[0];
  return html`<${WorkloadHead} w=${wl.data} current=${`/workloads/${id}/logs`} />
    ${list.length === 0 ? html`<p class="muted">No replica yet, so no output.</p>` : html`
      <div class="toolbar">
        ${list.length > 1 ? html`<label>Replica <select value=${current.id} onChange=${(e: Event) => setChosen((e.target as HTMLSelectElement).value)}>
          ${list.map((a, i) => html`<option value=${a.id}>Replica ${i + 1} (${a.state})</option>`)}</select></label>` : null}
        <span>State <${StateBadge} state=${current.state} /></span>
      </div>
      <${ReplicaLog} key=${current.id} w=${wl.data} assignment=${current.id} />`}`;
}
