/**
 * Try a workload from the page, with the playground its task type fits: chat (streamed token by
 * token, Markdown answers, temperature / max tokens / system prompt, time to first token and
 * tokens/s per answer), embeddings, or rerank.
 */
import { html } from "htm/preact";
import { useRef, useState } from "preact/hooks";
import { ApiError, failure, send } from "../lib/api";
import { useApi } from "../lib/hooks";
import { markdownHtml } from "../lib/markdown";
import { sseData } from "../lib/sse";
import type { Workload } from "../lib/types";
import { ErrorNote, Loading, RequestId } from "../components/ui";
import { WorkloadHead } from "../components/workload-head";
import { EmbeddingsPlayground, RerankPlayground } from "../components/playground-tools";

type Role = "system" | "user" | "assistant";
type Usage = { prompt_tokens?: number; completion_tokens?: number };
/** A turn of the conversation; an answer carries its timings, or the error that ended it, and its request id. */
interface Turn {
  role: Role;
  content: string;
  stats?: string;
  error?: string;
  requestId?: string;
}
/** The chat parameters (empty: the runtime's default). */
interface Params {
  system: string;
  temperature: string;
  maxTokens: string;
}

/**
 * Streams one chat completion through the admin API, calling `onId` with the answer's request id
 * and `onText` per chunk; an error event in the stream throws.
 */
async function streamChat(id: string, body: Record<string, unknown>, signal: AbortSignal, onId: (id: string | undefined) => void, onText: (t: string) => void): Promise<Usage | undefined> {
  const res = await send(`/admin/workloads/${id}/chat`, { body: { ...body, stream: true, stream_options: { include_usage: true } }, signal });
  if (!res.ok) throw await failure(res);
  onId(res.headers.get("x-request-id") ?? undefined);
  let usage: Usage | undefined;
  for await (const data of sseData(res)) {
    if (data === "[DONE]") break;
    const chunk = JSON.parse(data) as { choices?: { delta?: { content?: string } }[]; usage?: Usage; error?: { message?: string } };
    if (chunk.error) throw new Error(chunk.error.message ?? "the runtime broke off the answer");
    const text = chunk.choices?.[0]?.delta?.content;
    if (text) onText(text);
    if (chunk.usage) usage = chunk.usage;
  }
  return usage;
}

/** "12 tokens · 48.0 tokens/s · first token 120 ms · 0.4 s": output tokens over the time after the first token. */
function statsLine(tokens: number, startMs: number, firstMs: number | undefined, endMs: number): string {
  const parts = [`${tokens} token${tokens === 1 ? "" : "s"}`];
  const after = firstMs === undefined ? 0 : (endMs - firstMs) / 1000;
  parts.push(tokens > 1 && after > 0 ? `${((tokens - 1) / after).toFixed(1)} tokens/s` : "– tokens/s");
  parts.push(firstMs === undefined ? "no token" : `first token ${Math.round(firstMs - startMs)} ms`);
  parts.push(`${((endMs - startMs) / 1000).toFixed(1)} s`);
  return parts.join(" · ");
}

/** The request body of a conversation with the parameters set. */
function chatBody(history: Turn[], p: Params): Record<string, unknown> {
  const sent = history.filter((t) => !t.error && t.content).map((t) => ({ role: t.role, content: t.content }));
  const messages = p.system.trim() ? [{ role: "system", content: p.system.trim() }, ...sent] : sent;
  const body: Record<string, unknown> = { messages };
  if (p.temperature.trim() !== "") body.temperature = Number(p.temperature);
  if (p.maxTokens.trim() !== "") body.max_tokens = Number(p.maxTokens);
  return body;
}

/** One turn: the user's text as typed, an answer as sanitised Markdown with its stats or error. */
function Bubble({ t, name }: { t: Turn; name: string }) {
  const who = html`<span class="who">${t.role === "user" ? "You" : name}</span>`;
  if (t.role === "user") return html`<li class="msg user">${who}<div class="text">${t.content}</div></li>`;
  const id = t.requestId ? html`<${RequestId} id=${t.requestId} />` : null;
  if (t.error && !t.content) return html`<li class="msg assistant failed" role="alert">${who}<div class="text">${t.error}</div>${id}</li>`;
  return html`<li class="msg assistant">${who}
    ${t.content ? html`<div class="text md" dangerouslySetInnerHTML=${{ __html: markdownHtml(t.content) }}></div>` : html`<div class="text" aria-label="Waiting for the first token">…</div>`}
    ${t.error ? html`<p class="note error" role="alert">${t.error}</p>` : null}
    ${t.stats ? html`<span class="answer-stats" data-testid="answer-stats">${t.stats}</span>` : null}
    ${id}
  </li>`;
}

