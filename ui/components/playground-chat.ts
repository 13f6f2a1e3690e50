/**
 * The chat playground's parts shared by one conversation and a side-by-side comparison: a streamed
 * answer with its timings (time to first token, total time, tokens in and out), the turns as bubbles
 * (Markdown answers; replica progress while a cold start holds the first token) and the parameters.
 */
import { html } from "htm/preact";
import { ApiError, failure, send } from "../lib/api";
import { markdownHtml } from "../lib/markdown";
import { sseData } from "../lib/sse";
import { RequestId } from "./ui";
import { AnswerWait } from "./playground-wait";

type Usage = { prompt_tokens?: number; completion_tokens?: number };

/** An answer's timings: ms to the first token and in all, tokens out (and in, when the runtime counted them). */
export interface Timing {
  firstMs?: number;
  totalMs: number;
  tokensOut: number;
  tokensIn?: number;
}

/** A turn of the conversation; an answer carries its timings, or the error that ended it, and its request id. */
export interface Turn {
  role: "user" | "assistant";
  content: string;
  stats?: string;
  timing?: Timing;
  error?: string;
  requestId?: string;
  /** While the answer is awaited: when it was sent (epoch ms). */
  sentAt?: number;
}

/** The chat parameters (empty: the runtime's default). */
export interface Params {
  system: string;
  temperature: string;
  maxTokens: string;
}

/** No parameters set: the runtime's defaults. */
export const NO_PARAMS: Params = { system: "", temperature: "", maxTokens: "" };

/**
 * Streams one chat completion through the admin API, calling `onId` with the answer's request id
 * and `onText` per chunk; an error event in the stream throws.
 */
async function streamChat(
  id: string,
  body: Record<string, unknown>,
  signal: AbortSignal,
  onId: (id: string | undefined) => void,
  onText: (t: string) => void,
): Promise<Usage | undefined> {
  const res = await send(`/admin/workloads/${id}/chat`, {
    body: { ...body, stream: true, stream_options: { include_usage: true } },
    signal,
  });
  if (!res.ok) throw await failure(res);
  onId(res.headers.get("x-request-id") ?? undefined);
  let usage: Usage | undefined;
  for await (const data of sseData(res)) {
    if (data === "[DONE]") break;
    const chunk = JSON.parse(data) as {
      choices?: { delta?: { content?: string } }[];
      usage?: Usage;
      error?: { message?: string };
    };
    if (chunk.error) throw new Error(chunk.error.message ?? "the runtime broke off the answer");
    const text = chunk.choices?.[0]?.delta?.content;
    if (text) onText(text);
    if (chunk.usage) usage = chunk.usage;
  }
  return usage;
}

/** "12 tokens · 48.0 tokens/s · first token 120 ms · 0.4 s": output tokens over the time after the first token. */
export function statsLine(t: Timing): string {
  const parts = [`${t.tokensOut} token${t.tokensOut === 1 ? "" : "s"}`];
  const after = t.firstMs === undefined ? 0 : (t.totalMs - t.firstMs) / 1000;
  parts.push(t.tokensOut > 1 && after > 0 ? `${((t.tokensOut - 1) / after).toFixed(1)} tokens/s` : "– tokens/s");
  parts.push(t.firstMs === undefined ? "no token" : `first token ${Math.round(t.firstMs)} ms`);
  parts.push(`${(t.totalMs / 1000).toFixed(1)} s`);
  return parts.join(" · ");
}

/** The request body of a conversation with the parameters set. */
export function chatBody(history: Turn[], p: Params): Record<string, unknown> {
  const sent = history.filter((t) => !t.error && t.content).map((t) => ({ role: t.role, content: t.content }));
  const messages = p.system.trim() ? [{ role: "system", content: p.system.trim() }, ...sent] : sent;
  const body: Record<string, unknown> = { messages };
  if (p.temperature.trim() !== "") body.temperature = Number(p.temperature);
  if (p.maxTokens.trim() !== "") body.max_tokens = Number(p.maxTokens);
  return body;
}

/**
 * Streams the answer to `history` from workload `id` into `answer` (text, request id, timings or
 * error), calling `redraw` at once and whenever it changed; resolves to a status line ("Done in 1.2 s", "Failed", "Stopped").
 */
