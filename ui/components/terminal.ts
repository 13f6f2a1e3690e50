/** A read-only xterm.js terminal that renders runtime output (colours, progress bars) as a TTY would. */
import { html } from "htm/preact";
import { useEffect, useRef } from "preact/hooks";
import type { Terminal } from "@xterm/xterm";

/** What a page can do with the terminal once it is ready. */
export interface TermHandle {
  write(text: string): void;
  clear(): void;
}

const THEME = { background: "#0f1420", foreground: "#d8dee9", cursor: "#0f1420", selectionBackground: "#3b4a6b" };

/** Mounts a terminal (xterm.js is loaded on first use) and hands it to `onReady`. */
export function Term({ onReady, label }: { onReady(t: TermHandle): void; label: string }) {
  const box = useRef<HTMLDivElement>(null);
  useEffect(() => {
    let term: Terminal | undefined;
    let observer: ResizeObserver | undefined;
    let gone = false;
    void (async () => {
      const [{ Terminal }, { FitAddon }] = await Promise.all([import("@xterm/xterm"), import("@xterm/addon-fit")]);
      if (gone || !box.current) return;
      term = new Terminal({ disableStdin: true, cursorBlink: false, scrollback: 10_000, fontSize: 13, theme: THEME, convertEol: false });
      const fit = new FitAddon();
      term.loadAddon(fit);
      term.open(box.current);
      const refit = () => {
        try {
          fit.fit();
        } catch {}
      };
      refit();
      observer = new ResizeObserver(refit);
      observer.observe(box.current);
      const t = term;
      onReady({ write: (s) => t.write(s), clear: () => t.reset() });
    })();
    return () => {
      gone = true;
      observer?.disconnect();
      term?.dispose();
    };
  }, []);
  return html`<div class="terminal" ref=${box} role="log" aria-label=${label} data-testid="terminal"></div>`;
}
