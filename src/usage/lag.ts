/**
 * The event loop's stalls: a probe asks to run every PROBE_MS and notes how much later than asked
 * it ran. Anything synchronous that grows with traffic (a long store write, a big parse) shows here
 * as a stall every request behind it waited through. `/metrics` reports the longest in the last
 * WINDOW_S seconds (`inferd_event_loop_stall_seconds`); the data-plane benchmark prints it.
 */
import type { Clock } from "../../agent/serial";

/** How often the probe asks to run (ms). */
const PROBE_MS = 20;
/** The window the longest stall is reported over (seconds). */
export const WINDOW_S = 10;

/** The probe's clock: `performance.now()` (sub-millisecond), and timers that keep no process alive. */
const probeClock: Clock = {
  now: () => performance.now(),
  setTimeout: (fn, ms) => {
    const t = setTimeout(fn, ms);
    t.unref?.();
    return t;
  },
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

/** The longest event-loop stall per second of the last WINDOW_S seconds, while started. */
export class LoopLag {
  /** Longest stall (ms) per whole second, keyed by the second. */
  private worst = new Map<number, number>();
  private handle: unknown;
  private running = false;

  constructor(private readonly clock: Clock = probeClock) {}

  /** Starts probing (again a no-op while running). */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule();
  }

  /** Stops probing. */
  stop(): void {
    this.running = false;
    this.clock.clearTimeout(this.handle);
  }

  /** The longest stall (ms) in the last WINDOW_S seconds. */
  longestMs(): number {
    const since = Math.floor(this.clock.now() / 1000) - WINDOW_S;
    let max = 0;
    for (const [second, ms] of this.worst) if (second > since && ms > max) max = ms;
    return max;
  }

  private schedule(): void {
    const asked = this.clock.now();
    this.handle = this.clock.setTimeout(() => {
      const now = this.clock.now();
      this.note(now, Math.max(0, now - asked - PROBE_MS));
      if (this.running) this.schedule();
    }, PROBE_MS);
  }

  private note(now: number, stallMs: number): void {
    const second = Math.floor(now / 1000);
    if (stallMs > (this.worst.get(second) ?? 0)) this.worst.set(second, stallMs);
    for (const s of this.worst.keys()) if (s <= second - WINDOW_S) this.worst.delete(s);
  }
}