/** The chat parameters, folded away. */
function ParamFields({ p, set }: { p: Params; set(p: Params): void }) {
  const field = (k: keyof Params) => (e: Event) => set({ ...p, [k]: (e.target as HTMLInputElement).value });
  return html`<details class="card params"><summary>Parameters</summary><div class="form">
    <label>System prompt<textarea rows="2" value=${p.system} onInput=${field("system")}></textarea></label>
    <div class="grid2">
      <label>Temperature<input type="number" min="0" max="2" step="0.1" placeholder="model default" value=${p.temperature} onInput=${field("temperature")} /></label>
      <label>Max tokens<input type="number" min="1" max="131072" step="1" placeholder="model default" value=${p.maxTokens} onInput=${field("maxTokens")} /></label>
    </div></div></details>`;
}

/** The chat playground. */
function ChatPlayground({ w }: { w: Workload }) {
  const [params, setParams] = useState<Params>({ system: "", temperature: "", maxTokens: "" });
  const [input, setInput] = useState("");
  const [turns, setTurns] = useState<Turn[]>([]);
  const [status, setStatus] = useState("");
  const ctl = useRef<AbortController>();
  const busy = !!ctl.current;
  const submit = async (e?: Event) => {
    e?.preventDefault();
    if (!input.trim() || ctl.current) return;
    const history: Turn[] = [...turns, { role: "user", content: input.trim() }];
    const answer: Turn = { role: "assistant", content: "" };
    const show = () => setTurns([...history, { ...answer }]);
    show();
    setInput("");
    setStatus("Waiting for the model…");
    ctl.current = new AbortController();
    const started = performance.now();
    let first: number | undefined;
    let chunks = 0;
    try {
      const usage = await streamChat(w.id, chatBody(history, params), ctl.current.signal, (rid) => (answer.requestId = rid), (t) => {
        first ??= performance.now();
        chunks++;
        answer.content += t;
        setStatus("Streaming…");
        show();
      });
      const end = performance.now();
      answer.stats = statsLine(usage?.completion_tokens ?? chunks, started, first, end);
      setStatus(`Done in ${((end - started) / 1000).toFixed(1)} s`);
    } catch (err) {
      const aborted = (err as Error).name === "AbortError";
      answer.error = aborted ? "Stopped." : (err as Error).message;
      if (err instanceof ApiError) answer.requestId ??= err.requestId;
      if (first !== undefined) answer.stats = statsLine(chunks, started, first, performance.now());
      setStatus(aborted ? "Stopped" : "Failed");
    } finally {
      ctl.current = undefined;
      show();
    }
  };
  const keydown = (e: KeyboardEvent) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) void submit(e);
  };
  return html`<${ParamFields} p=${params} set=${setParams} />
    <ol class="chat" aria-live="polite" aria-label="Conversation">${turns.map((t) => html`<${Bubble} t=${t} name=${w.name} />`)}</ol>
    <form class="chat-input" onSubmit=${submit} aria-label="Send a message">
      <label>Message<textarea name="message" rows="3" value=${input} onKeyDown=${keydown} onInput=${(e: Event) => setInput((e.target as HTMLTextAreaElement).value)} placeholder="Ask something (Enter sends, Shift+Enter adds a line)"></textarea></label>
      <div class="actions">
        <span class="muted" role="status">${status}</span>
        ${turns.length && !busy ? html`<button type="button" onClick=${() => { setTurns([]); setStatus(""); }}>Clear</button>` : null}
        ${busy ? html`<button type="button" onClick=${() => ctl.current?.abort()}>Stop</button>` : html`<button type="submit" class="primary" disabled=${!input.trim()}>Send</button>`}
      </div>
    </form>`;
}

/** Which playground a task type gets, if any. */
const KIND: Record<string, "chat" | "embeddings" | "rerank"> = { text2text: "chat", image2text: "chat", embedding: "embeddings", reranker: "rerank" };

/** The playground page. */
export function Playground({ id }: { id: string }) {
  const wl = useApi<Workload>(`/admin/workloads/${id}`);
  if (wl.error) return html`<${ErrorNote} error=${wl.error} />`;
  if (!wl.data) return html`<${Loading} />`;
  const w = wl.data;
  const kind = KIND[w.task_type];
  const body = kind === "chat" ? html`<${ChatPlayground} w=${w} />`
    : kind === "embeddings" ? html`<${EmbeddingsPlayground} w=${w} />`
    : kind === "rerank" ? html`<${RerankPlayground} w=${w} />`
    : html`<p class="muted">The dashboard has no playground for <code>${w.task_type}</code> workloads yet; the snippets on the workload's page show how to call it.</p>`;
  return html`<${WorkloadHead} w=${w} current=${`/workloads/${id}/playground`} />${body}`;
}
