/** Each replica's runtime output, live, in a terminal: follow or pause, search, timestamps, download. */
import { html } from "htm/preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { api } from "../lib/api";
import { useApi } from "../lib/hooks";
import { timeStamper } from "../lib/logs";
import { useLocation } from "../lib/router";
import type { Assignment, Workload } from "../lib/types";
import { ErrorNote, Loading, StateBadge } from "../components/ui";
import { WorkloadHead } from "../components/workload-head";
import { RetryFailed } from "../components/replica-status";
import { can, whyNot } from "../lib/me";
import { Term, type SearchResult, type TermHandle } from "../components/terminal";
import { withoutOutput } from "../../agent/reason";

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

/** Output kept in the page to redraw with or without times (older chunks are dropped past it). */
const KEEP_CHARS = 4_000_000;

/** One piece of output and when it arrived. */
interface Chunk {
  at: number;
  text: string;
}

/** Search in the terminal: previous/next (Enter, Shift+Enter) and where the match stands. */
function LogSearch({ term, result }: { term: TermHandle | undefined; result: SearchResult | null }) {
  const [text, setText] = useState("");
  const [found, setFound] = useState<boolean | null>(null);
  const go = (backwards: boolean) => {
    if (!term || !text) return;
    setFound(term.find(text, backwards));
  };
  const status =
    !text || found === null
      ? ""
      : !found
        ? "No match"
        : result && result.count > 0
          ? `${result.index || "–"} of ${result.count}${result.count >= 1000 ? "+" : ""}`
          : "";
  return html`<form class="log-search" role="search" onSubmit=${(e: Event) => (e.preventDefault(), go(false))}>
    <input type="search" aria-label="Search the log" placeholder="Search the log" value=${text}
      onInput=${(e: Event) => {
        setText((e.target as HTMLInputElement).value);
        setFound(null);
        if (!(e.target as HTMLInputElement).value) term?.clearSearch();
      }}
      onKeyDown=${(e: KeyboardEvent) => {
        if (e.key === "Enter" && e.shiftKey) {
          e.preventDefault();
          go(true);
        }
      }} />
    <button type="button" onClick=${() => go(true)} disabled=${!text}>Previous</button>
    <button type="submit" disabled=${!text}>Next</button>
    <span class="muted" role="status" data-testid="search-status">${status}</span>
  </form>`;
}

