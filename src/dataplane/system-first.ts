/**
 * Chat messages in an order every chat template takes: many accept one system message, first
 * (Gemma's, Mistral's raise "Conversation roles must alternate…" otherwise), while agents put
 * system content later too (Claude Code's environment block after the user's turn, Codex's
 * developer message after the instructions). The translations (Messages, Responses → chat) send
 * one leading system message: the first system content, then each later one after it, in order.
 */

/** A chat message as the translations build them. */
type ChatMessage = Record<string, unknown>;

/** The text of a system message's content (a string, or text parts). */
function textOf(content: unknown): string {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) return content.map((p) => (typeof p?.text === "string" ? p.text : "")).join("\n");
  return "";
}

/**
 * `messages` with every system message merged into one at the front (texts joined by a blank line,
 * in their order); the others keep theirs. Unchanged when there is at most one, already first.
 * @example systemFirst([{role: "user", content: "hi"}, {role: "system", content: "env"}]) // → [{role: "system", content: "env"}, {role: "user", content: "hi"}]
 */
export function systemFirst(messages: ChatMessage[]): ChatMessage[] {
  const systems = messages.filter((m) => m.role === "system");
  if (systems.length === 0 || (systems.length === 1 && messages[0].role === "system")) return messages;
  const merged = { role: "system", content: systems.map((m) => textOf(m.content)).join("\n\n") };
  return [merged, ...messages.filter((m) => m.role !== "system")];
}
