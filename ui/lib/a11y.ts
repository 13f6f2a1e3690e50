/** Shell-wide accessibility helpers: focus on the page heading after navigation, scroll hints on wide tables. */
import { useEffect, useRef } from "preact/hooks";

/** How long a page may take to show its heading (its data loading) before focus goes to <main>. */
const HEADING_WAIT_MS = 5000;

/**
 * After each client-side navigation (not the first load), moves focus to the new page's <h1> as soon
 * as it is there, so keyboard and screen-reader users start at the page they opened.
 */
export function useFocusHeading(path: string): void {
  const first = useRef(true);
  useEffect(() => {
    if (first.current) {
      first.current = false;
      return;
    }
    const main = document.getElementById("main");
    if (!main) return;
    const focus = () => {
      const h1 = main.querySelector<HTMLElement>("h1");
      if (!h1) return false;
      if (!h1.hasAttribute("tabindex")) h1.setAttribute("tabindex", "-1");
      h1.focus({ preventScroll: true });
      return true;
    };
    if (focus()) return;
    const watch = new MutationObserver(() => focus() && stop());
    const timer = setTimeout(() => {
      stop();
      main.focus({ preventScroll: true });
    }, HEADING_WAIT_MS);
    const stop = () => {
      watch.disconnect();
      clearTimeout(timer);
    };
    watch.observe(main, { childList: true, subtree: true });
    return stop;
  }, [path]);
}

/** Containers that scroll sideways on narrow screens. */
const SCROLLERS = ".table-wrap";

/** Overflow this small hides nothing worth a hint (a border, a rounding pixel). */
const SLACK_PX = 8;

/** Marks each scroller whose content is wider than it with `overflows` (the CSS shows a "scroll sideways" hint). */
function markOverflows(): void {
  for (const el of document.querySelectorAll<HTMLElement>(SCROLLERS)) {
    el.classList.toggle("overflows", el.scrollWidth > el.clientWidth + SLACK_PX);
  }
}

/** Keeps the scroll hints of wide tables up to date as pages render and the window resizes. */
export function useOverflowHints(): void {
  useEffect(() => {
    let queued = 0;
    const schedule = () => {
      if (!queued) queued = requestAnimationFrame(() => ((queued = 0), markOverflows()));
    };
    const main = document.getElementById("main");
    const watch = new MutationObserver(schedule);
    if (main) watch.observe(main, { childList: true, characterData: true, subtree: true });
    window.addEventListener("resize", schedule);
    schedule();
    return () => {
      watch.disconnect();
      window.removeEventListener("resize", schedule);
      cancelAnimationFrame(queued);
    };
  }, []);
}
