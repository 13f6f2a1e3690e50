/**
 * Two chat workloads side by side: one prompt (and one set of parameters) sent to both at once, the
 * answers streamed in two columns (stacked on a phone), each with its time to first token, total time
 * and token counts; each column keeps its own history. A cold start in one column shows that
 * replica's progress while the other answers.
 */
import { html } from "htm/preact";
import { useRef, useState } from "preact/hooks";
import { useApi } from "../lib/hooks";
import type { Worker, Workload } from "../lib/types";
import {
  Bubble,
  MessageBox,
  NO_PARAMS,
  ParamFields,
  streamAnswer,
  type Params,
  type Timing,
  type Turn,
} from "./playground-chat";

/**
 * Why a workload cannot answer a comparison now, from its replicas' states: stopped, or every
 * replica failed; undefined when it can (no replica yet: a request starts one).
 * @example notComparable({ paused: false } as Workload, ["failed"]) // → "failed"
 */
export function notComparable(w: Pick<Workload, "paused">, states: string[]): string | undefined {
  if (w.paused) return "stopped";
  return states.length > 0 && states.every((s) => s === "failed") ? "failed" : undefined;
}

/**
 * The project's other chat workloads for "Compare with", each with why it cannot be compared now
 * (a failed or stopped one is shown, not offered), from the workers' replica lists.
 */
export function useCompareChoices(chats: Workload[]): { w: Workload; why?: string }[] {
  const workers = useApi<Worker[]>(chats.length ? "/admin/workers" : null, 5000);
  const states = (id: string) =>
    (workers.data ?? []).flatMap((k) => k.replicas.filter((r) => r.workload_id === id).map((r) => r.state));
  return chats.map((w) => ({ w, why: notComparable(w, states(w.id)) }));
}

/** "340 ms" under a second, else "1.2 s". */
const ms = (v: number | undefined) =>
  v === undefined ? "–" : v < 1000 ? `${Math.round(v)} ms` : `${(v / 1000).toFixed(1)} s`;

/** The latest answer's timings in a column, marking the quicker side's first token and total. */
function ColumnStats({ t, other }: { t?: Timing; other?: Timing }) {
  if (!t) return null;
  const quicker = (a?: number, b?: number) =>
    a !== undefined && b !== undefined && a < b ? html` <span class="badge state-ready">quicker</span>` : null;
  return html`<dl class="compare-stats" data-testid="compare-stats">
    <div><dt>First token</dt><dd data-testid="ttft">${ms(t.firstMs)}${quicker(t.firstMs, other?.firstMs)}</dd></div>
    <div><dt>Total</dt><dd data-testid="total">${ms(t.totalMs)}${quicker(t.totalMs, other?.totalMs)}</dd></div>
    <div><dt>Tokens</dt><dd data-testid="tokens">${t.tokensOut} out${t.tokensIn !== undefined ? ` · ${t.tokensIn} in` : ""}</dd></div>
  </dl>`;
}

/** The last answer's timings of a column's turns. */
const lastTiming = (turns: Turn[]) => turns.filter((t) => t.role === "assistant").at(-1)?.timing;

/** One column: the workload's name, its turns and its latest answer's timings. */
function Column({ w, turns, other }: { w: Workload; turns: Turn[]; other: Turn[] }) {
  const h = `cmp-${w.id}`;
  return html`<section class="compare-col" aria-labelledby=${h}>
    <h2 id=${h}><a href=${`/workloads/${w.id}`}>${w.name}</a> <span class="muted small-text">${w.model_name}</span></h2>
    <${ColumnStats} t=${lastTiming(turns)} other=${lastTiming(other)} />
    <ol class="chat" aria-live="polite" aria-label=${`Answers of ${w.name}`}>${turns.map((t) => html`<${Bubble} t=${t} name=${w.name} workloadId=${w.id} />`)}</ol>
  </section>`;
}

/**
 * The same prompt to workloads `a` and `b`, answers side by side.
 * @example html`<${ComparePlayground} a=${w} b=${other} />`
 */
export function ComparePlayground({ a, b }: { a: Workload; b: Workload }) {
  const [params, setParams] = useState<Params>(NO_PARAMS);
  const [input, setInput] = useState("");
  const [sides, setSides] = useState<[Turn[], Turn[]]>([[], []]);
  const [status, setStatus] = useState("");
  const ctl = useRef<AbortController>();
  const send = async () => {
    const prompt = input.trim();
    const histories = sides.map((turns) => [...turns, { role: "user", content: prompt } as Turn]) as [Turn[], Turn[]];
    const answers: [Turn, Turn] = [
      { role: "assistant", content: "", sentAt: Date.now() },
      { role: "assistant", content: "", sentAt: Date.now() },
    ];
    const show = () =>
      setSides([
        [...histories[0], { ...answers[0] }],
        [...histories[1], { ...answers[1] }],
      ]);
    show();
    setInput("");
    setStatus("Waiting for both models…");
    ctl.current = new AbortController();
    const done = await Promise.all(
      [a, b].map((w, i) => streamAnswer(w.id, histories[i], params, answers[i], ctl.current!.signal, show)),
    );
    ctl.current = undefined;
    show();
    setStatus(
      done.every((d) => d.startsWith("Done"))
        ? "Both answered"
        : done.map((d, i) => `${[a, b][i].name}: ${d}`).join(" · "),
    );
  };
  const clear = html`<button type="button" onClick=${() => {
    setSides([[], []]);
    setStatus("");
  }}>Clear</button>`;
  return html`<${ParamFields} p=${params} set=${setParams} />
    <div class="compare" data-testid="compare">
      <${Column} w=${a} turns=${sides[0]} other=${sides[1]} />
      <${Column} w=${b} turns=${sides[1]} other=${sides[0]} />
    </div>
    <${MessageBox} label="Send to both" value=${input} set=${setInput} busy=${!!ctl.current} status=${status} onSend=${send} onStop=${() => ctl.current?.abort()} extra=${sides[0].length ? clear : null} />`;
}
