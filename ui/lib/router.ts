/** A tiny History-API router: the path is the state, links are intercepted, pages match patterns. */
import { useEffect, useState } from "preact/hooks";

const listeners = new Set<() => void>();
const notify = () => listeners.forEach((l) => l());

/** Whether the page shown came from Back or Forward (not a link, a reload or a first visit). */
let traversed = false;

/** True while the page shown was reached by Back or Forward: a form may bring back what it kept. */
export const cameBack = (): boolean => traversed;

/** Goes to `to` in the app without reloading the page. */
export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  traversed = false;
  if (opts.replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  notify();
  window.scrollTo(0, 0);
}

/**
 * Keeps a page's choices in its address without a new history entry, a re-render or a scroll (a
 * reload then lands on the same choices); empty values are left out.
 * @example replaceQuery({ step: "2", model: "" }) // → /setup?step=2
 */
export function replaceQuery(values: Record<string, string | undefined>): void {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(values)) if (v) query.set(k, v);
  const search = query.toString();
  history.replaceState(history.state, "", `${location.pathname}${search ? `?${search}` : ""}`);
}

/** The current path and query, re-rendering the caller when it changes. */
export function useLocation(): { path: string; query: URLSearchParams } {
  const [, bump] = useState(0);
  useEffect(() => {
    const l = () => bump((n) => n + 1);
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return { path: location.pathname, query: new URLSearchParams(location.search) };
}

/** Routes same-origin `<a href>` clicks and back/forward through `navigate`. */
export function installRouter(): void {
  window.addEventListener("popstate", () => {
    traversed = true;
    notify();
  });
  document.addEventListener("click", (e) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    const a = (e.target as Element | null)?.closest?.("a");
    if (!a || a.target || a.hasAttribute("download") || a.origin !== location.origin) return;
    if (/^\/(admin|api|endpoint|docs|assets|auth)(\/|$)/.test(a.pathname)) return;
    e.preventDefault();
    navigate(a.pathname + a.search);
  });
}

/**
 * Matches a path against a pattern with `:name` segments.
 * @example match("/workloads/:id/logs", "/workloads/wl_1/logs") // → { id: "wl_1" }
 */
export function match(pattern: string, path: string): Record<string, string> | null {
  const p = pattern.split("/");
  const s = (path.replace(/\/+$/, "") || "/").split("/");
  if (p.length !== s.length) return null;
  const params: Record<string, string> = {};
  for (let i = 0; i < p.length; i++) {
    if (p[i].startsWith(":")) params[p[i].slice(1)] = decodeURIComponent(s[i]);
    else if (p[i] !== s[i]) return null;
  }
  return params;
}
