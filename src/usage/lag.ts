/**
 * The event loop's stalls: a probe asks to run every PROBE_MS and notes how much later than asked
 * it ran. Anything synchronous that grows with traffic (a long store write, a big parse) shows here
 * as a stall every request behind it waited through. `/metrics` reports the longest in the last
 * WINDOW_S seconds (`inferd_event_loop_stall_seconds`); the data-plane benchmark prints it.
 *
 * A probe can also run late because the machine gave the thread no CPU (other busy processes on
 * few cores): on Linux the thread's own run-queue wait (`/proc/thread-self/schedstat`, its second
 * field) is read at each probe, and the stall less that wait is reported apart
 * (`inferd_event_loop_own_stall_seconds`): what inferd's own work held the loop.
 *
 * The same probe sums the JS heap's growth between readings 500 ms apart (`inferd_heap_allocated_bytes_total`):
 * the bytes allocated, less what a collection freed in the same interval (a lower bound), which the
 * data-plane benchmark divides by the requests of a run (allocation per request).
 */
import { heapSize } from "bun:jsc";
import { openSync, readSync } from "node:fs";
import type { Clock } from "../../agent/serial";

/** How often the probe asks to run (ms). */
const PROBE_MS = 20;
/**
 * The heap's growth is read every this many probes (500 ms): a collection between two readings hides
 * what was allocated before it in that interval. A reading walks the heap's blocks (0.3 ms on an idle
 * server, 1 ms under load), so it is not taken more often.
 */
export const HEAP_EVERY = 25;
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

/**
 * The calling thread's total wait for a CPU so far (ms), from Linux's schedstat; undefined where
 * there is none (another OS, or a kernel without it). The file is opened once, on the thread that
 * first calls, and read again in place at each call.
 */
export function threadCpuWait(): (() => number) | undefined {
  let fd: number;
  try {
    fd = openSync("/proc/thread-self/schedstat", "r");
  } catch {
    return undefined;
  }
  const buf = Buffer.alloc(128);
  return () => {
    const n = readSync(fd, buf, 0, buf.length, 0);
    const text = buf.toString("latin1", 0, n);
    const start = text.indexOf(" ") + 1;
    return Number(text.slice(start, text.indexOf(" ", start))) / 1e6;
  };
}

/** The longest event-loop stall per second of the last WINDOW_S seconds, while started. */
export class LoopLag {
  /** Longest stall (ms) per whole second, keyed by the second. */
  private worst = new Map<number, number>();
  /** Longest stall (ms) per second less the thread's wait for a CPU meanwhile. */
  private worstOwn = new Map<number, number>();
  private handle: unknown;
  private running = false;
  /** Heap bytes allocated since the probe started (its growth summed over probes). */
  private allocated = 0;
  private lastHeap = 0;
  private probes = 0;
  /** The thread's total wait for a CPU at the last probe (ms). */
  private lastWait = 0;

  /**
   * `cpuWait`: the thread's total wait for a CPU so far (ms); with the real clock and none given,
   * Linux's (`threadCpuWait`), read on the thread that starts the probe. `heap`: the JS heap's size
   * now (bytes), JavaScriptCore's by default.
   */
  constructor(
    private readonly clock: Clock = probeClock,
    private cpuWait?: () => number,
    private readonly heap: () => number = heapSize,
  ) {}

  /** Starts probing (again a no-op while running). */
  start(): void {
    if (this.running) return;
    this.running = true;
    if (!this.cpuWait && this.clock === probeClock) this.cpuWait = threadCpuWait();
    this.lastWait = this.cpuWait?.() ?? 0;
    this.lastHeap = this.heap();
    this.schedule();
  }

  /** Stops probing. */
  stop(): void {
    this.running = false;
    this.clock.clearTimeout(this.handle);
  }

  /** The longest stall (ms) in the last WINDOW_S seconds. */
  longestMs(): number {
    return this.longestOf(this.worst);
  }

  /**
   * The longest stall (ms) in the last WINDOW_S seconds less the time the thread waited for a CPU
   * meanwhile: the part inferd's own work held the loop (the whole stall where the wait is unknown).
   */
  longestOwnMs(): number {
    return this.longestOf(this.cpuWait ? this.worstOwn : this.worst);
  }

  /** JS heap bytes allocated since the probe started: its growth summed over probes (a lower bound). */
  allocatedBytes(): number {
    return this.allocated;
  }

  private longestOf(worst: Map<number, number>): number {
    const since = Math.floor(this.clock.now() / 1000) - WINDOW_S;
    let max = 0;
    for (const [second, ms] of worst) if (second > since && ms > max) max = ms;
    return max;
  }

  private schedule(): void {
    const asked = this.clock.now();
    this.handle = this.clock.setTimeout(() => {
      const now = this.clock.now();
      const stall = Math.max(0, now - asked - PROBE_MS);
      const second = Math.floor(now / 1000);
      note(this.worst, second, stall);
      if (this.cpuWait) {
        // One reading per probe: the wait since the last one is this probe's.
        const waited = this.cpuWait();
        note(this.worstOwn, second, Math.max(0, stall - (waited - this.lastWait)));
        this.lastWait = waited;
      }
      // The heap's size is read every HEAP_EVERY probes (it walks the heap's blocks).
      if (++this.probes % HEAP_EVERY === 0) {
        const heap = this.heap();
        if (heap > this.lastHeap) this.allocated += heap - this.lastHeap;
        this.lastHeap = heap;
      }
      if (this.running) this.schedule();
    }, PROBE_MS);
  }
}

/** Keeps `ms` as the second's worst when it is, and forgets seconds past the window. */
function note(worst: Map<number, number>, second: number, ms: number): void {
  if (ms > (worst.get(second) ?? 0)) worst.set(second, ms);
  for (const s of worst.keys()) if (s <= second - WINDOW_S) worst.delete(s);
}
