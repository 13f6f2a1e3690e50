/** Timer functions a Periodic uses; injected in tests. */
export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const realTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

/**
 * A job run every `intervalMs`, never overlapping itself: the next run is scheduled only after the
 * last one ended (a slow run, such as an `nvidia-smi` stalled on a busy driver, delays the next
 * instead of starting another beside it). `now()` asks for a run at once: it joins a run that has
 * not started yet, or follows the one in progress (so what it reads is fresh), never a second in
 * parallel. A run that throws is ignored; the schedule goes on.
 * @example const probes = new Periodic(() => probe(), 5000); probes.start(); await probes.now(); probes.stop();
 */
export class Periodic {
  private handle: unknown;
  private running?: Promise<void>;
  /** A run asked for while one is in progress: it starts when that one ends. */
  private queued?: Promise<void>;
  private stopped = true;

  constructor(
    private readonly run: () => Promise<void>,
    private readonly intervalMs: number,
    private readonly timers: Timers = realTimers,
  ) {}

  /** Starts the schedule: the first run after one interval. */
  start(): void {
    this.stopped = false;
    this.schedule();
  }

  /** Runs the job now (after the run in progress, if any); resolves when that run has ended. */
  now(): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (!this.running) return this.runOnce();
    this.queued ??= this.running.then(() => {
      this.queued = undefined;
      return this.stopped ? undefined : this.runOnce();
    });
    return this.queued;
  }

  /** Stops the schedule; a run in progress ends on its own. Resolves when it has. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.timers.clearTimeout(this.handle);
    this.handle = undefined;
    await this.running;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timers.clearTimeout(this.handle);
    this.handle = this.timers.setTimeout(() => void this.now(), this.intervalMs);
  }

  private runOnce(): Promise<void> {
    this.timers.clearTimeout(this.handle);
    this.running = (async () => {
      try {
        await this.run();
      } catch {
        // The job reports its own failures; the schedule goes on.
      }
    })().finally(() => {
      this.running = undefined;
      if (!this.queued) this.schedule();
    });
    return this.running;
  }
}