export async function streamAnswer(
  id: string,
  history: Turn[],
  params: Params,
  answer: Turn,
  signal: AbortSignal,
  redraw: () => void,
): Promise<string> {
  const started = performance.now();
  answer.sentAt = Date.now();
  redraw();
  let first: number | undefined;
  let chunks = 0;
  const timing = (usage?: Usage): Timing => ({
    firstMs: first === undefined ? undefined : first - started,
    totalMs: performance.now() - started,
    tokensOut: usage?.completion_tokens ?? chunks,
    tokensIn: usage?.prompt_tokens,
  });
  try {
    const usage = await streamChat(
      id,
      chatBody(history, params),
      signal,
      (rid) => (answer.requestId = rid),
      (t) => {
        first ??= performance.now();
        chunks++;
        answer.content += t;
        answer.sentAt = undefined;
        redraw();
      },
    );
    answer.timing = timing(usage);
    answer.stats = statsLine(answer.timing);
    return `Done in ${(answer.timing.totalMs / 1000).toFixed(1)} s`;
  } catch (err) {
    const aborted = (err as Error).name === "AbortError";
    answer.error = aborted ? "Stopped." : (err as Error).message;
    if (err instanceof ApiError) answer.requestId ??= err.requestId;
    if (first !== undefined) {
      answer.timing = timing();
      answer.stats = statsLine(answer.timing);
    }
    return aborted ? "Stopped" : "Failed";
  } finally {
    answer.sentAt = undefined;
    redraw();
  }
}

/** One turn: the user's text as typed, an answer as sanitised Markdown with its stats or error; before its first token, the wait (replica progress on a cold start). */
export function Bubble({ t, name, workloadId }: { t: Turn; name: string; workloadId: string }) {
  const who = html`<span class="who">${t.role === "user" ? "You" : name}</span>`;
  if (t.role === "user") return html`<li class="msg user">${who}<div class="text">${t.content}</div></li>`;
  const id = t.requestId ? html`<${RequestId} id=${t.requestId} inspect />` : null;
  if (t.error && !t.content)
    return html`<li class="msg assistant failed" role="alert">${who}<div class="text">${t.error}</div>${id}</li>`;
  return html`<li class="msg assistant">${who}
    ${
      t.content
        ? html`<div class="text md" dangerouslySetInnerHTML=${{ __html: markdownHtml(t.content) }}></div>`
        : t.sentAt
          ? html`<${AnswerWait} workloadId=${workloadId} since=${t.sentAt} />`
          : html`<div class="text" aria-label="Waiting for the first token">…</div>`
    }
    ${t.error ? html`<p class="note error" role="alert">${t.error}</p>` : null}
    ${t.stats ? html`<span class="answer-stats" data-testid="answer-stats">${t.stats}</span>` : null}
    ${id}
  </li>`;
}

/** The chat parameters, folded away. */
export function ParamFields({ p, set }: { p: Params; set(p: Params): void }) {
  const field = (k: keyof Params) => (e: Event) => set({ ...p, [k]: (e.target as HTMLInputElement).value });
  return html`<details class="card params"><summary>Parameters</summary><div class="form">
    <label>System prompt<textarea rows="2" value=${p.system} onInput=${field("system")}></textarea></label>
    <div class="grid2">
      <label>Temperature<input type="number" min="0" max="2" step="0.1" placeholder="model default" value=${p.temperature} onInput=${field("temperature")} /></label>
      <label>Max tokens<input type="number" min="1" max="131072" step="1" placeholder="model default" value=${p.maxTokens} onInput=${field("maxTokens")} /></label>
    </div></div></details>`;
}

/**
 * The message box: Enter sends, Shift+Enter adds a line; Stop while busy, and `extra` buttons beside Send.
 * @example html`<${MessageBox} busy=${busy} status=${status} onSend=${send} onStop=${stop} />`
 */
export function MessageBox(props: {
  value: string;
  set(v: string): void;
  busy: boolean;
  status: string;
  onSend(): unknown;
  onStop(): unknown;
  extra?: unknown;
  label?: string;
}) {
  const submit = (e: Event) => {
    e.preventDefault();
    if (props.value.trim() && !props.busy) void props.onSend();
  };
  const keydown = (e: KeyboardEvent) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) submit(e);
  };
  return html`<form class="chat-input" onSubmit=${submit} aria-label=${props.label ?? "Send a message"}>
    <label>Message<textarea name="message" rows="3" value=${props.value} onKeyDown=${keydown} onInput=${(e: Event) => props.set((e.target as HTMLTextAreaElement).value)} placeholder="Ask something (Enter sends, Shift+Enter adds a line)"></textarea></label>
    <div class="actions">
      <span class="muted" role="status">${props.status}</span>
      ${props.busy ? null : props.extra}
      ${props.busy ? html`<button type="button" onClick=${props.onStop}>Stop</button>` : html`<button type="submit" class="primary" disabled=${!props.value.trim()}>Send</button>`}
    </div>
  </form>`;
}
