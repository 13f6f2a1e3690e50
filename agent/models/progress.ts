/**
 * Download bookkeeping without I/O: progress (bytes, percent, rate over a sliding window, ETA)
 * computed from an injectable clock, and a limiter bounding how many files download at once.
 */

/** A progress reading. `eta_s` is null while the rate is unknown (or the total is). */
export interface ProgressSnapshot {
  bytes_done: number;
  bytes_total: number;
  percent: number;
  rate_bps: number;
  eta_s: number | null;
}

/** Options of `Progress`. */
export interface ProgressOptions {
  /** Milliseconds; default `performance.now`. */
  clock?: () => number;
  /** The rate is measured over this much recent time (ms); default 5000. */
  windowMs?: number;
}

/**
 * Bytes done of a total, with the rate over a sliding window of recent samples: bytes already
 * there when counting started (a resumed file) do not count as speed.
 * @example const p = new Progress(1000, { clock: () => now }); p.set(0); now += 1000; p.set(100); p.snapshot().eta_s // → 9
 */
export class Progress {
  private readonly clock: () => number;
  private readonly windowMs: number;
  private samples: { t: number; bytes: number }[] = [];
  private done = 0;

  constructor(
    public total: number,
    opts: ProgressOptions = {},
  ) {
    this.clock = opts.clock ?? (() => performance.now());
    this.windowMs = opts.windowMs ?? 5000;
  }

  /** Records `bytesDone` at the clock's now. */
  set(bytesDone: number): void {
    const t = this.clock();
    this.done = bytesDone;
    const last = this.samples[this.samples.length - 1];
    if (last && last.t === t) last.bytes = bytesDone;
    else this.samples.push({ t, bytes: bytesDone });
    // Keep one sample at or before the window's start so the rate spans the whole window.
    while (this.samples.length > 2 && this.samples[1].t <= t - this.windowMs) this.samples.shift();
  }

  /** Adds `bytes` to the count (a sample at the clock's now). */
  add(bytes: number): void {
    this.set(this.done + bytes);
  }

  /** The bytes per second over the window (0 until two samples are apart in time). */
  rate(): number {
    const first = this.samples[0];
    const last = this.samples[this.samples.length - 1];
    if (!first || !last || last.t <= first.t) return 0;
    return Math.max(0, ((last.bytes - first.bytes) * 1000) / (last.t - first.t));
  }

  /** The current reading. */
  snapshot(): ProgressSnapshot {
    const rate = this.rate();
    const total = this.total;
    const left = Math.max(0, total - this.done);
    const percent = total > 0 ? Math.min(100, (this.done / total) * 100) : total === 0 ? 100 : 0;
    const eta = total < 0 ? null : left === 0 ? 0 : rate > 0 ? left / rate : null;
    return {
      bytes_done: this.done,
      bytes_total: total,
      percent: Math.round(percent * 10) / 10,
      rate_bps: Math.round(rate),
      eta_s: eta === null ? null : Math.round(eta * 10) / 10,
    };
  }
}

/**
 * Bounds how many files download at once across all pulls sharing it (a counting semaphore).
 * @example const limiter = new DownloadLimiter(4); await limiter.run(() => downloadFile(…));
 */
export class DownloadLimiter {
  private running = 0;
  private queue: (() => void)[] = [];

  constructor(readonly max: number) {
    if (!(max >= 1)) throw new Error(`DownloadLimiter needs max >= 1 (got ${max})`);
  }

  /** Files downloading now. */
  get active(): number {
    return this.running;
  }

  /** Files waiting for a place. */
  get waiting(): number {
    return this.queue.length;
  }

  /** Runs `fn` when a place is free (waiting rejects with the signal's reason if it aborts first). */
  async run<T>(fn: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    await this.acquire(signal);
    try {
      return await fn();
    } finally {
      this.release();
    }
  }

  private acquire(signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    if (this.running < this.max) {
      this.running++;
      return Promise.resolve();
    }
    return new Promise((resolve, reject) => {
      const grant = () => {
        signal?.removeEventListener("abort", onAbort);
        this.running++;
        resolve();
      };
      const onAbort = () => {
        this.queue = this.queue.filter((g) => g !== grant);
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.queue.push(grant);
    });
  }

  private release(): void {
    this.running--;
    this.queue.shift()?.();
  }
}
