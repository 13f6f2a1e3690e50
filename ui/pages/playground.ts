/**
 * Try a workload from the page, with the playground its task type fits: chat (streamed token by
 * token, Markdown answers, temperature / max tokens / system prompt, time to first token and
 * tokens/s per answer, replica progress while a cold start holds the answer, conversations kept in
 * this browser per workload, or two workloads of the project compared side by side), embeddings, or rerank.
 */
import { html } from "htm/preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { useApi } from "../lib/hooks";
import { api } from "../lib/api";
import { navigate, useLocation } from "../lib/router";
import type { RequestBodies, Workload } from "../lib/types";
import { ConfirmButton, ErrorNote, Loading } from "../components/ui";
import { WorkloadHead } from "../components/workload-head";
import { EmbeddingsPlayground, RerankPlayground } from "../components/playground-tools";
import { Bubble, MessageBox, ParamFields, streamAnswer, type Turn } from "../components/playground-chat";
import { forgetGone, titleOf, useConversations, type Conversation } from "../components/playground-store";
import { ComparePlayground, useCompareChoices } from "../components/playground-compare";
import { Can } from "../lib/me";

type Conversations = ReturnType<typeof useConversations>;

/** The kept conversations: New chat, and one button per conversation to open it (not while an answer streams). */
function ConversationList({ c, busy }: { c: Conversations; busy: boolean }) {
  return html`<nav class="conversations" aria-label="Conversations">
    <button type="button" onClick=${c.create} disabled=${busy}>New chat</button>
    <ul>${c.list.map((x) => html`<li key=${x.id}><button type="button" class="conversation" aria-current=${x.id === c.open.id ? "true" : undefined} disabled=${busy} onClick=${() => c.select(x.id)}>${titleOf(x)}</button></li>`)}</ul>
    ${c.saved ? null : html`<p class="note error" role="alert">This browser would not keep the conversation (storage full or off).</p>`}
  </nav>`;
}

/** The open conversation's title with Rename (inline) and Delete (confirmed). */
function ConversationHead({ c, busy }: { c: Conversations; busy: boolean }) {
  const [naming, setNaming] = useState<string | null>(null);
  const open: Conversation = c.open;
  if (naming !== null) {
    const save = (e: Event) => {
      e.preventDefault();
      c.rename(open.id, naming);
      setNaming(null);
    };
    return html`<form class="conversation-head" onSubmit=${save} aria-label="Rename the conversation">
      <label class="inline-field">Conversation name<input value=${naming} maxLength=${80} placeholder=${titleOf({ ...open, name: "" })} onInput=${(e: Event) => setNaming((e.target as HTMLInputElement).value)} /></label>
      <button type="submit" class="primary">Save name</button><button type="button" onClick=${() => setNaming(null)}>Cancel</button>
    </form>`;
  }
  return html`<div class="conversation-head">
    <h2 data-testid="conversation-title">${titleOf(open)}</h2>
    <button type="button" class="small" disabled=${busy} onClick=${() => setNaming(open.name || titleOf(open))}>Rename</button>
    <${ConfirmButton} class="small danger" label="Delete" title="Delete this conversation?" confirm="Delete conversation"
      body=${html`<p><strong>${titleOf(open)}</strong> (${open.turns.length} message${open.turns.length === 1 ? "" : "s"}) is forgotten by this browser.</p>`}
      onConfirm=${() => c.remove(open.id)} />
  </div>`;
}

/**
 * A captured chat request as the playground takes it: its earlier turns, the last user message (to
 * send again) and its parameters (system prompt, temperature, max tokens).
 */
async function replayOf(id: string): Promise<{ turns: Turn[]; input: string; params: Conversation["params"] }> {
  const b = await api<RequestBodies>(`/admin/requests/${encodeURIComponent(id)}/bodies`);
  const body = b.request?.encoding === "text" ? (JSON.parse(b.request.data) as Record<string, unknown>) : null;
  if (!body || !Array.isArray(body.messages)) throw new Error("its body is not a chat request");
  const text = (c: unknown): string =>
    typeof c === "string"
      ? c
      : Array.isArray(c)
        ? c
            .map((p) => (p && typeof p === "object" && "text" in p ? String((p as { text: unknown }).text) : ""))
            .join("")
        : "";
  const msgs = body.messages as { role?: string; content?: unknown }[];
  const system = msgs.filter((m) => m.role === "system" || m.role === "developer").map((m) => text(m.content));
  const turns: Turn[] = msgs
    .filter((m) => m.role === "user" || m.role === "assistant")
    .map((m) => ({ role: m.role as Turn["role"], content: text(m.content) }));
  const last = turns[turns.length - 1]?.role === "user" ? turns.pop()!.content : "";
  const num = (v: unknown) => (typeof v === "number" ? String(v) : "");
  return {
    turns,
    input: last,
    params: {
      system: system.join("\n\n"),
      temperature: num(body.temperature),
      maxTokens: num(body.max_tokens ?? body.max_completion_tokens),
    },
  };
}