/** The live view of one replica's log. */
function ReplicaLog({ w, assignment }: { w: Workload; assignment: string }) {
  const term = useRef<TermHandle>();
  const chunks = useRef<Chunk[]>([]);
  /** How many of `chunks` are drawn (the rest are held while paused). */
  const shown = useRef(0);
  const stamp = useRef<((text: string, at: number) => string) | null>(null);
  const [paused, setPaused] = useState(false);
  const [times, setTimes] = useState(false);
  const [held, setHeld] = useState(0);
  const [result, setResult] = useState<SearchResult | null>(null);
  const pausedRef = useRef(paused);
  pausedRef.current = paused;
  const [live, setLive] = useState(false);
  const [ready, setReady] = useState(false);
  const draw = (c: Chunk) => term.current?.write(stamp.current ? stamp.current(c.text, c.at) : c.text);
  const drawHeld = () => {
    for (const c of chunks.current.slice(shown.current)) draw(c);
    shown.current = chunks.current.length;
    setHeld(0);
  };
  useEffect(() => {
    if (!ready) return;
    const es = new EventSource(`/admin/workloads/${w.id}/logs?follow=1&assignment=${encodeURIComponent(assignment)}`);
    es.onopen = () => setLive(true);
    es.onerror = () => setLive(false);
    es.onmessage = (ev) => {
      const { text } = JSON.parse(ev.data as string) as { text: string };
      const list = chunks.current;
      list.push({ at: Date.now(), text });
      let size = list.reduce((n, c) => n + c.text.length, 0);
      while (size > KEEP_CHARS && shown.current > 0) {
        size -= list.shift()!.text.length;
        shown.current--;
      }
      if (pausedRef.current) setHeld((n) => n + text.length);
      else drawHeld();
    };
    return () => es.close();
  }, [ready, assignment]);
  const toggle = () => {
    if (paused) drawHeld();
    setPaused(!paused);
  };
  const toggleTimes = () => {
    stamp.current = times ? null : timeStamper();
    setTimes(!times);
    term.current?.clear();
    for (const c of chunks.current.slice(0, shown.current)) draw(c);
  };
  const download = async () => {
    const logs = await api<{ replicas: { text: string }[] }>(
      `/admin/workloads/${w.id}/logs?assignment=${encodeURIComponent(assignment)}&bytes=1048576`,
    );
    saveFile(`${w.project_slug}-${w.slug}-${assignment}.log`, logs.replicas[0]?.text ?? "");
  };
  return html`<div class="toolbar">
      <button type="button" aria-pressed=${paused} onClick=${toggle}>${paused ? "Resume" : "Pause"}</button>
      <button type="button" aria-pressed=${times} onClick=${toggleTimes} title="The time each line reached this page">Timestamps</button>
      <button type="button" onClick=${download}>Download</button>
      <span class="muted" role="status">${paused ? `Paused${held ? ` · ${held} new characters held` : ""}` : live ? "Following live" : "Connecting…"}</span>
    </div>
    <${LogSearch} term=${ready ? term.current : undefined} result=${result} />
    <${Term} label="Runtime output" onResults=${setResult} onReady=${(t: TermHandle) => {
      term.current = t;
      setReady(true);
    }} />`;
}

/** A failed replica's reason above its log, with Retry. */
function Failed({ w, a, onChange }: { w: Workload; a: Assignment; onChange(): unknown }) {
  const why = withoutOutput(a.reason ?? "");
  return html`<div class="note error log-failed" role="alert">
    <p><strong>This replica failed</strong>${why ? html`: ${why}` : null}</p>
    <${RetryFailed} workloadId=${w.id} assignmentId=${a.id} onChange=${onChange} logs=${false} />
  </div>`;
}

/** The logs page of a workload (`?replica=<assignment id>` picks the replica shown first). */
export function LogsPage({ id }: { id: string }) {
  const wl = useApi<Workload>(`/admin/workloads/${id}`, 3000);
  const { query } = useLocation();
  const [chosen, setChosen] = useState(query.get("replica") ?? "");
  if (wl.error) return html`<${ErrorNote} error=${wl.error} />`;
  if (!wl.data) return html`<${Loading} />`;
  if (!can("logs.read", wl.data.project_slug))
    return html`<${WorkloadHead} w=${wl.data} current=${`/workloads/${id}/logs`} /><p class="note role-note" data-testid="role-note">${whyNot("logs.read")}</p>`;
  const list = wl.data.assignments ?? [];
  const current = list.find((a) => a.id === chosen) ?? list[0];
  return html`<${WorkloadHead} w=${wl.data} current=${`/workloads/${id}/logs`} />
    ${
      list.length === 0
        ? html`<p class="muted">No replica yet, so no output.</p>`
        : html`
      <div class="toolbar">
        ${
          list.length > 1
            ? html`<label>Replica <select value=${current.id} onChange=${(e: Event) => setChosen((e.target as HTMLSelectElement).value)}>
          ${list.map((a, i) => html`<option value=${a.id}>Replica ${i + 1} (${a.state})</option>`)}</select></label>`
            : null
        }
        <span>State <span aria-live="polite"><${StateBadge} state=${current.state} /></span></span>
      </div>
      ${current.state === "failed" ? html`<${Failed} w=${wl.data} a=${current} onChange=${() => wl.reload()} />` : null}
      <${ReplicaLog} key=${current.id} w=${wl.data} assignment=${current.id} />`
    }`;
}
