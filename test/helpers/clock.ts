/**
 * A clock driven by hand for unit tests of the background loops: time moves only in `advance`,
 * which fires the timers that fall due in order, each at its own time.
 */
import type { Clock } from "../../agent/serial";

/** A fake clock starting at `t0`: `advance(ms)` fires what falls due, `next()` is the earliest timer's time. */
export function fakeClock(
  t0 = 0,
): Clock & { advance(ms: number): void; next(): number | undefined; pending(): number } {
  let now = t0;
  let id = 0;
  const due = new Map<number, { at: number; fn: () => void }>();
  const earliest = () => [...due].sort((a, b) => a[1].at - b[1].at)[0];
  return {
    now: () => now,
    setTimeout: (fn, ms) => (due.set(++id, { at: now + ms, fn }), id),
    clearTimeout: (h) => void due.delete(h as number),
    advance(ms) {
      const end = now + ms;
      for (let e = earliest(); e && e[1].at <= end; e = earliest()) {
        due.delete(e[0]);
        now = e[1].at;
        e[1].fn();
      }
      now = end;
    },
    next: () => earliest()?.[1].at,
    pending: () => due.size,
  };
}

/**
 * Waits until `cond` holds, letting promises and I/O callbacks run in between (no timer: the loops
 * under test only move when the fake clock does). Throws after `turns` event-loop turns.
 */
export async function until(
  cond: () => boolean | Promise<boolean>,
  what = "the condition",
  turns = 20_000,
): Promise<void> {
  for (let i = 0; i < turns; i++) {
    if (await cond()) return;
    await new Promise<void>((r) => setImmediate(r));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Lets every promise that can settle now settle (a few event-loop turns). */
export async function settle(turns = 20): Promise<void> {
  for (let i = 0; i < turns; i++) await new Promise<void>((r) => setImmediate(r));
}