/** The chat playground: the kept conversations of this workload and the open one. */
function ChatPlayground({ w }: { w: Workload }) {
  const c = useConversations(w.project_id, w.id);
  const [live, setLive] = useState<Turn[] | null>(null);
  const [input, setInput] = useState("");
  const [status, setStatus] = useState("");
  const ctl = useRef<AbortController>();
  const open = c.open;
  const turns = live ?? open.turns;
  useEffect(() => setStatus(""), [open.id]);
  // Opened from a captured request in the inspector (`?from=<request>`): its messages and parameters.
  const from = new URLSearchParams(location.search).get("from");
  useEffect(() => {
    if (!from) return;
    void replayOf(from).then(
      (r) => {
        c.start(r.turns, r.params, `Request ${from.slice(0, 16)}`);
        setInput(r.input);
        setStatus("The captured request's messages are loaded: send its last message again, or edit it first.");
      },
      (e: Error) => setStatus(`Could not load the captured request: ${e.message}`),
    );
  }, [from]);
  const send = async () => {
    const history: Turn[] = [...open.turns, { role: "user", content: input.trim() }];
    const answer: Turn = { role: "assistant", content: "" };
    const show = () => setLive([...history, { ...answer }]);
    c.update(open.id, { turns: history });
    setInput("");
    setStatus("Waiting for the model…");
    ctl.current = new AbortController();
    const done = await streamAnswer(w.id, history, open.params, answer, ctl.current.signal, () => {
      if (answer.content) setStatus("Streaming…");
      show();
    });
    ctl.current = undefined;
    c.update(open.id, { turns: [...history, { ...answer }] });
    setLive(null);
    setStatus(done);
  };
  const busy = !!ctl.current;
  const clear = open.turns.length
    ? html`<button type="button" onClick=${() => {
        c.update(open.id, { turns: [] });
        setStatus("");
      }}>Clear</button>`
    : null;
  return html`<div class="playground">
    <${ConversationList} c=${c} busy=${busy} />
    <div class="playground-main">
      <${ConversationHead} key=${open.id} c=${c} busy=${busy} />
      <${ParamFields} p=${open.params} set=${(params: Conversation["params"]) => c.update(open.id, { params })} />
      <ol class="chat" aria-live="polite" aria-label="Conversation">${turns.map((t) => html`<${Bubble} t=${t} name=${w.name} workloadId=${w.id} />`)}</ol>
      <${MessageBox} value=${input} set=${setInput} busy=${busy} status=${status} onSend=${send} onStop=${() => ctl.current?.abort()} extra=${clear} />
    </div>
  </div>`;
}

/** Which playground a task type gets, if any. */
const KIND: Record<string, "chat" | "embeddings" | "rerank"> = {
  text2text: "chat",
  image2text: "chat",
  embedding: "embeddings",
  reranker: "rerank",
};

/**
 * Pick a second chat workload of the project to compare with (kept in the URL as `?compare=`); the
 * project's list also lets this browser forget the conversations of its deleted workloads.
 */
function ChatOrCompare({ w }: { w: Workload }) {
  const { query } = useLocation();
  const others = useApi<Workload[]>(`/admin/projects/${encodeURIComponent(w.project_slug)}/workloads`);
  useEffect(() => {
    if (others.data) forgetGone(w.project_id, new Set(others.data.map((x) => x.id)));
  }, [others.data]);
  const chats = (others.data ?? []).filter((x) => x.id !== w.id && KIND[x.task_type] === "chat");
  const wanted = query.get("compare") ?? "";
  const choices = useCompareChoices(chats);
  const b = choices.find((c) => c.w.id === wanted && !c.why)?.w;
  const unfit = choices.find((c) => c.w.id === wanted && c.why);
  const pick = (e: Event) => {
    const id = (e.target as HTMLSelectElement).value;
    navigate(`/workloads/${w.id}/playground${id ? `?compare=${encodeURIComponent(id)}` : ""}`, { replace: true });
  };
  return html`<div class="inline-field compare-pick">
      <label for="compare-with">Compare with</label>
      <select id="compare-with" value=${b?.id ?? ""} onChange=${pick} disabled=${!chats.length}>
        <option value="">${chats.length ? "nobody (one conversation)" : "no other chat workload in this project"}</option>
        ${choices.map((c) => html`<option value=${c.w.id} disabled=${!!c.why}>${c.w.name} (${c.w.model_name})${c.why ? ` · ${c.why}` : ""}</option>`)}
      </select>
      ${unfit ? html`<span class="note error" role="alert">${unfit.w.name} is ${unfit.why}: it cannot answer a comparison now.</span>` : wanted && others.data && !b ? html`<span class="note error" role="alert">That workload is not a chat workload of this project any more.</span>` : null}
    </div>
    ${b ? html`<${ComparePlayground} key=${b.id} a=${w} b=${b} />` : html`<${ChatPlayground} w=${w} />`}`;
}

/** The playground page. */
export function Playground({ id }: { id: string }) {
  const wl = useApi<Workload>(`/admin/workloads/${id}`);
  if (wl.error) return html`<${ErrorNote} error=${wl.error} />`;
  if (!wl.data) return html`<${Loading} />`;
  const w = wl.data;
  const kind = KIND[w.task_type];
  const body =
    kind === "chat"
      ? html`<${ChatOrCompare} w=${w} />`
      : kind === "embeddings"
        ? html`<${EmbeddingsPlayground} w=${w} />`
        : kind === "rerank"
          ? html`<${RerankPlayground} w=${w} />`
          : html`<p class="muted">The dashboard has no playground for <code>${w.task_type}</code> workloads yet; the snippets on the workload's page show how to call it.</p>`;
  return html`<${WorkloadHead} w=${w} current=${`/workloads/${id}/playground`} /><${Can} do="playground" project=${w.project_slug} note>${body}<//>`;
}
