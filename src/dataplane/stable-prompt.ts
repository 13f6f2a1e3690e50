/**
 * Cache-stable prompts: a line some coding agents put at the very top of their system prompt changes
 * from one conversation to the next — Claude Code's `x-anthropic-billing-header: cc_version=…;
 * cc_entrypoint=…; cch=…;`, derived from the first prompt (Ollama's launcher turns it off) — so no two
 * conversations share the runtime's prefix cache for the long system prompt and tool schemas after
 * it. With the workload's `stable_prompts` (on by default) such lines are removed before the request
 * is routed (its prefix hashed) and before the runtime sees it. Pure functions.
 */

/** The volatile lines removed, each a whole line. */
const VOLATILE = /^x-anthropic-billing-header:[^\n]*(\n|$)/gim;

/** `text` without its volatile lines. */
const stable = (text: string) => text.replace(VOLATILE, "");

/**
 * A Messages request with the volatile lines of its `system` removed (a text block left empty goes);
 * the same object when there is nothing to remove.
 * @example stableMessages({system: "x-anthropic-billing-header: cc_version=2.1.3; cch=9f;\nYou are Claude Code."}).system // → "You are Claude Code."
 */
export function stableMessages(json: Record<string, unknown>): Record<string, unknown> {
  const system = json.system;
  if (typeof system === "string") {
    const next = stable(system);
    return next === system ? json : { ...json, system: next };
  }
  if (!Array.isArray(system)) return json;
  let changed = false;
  const blocks = system.flatMap((b) => {
    if (!b || typeof b !== "object" || (b as { type?: unknown }).type !== "text") return [b];
    const text = (b as { text?: unknown }).text;
    if (typeof text !== "string") return [b];
    const next = stable(text);
    if (next === text) return [b];
    changed = true;
    return next.trim() ? [{ ...b, text: next }] : [];
  });
  return changed ? { ...json, system: blocks } : json;
}
