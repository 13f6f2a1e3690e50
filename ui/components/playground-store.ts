/**
 * The playground's conversations, kept in this browser (localStorage) per workload: several per
 * workload, one of them open, each with its turns, parameters and a title (its first message, or the
 * name it was given). Keys name the project and the workload, so a project's page can forget the
 * conversations of its deleted workloads; nothing is sent to the server.
 */
import { useRef, useState } from "preact/hooks";
import { NO_PARAMS, type Params, type Turn } from "./playground-chat";

/** One kept conversation. */
export interface Conversation {
  id: string;
  /** Given by the user, else empty (the first message stands for it). */
  name: string;
  turns: Turn[];
  params: Params;
  updatedAt: number;
}

/** A workload's kept conversations and the open one. */
export interface Kept {
  list: Conversation[];
  open: string;
}

const PREFIX = "inferd.playground:";

/** The storage key of a workload's conversations. */
const keyOf = (projectId: string, workloadId: string) => `${PREFIX}${projectId}:${workloadId}`;

/** A new, empty conversation. */
export function newConversation(params: Params = NO_PARAMS): Conversation {
  return {
    id: `c${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}`,
    name: "",
    turns: [],
    params: { ...params },
    updatedAt: Date.now(),
  };
}

/**
 * A conversation's title: its name, else its first message cut to 40 characters, else "New chat".
 * @example titleOf({ name: "", turns: [{ role: "user", content: "Hello there" }] } as Conversation) // → "Hello there"
 */
export function titleOf(c: Conversation): string {
  if (c.name.trim()) return c.name.trim();
  const first = c.turns
    .find((t) => t.role === "user")
    ?.content.replace(/\s+/g, " ")
    .trim();
  if (!first) return "New chat";
  return first.length > 40 ? `${first.slice(0, 39)}…` : first;
}

/** An answer that was still coming when the page was left is kept as one that never came. */
function settled(t: Turn): Turn {
  const { sentAt: _, ...rest } = t;
  return t.role === "assistant" && !t.content && !t.error
    ? { ...rest, error: "No answer: the page was left before it came." }
    : rest;
}

/** Reads a workload's conversations; anything unreadable counts as none. */
export function loadKept(projectId: string, workloadId: string): Kept {
  try {
    const raw = JSON.parse(localStorage.getItem(keyOf(projectId, workloadId)) ?? "null") as Kept | null;
    if (raw && Array.isArray(raw.list) && raw.list.length) {
      const list = raw.list
        .filter((c) => c && typeof c.id === "string" && Array.isArray(c.turns))
        .map((c) => ({
          ...newConversation(),
          ...c,
          params: { ...NO_PARAMS, ...c.params },
          turns: c.turns.map(settled),
        }));
      if (list.length) return { list, open: list.some((c) => c.id === raw.open) ? raw.open : list[0].id };
    }
  } catch {}
  const c = newConversation();
  return { list: [c], open: c.id };
}

/** Keeps a workload's conversations (empty ones are not worth a key); false when the browser refused (storage full or off). */
export function saveKept(projectId: string, workloadId: string, kept: Kept): boolean {
  try {
    if (kept.list.every((c) => !c.turns.length && !c.name)) localStorage.removeItem(keyOf(projectId, workloadId));
    else localStorage.setItem(keyOf(projectId, workloadId), JSON.stringify(kept));
    return true;
  } catch {
    return false;
  }
}

/** Forgets the kept conversations of a project's workloads that no longer exist (`ids`: the ones that do). */
export function forgetGone(projectId: string, ids: Set<string>): void {
  const prefix = `${PREFIX}${projectId}:`;
  const gone: string[] = [];
  for (let i = 0; i < localStorage.length; i++) {
    const k = localStorage.key(i);
    if (k?.startsWith(prefix) && !ids.has(k.slice(prefix.length))) gone.push(k);
  }
  gone.forEach((k) => localStorage.removeItem(k));
}

/** A workload's conversations with the open one and the operations on them, saved on every change. */
export function useConversations(projectId: string, workloadId: string) {
  const [kept, setKept] = useState<Kept>(() => loadKept(projectId, workloadId));
  const [saved, setSaved] = useState(true);
  const latest = useRef(kept);
  latest.current = kept;
  // Every change starts from the latest state, so calls made after an await do not undo others.
  const change = (next: (k: Kept) => Kept) => {
    const k = next(latest.current);
    latest.current = k;
    setKept(k);
    setSaved(saveKept(projectId, workloadId, k));
  };
  const openOf = (k: Kept) => k.list.find((c) => c.id === k.open) ?? k.list[0];
  const edit = (id: string, patch: Partial<Conversation>) =>
    change((k) => ({ ...k, list: k.list.map((c) => (c.id === id ? { ...c, ...patch, updatedAt: Date.now() } : c)) }));
  return {
    list: kept.list,
    open: openOf(kept),
    /** False when the browser would not keep the last change. */
    saved,
    select: (id: string) => change((k) => ({ ...k, open: id })),
    create: () =>
      change((k) => {
        const c = newConversation(openOf(k).params);
        return { list: [c, ...k.list], open: c.id };
      }),
    /** Opens a new conversation holding `turns` with `params` (a request opened from the inspector). */
    start: (turns: Conversation["turns"], params: Conversation["params"], name = "") =>
      change((k) => {
        const c = { ...newConversation(params), turns, name };
        return { list: [c, ...k.list], open: c.id };
      }),
    rename: (id: string, name: string) => edit(id, { name: name.trim() }),
    remove: (id: string) =>
      change((k) => {
        const list = k.list.filter((c) => c.id !== id);
        if (!list.length) list.push(newConversation(openOf(k).params));
        return { list, open: k.open === id ? list[0].id : k.open };
      }),
    /** Sets a conversation's turns and/or parameters. */
    update: (id: string, patch: Partial<Pick<Conversation, "turns" | "params">>) => edit(id, patch),
  };
}
