/** Chat with a workload from the page, the answer streamed token by token. */
import { html } from "htm/preact";
import { useRef, useState } from "preact/hooks";
import { failure, send } from "../lib/api";
import { useApi } from "../lib/hooks";
import { sseData } from "../lib/sse";
import type { Workload } from "../lib/types";
import { ErrorNote, Loading } from "../components/ui";
import { WorkloadHead } from "../components/workload-head";

type Message = { role: "system" | "user" | "assistant"; content: string };
type Usage = { prompt_tokens?: number; completion_tokens?: number };

/** Streams one chat completion through the admin API, calling `onText` per chunk. */
async function streamChat(id: string, messages: Message[], signal: AbortSignal, onText: (t: string) => void): Promise<Usage | undefined> {
  const res = await send(`/admin/workloads/${id}/chat`, { body: { messages, stream: true, stream_options: { include_usage: true } }, signal });
  if (!res.ok) throw await failure(res);
  let usage: Usage | undefined;
  for await (const data of sseData(res)) {
    if (data === "[DONE]") break;
    const chunk = JSON.parse(data) as { choices?: { delta?: { content?: string } }[]; usage?: Usage };
    const text = chunk.choices?.[0]?.delta?.content;
    if (text) onText(text);
    if (chunk.usage) usage = chunk.usage;
  }
  return usage;
}

/** The playground page. */
export function Playground({ id }: { id: string }) {
  const wl = useApi<Workload>(`/admin/workloads/${id}`);
  const [system, setSystem] = useState("");
  const [input, setInput] = useState("");
  const [messages, setMessages] = useState<Message[]>([]);
  const [status, setStatus] = useState("");
  const [error, setError] = useState<Error>();
  const ctl = useRef<AbortController>();
  const busy = !!ctl.current;
  if (wl.error) return html`<${ErrorNote} error=${wl.error} />`;
  if (!wl.data) return html`<${Loading} />`;
  const submit = async (e?: Event) => {
    e?.preventDefault();
    if (!input.trim() || ctl.current) return;
    const history: Message[] = [...messages, { role: "user", content: input.trim() }];
    setMessages([...history, { role: "assistant", content: "" }]);
    setInput("");
    setError(undefined);
    setStatus("Waiting for the model…");
    ctl.current = new AbortController();
    const started = performance.now();
    let answer = "";
    try {
      const sent = system.trim() ? [{ role: "system" as const, content: system.trim() }, ...history] : history;
      const usage = await streamChat(id, sent, ctl.current.signal, (t) => {
        answer += t;
        setStatus("Streaming…");
        setMessages([...history, { role: "assistant", content: answer }]);
      });
      const secs = (performance.now() - started) / 1000;
      setStatus(`Done in ${secs.toFixed(1)} s${usage?.completion_tokens ? ` · ${usage.completion_tokens} tokens` : ""}`);
    } catch (err) {
      if ((err as Error).name === "AbortError") setStatus("Stopped");
      else {
        setError(err as Error);
        setStatus("");
      }
    } finally {
      ctl.current = undefined;
      setMessages((m) => [...m]);
    }
  };
  const keydown = (e: KeyboardEvent) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) void submit(e);
  };
  return html`<${WorkloadHead} w=${wl.data} current=${`/workloads/${id}/playground`} />
    <details><summary>System prompt</summary><label>System prompt<textarea rows="2" value=${system} onInput=${(e: Event) => setSystem((e.target as HTMLTextAreaElement).value)}></textarea></label></details>
    <ol class="chat" aria-live="polite" aria-label="Conversation">
      ${messages.map((m) => html`<li class=${`msg ${m.role}`}><span class="who">${m.role === "user" ? "You" : wl.data!.name}</span><div class="text">${m.content || "…"}</div></li>`)}
    </ol>
    <${ErrorNote} error=${error?.message} />
    <form class="chat-input" onSubmit=${submit} aria-label="Send a message">
      <label>Message<textarea name="message" rows="3" value=${input} onKeyDown=${keydown} onInput=${(e: Event) => setInput((e.target as HTMLTextAreaElement).value)} placeholder="Ask something (Ctrl+Enter sends)"></textarea></label>
      <div class="actions">
        <span class="muted" role="status">${status}</span>
        ${messages.length && !busy ? html`<button type="button" onClick=${() => { setMessages([]); setStatus(""); }}>Clear</button>` : null}
        ${busy ? html`<button type="button" onClick=${() => ctl.current?.abort()}>Stop</button>` : html`<button type="submit" class="primary" disabled=${!input.trim()}>Send</button>`}
      </div>
    </form>`;
}
