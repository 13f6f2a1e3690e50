/** A read-only xterm.js terminal that renders runtime output (colours, progress bars) as a TTY would. */
import { html } from "htm/preact";
import { useEffect, useRef } from "preact/hooks";
import type { Terminal } from "@xterm/xterm";
import type { SearchAddon } from "@xterm/addon-search";

/** Where a search stands: the match shown (1-based, 0 when none is) of how many. */
export interface SearchResult {
  index: number;
  count: number;
}

/** What a page can do with the terminal once it is ready. */
export interface TermHandle {
  write(text: string): void;
  clear(): void;
  /** Finds `text` forwards (or backwards), highlighting every match; false when there is none. */
  find(text: string, backwards?: boolean): boolean;
  /** Removes the search highlights. */
  clearSearch(): void;
}

const THEME = { background: "#0f1420", foreground: "#d8dee9", cursor: "#0f1420", selectionBackground: "#3b4a6b" };

/** Matches in amber, the current one brighter (the ruler colours mark them in the scrollbar). */
const DECORATIONS = {
  matchBackground: "#6b5a1e",
  matchOverviewRuler: "#d4a72c",
  activeMatchBackground: "#d4a72c",
  activeMatchColorOverviewRuler: "#ffd75f",
};

/**
 * Columns the terminal keeps however narrow its box: the width of the agent's PTY (`PTY_SIZE` in
 * agent/supervisor.ts), which runtimes draw their progress bars for and redraw with `\r` — that
 * only works on an unwrapped line. The font shrinks (down to `MIN_FONT`) so they fit the box on a
 * desktop; a narrower box scrolls sideways (the page does not).
 */
export const MIN_COLS = 160;

/** The font size (px) the terminal starts at, and the smallest it shrinks to, to fit `MIN_COLS` columns. */
const FONT = { desktop: 13, phone: 11, min: 10 };

/** The whole font size at which `cols` columns measured at `size` become `MIN_COLS`, kept within [min, max]. */
const fittingFont = (size: number, cols: number, min: number, max: number) =>
  Math.min(max, Math.max(min, Math.floor((size * cols) / MIN_COLS)));

/** Mounts a terminal (xterm.js is loaded on first use) and hands it to `onReady`; `onResults` hears search counts. */
export function Term({
  onReady,
  onResults,
  label,
}: {
  onReady(t: TermHandle): void;
  onResults?(r: SearchResult): void;
  label: string;
}) {
  const box = useRef<HTMLDivElement>(null);
  const results = useRef(onResults);
  results.current = onResults;
  useEffect(() => {
    let term: Terminal | undefined;
    let observer: ResizeObserver | undefined;
    let gone = false;
    void (async () => {
      const [{ Terminal }, { FitAddon }, { SearchAddon }] = await Promise.all([
        import("@xterm/xterm"),
        import("@xterm/addon-fit"),
        import("@xterm/addon-search"),
      ]);
      if (gone || !box.current) return;
      const narrow = window.matchMedia("(max-width: 760px)").matches;
      // allowProposedApi: the search add-on highlights matches with decorations, still a proposed API in xterm 6.
      const largest = narrow ? FONT.phone : FONT.desktop;
      term = new Terminal({
        disableStdin: true,
        cursorBlink: false,
        scrollback: 10_000,
        fontSize: largest,
        lineHeight: 1.2,
        theme: THEME,
        convertEol: false,
        allowProposedApi: true,
      });
      const fit = new FitAddon();
      const search: SearchAddon = new SearchAddon();
      term.loadAddon(fit);
      term.loadAddon(search);
      search.onDidChangeResults(({ resultIndex, resultCount }) =>
        results.current?.({ index: resultIndex + 1, count: resultCount }),
      );
      term.open(box.current);
      const t = term;
      const refit = () => {
        const measured = fit.proposeDimensions();
        if (measured && Number.isFinite(measured.cols)) {
          const size = fittingFont(t.options.fontSize!, measured.cols, narrow ? largest : FONT.min, largest);
          if (size !== t.options.fontSize) t.options.fontSize = size;
        }
        const dims = fit.proposeDimensions();
        if (dims && Number.isFinite(dims.cols) && Number.isFinite(dims.rows))
          t.resize(Math.max(MIN_COLS, dims.cols), Math.max(2, dims.rows));
      };
      refit();
      observer = new ResizeObserver(refit);
      observer.observe(box.current);
      onReady({
        write: (s) => t.write(s),
        clear: () => t.reset(),
        find: (text, backwards) =>
          backwards
            ? search.findPrevious(text, { decorations: DECORATIONS })
            : search.findNext(text, { decorations: DECORATIONS }),
        clearSearch: () => search.clearDecorations(),
      });
    })();
    return () => {
      gone = true;
      observer?.disconnect();
      term?.dispose();
    };
  }, []);
  return html`<div class="log-term" ref=${box} role="log" tabindex="0" aria-label=${label} data-testid="terminal"></div>`;
}
