/** Timer functions, injected in tests (a fake clock fires them by hand). */
export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** Time as the background loops see it: the real one by default, a fake one in unit tests. */
export interface Clock extends Timers {
  now(): number;
}

/** The real clock: `Date.now` and the global timers. */
export const realClock: Clock = {
  now: () => Date.now(),
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

/** How a SerialRunner schedules its passes. */
export interface SerialOptions {
  /** Milliseconds from the end of one pass to the next one nobody asked for (none: passes only on request). */
  every?: number;
  clock?: Clock;
  /** Told of a pass that threw (default: a line on stderr); the schedule goes on. */
  onError?: (e: unknown) => void;
}

const printError = (e: unknown) =>
  process.stderr.write(
    `inferd: a background pass failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`,
  );

/**
 * One pass at a time of a background loop (job claims, webhook deliveries, scaling, placement, an
 * agent's reconcile and GPU probe). Passes never overlap: `run()` starts one at once when none runs,
 * else asks for exactly one more after the pass in progress (however many ask meanwhile), and
 * resolves when a pass that began after the call has ended, so what it reads is fresh. `wake()`
 * asks the same without waiting, coalescing the calls of one event-loop turn. With `every`, the
 * next pass is scheduled that long after the last one ended (a slow pass, such as an `nvidia-smi`
 * stalled on a busy driver, delays the next instead of starting another beside it); `after(ms)`
 * asks for one sooner. A pass that throws is reported to `onError` and the schedule goes on.
 * Nothing runs before `start()` or after `stop()` (calls then resolve at once); `stop()` resolves
 * once the pass in progress has ended, and `start()` may follow it.
 * @example const probes = new SerialRunner(() => probe(), { every: 5000 }); probes.start(); await probes.run(); await probes.stop();
 */
export class SerialRunner {
  private on = false;
  private busy = false;
  /** The pass in progress; settles after its follow-up (if any) has begun. */
  private current?: Promise<void>;
  /** Callers waiting for the pass asked for while one runs. */
  private again?: { promise: Promise<void>; resolve: () => void };
  private waking = false;
  private timer: unknown;
  private timerAt = Infinity;
  /** When `after` asked for a pass (Infinity: not asked). */
  private asked = Infinity;
  private readonly clock: Clock;
  private readonly onError: (e: unknown) => void;

  constructor(
    private readonly pass: () => Promise<void>,
    private readonly opts: SerialOptions = {},
  ) {
    this.clock = opts.clock ?? realClock;
    this.onError = opts.onError ?? printError;
  }

  /** Starts taking requests and the schedule: the first scheduled pass one period from now. */
  start(): void {
    if (this.on) return;
    this.on = true;
    if (!this.busy) this.schedule();
  }

  /** Runs a pass now, or once more after the one in progress; resolves when a pass begun after this call has ended. */
  run(): Promise<void> {
    if (!this.on) return Promise.resolve();
    if (!this.busy) return this.begin();
    if (!this.again) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.again = { promise, resolve };
    }
    return this.again.promise;
  }

  /** Asks for a pass soon without waiting for it (the calls of one event-loop turn make one request). */
  wake(): void {
    if (!this.on || this.waking) return;
    this.waking = true;
    queueMicrotask(() => {
      this.waking = false;
      void this.run();
    });
  }

  /** Asks for a pass in `ms` at the latest (sooner than the period; the earliest asked wins). */
  after(ms: number): void {
    if (!this.on) return;
    this.asked = Math.min(this.asked, this.clock.now() + Math.max(0, ms));
    if (!this.busy && this.asked < this.timerAt) this.setTimer(this.asked);
  }

  /** Stops the schedule and takes no more requests; resolves when the pass in progress has ended. */
  async stop(): Promise<void> {
    this.on = false;
    this.clearTimer();
    this.asked = Infinity;
    await this.current;
  }

  private begin(): Promise<void> {
    this.busy = true;
    this.clearTimer();
    if (this.asked <= this.clock.now()) this.asked = Infinity;
    const done = this.once().then(() => this.ended());
    this.current = done;
    return done;
  }

  /** One pass, its failure reported. */
  private async once(): Promise<void> {
    try {
      await this.pass();
    } catch (e) {
      this.onError(e);
    }
  }

  /** After a pass: the one asked for meanwhile begins now, else the next is scheduled. */
  private ended(): void {
    this.busy = false;
    this.current = undefined;
    const again = this.again;
    this.again = undefined;
    if (!again) return this.schedule();
    if (this.on) void this.begin().then(again.resolve);
    else again.resolve();
  }

  private schedule(): void {
    if (!this.on) return;
    const period = this.opts.every === undefined ? Infinity : this.clock.now() + this.opts.every;
    const at = Math.min(period, this.asked);
    if (at < Infinity) this.setTimer(at);
  }

  private setTimer(at: number): void {
    this.clearTimer();
    this.timerAt = at;
    this.timer = this.clock.setTimeout(
      () => {
        this.timer = undefined;
        if (this.asked <= this.timerAt) this.asked = Infinity;
        this.timerAt = Infinity;
        void this.run();
      },
      Math.max(0, at - this.clock.now()),
    );
  }

  private clearTimer(): void {
    if (this.timer !== undefined) this.clock.clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
  }
}
