/** The request was aborted (client gone) while it waited for a slot or generated. */
export class AbortedError extends Error {
  /** Tokens generated before the abort (0 when it was still waiting). */
  constructor(readonly tokens = 0) {
    super("the request was aborted");
  }
}

/**
 * A fixed set of slots handed out first come, first served: `-np N` gives N context sequences, and
 * a request beyond N waits here until one is released or its signal aborts.
 * @example const seq = await pool.acquire(req.signal); try { ... } finally { pool.release(seq); }
 */
export class SlotPool<T> {
  private readonly free: T[];
  private readonly waiters: {
    resolve: (slot: T) => void;
    reject: (e: Error) => void;
    signal?: AbortSignal;
    onAbort: () => void;
  }[] = [];

  constructor(slots: T[]) {
    this.free = [...slots];
  }

  /** Requests waiting for a slot. */
  get waiting(): number {
    return this.waiters.length;
  }

  /** Slots not in use. */
  get available(): number {
    return this.free.length;
  }

  /** Resolves with a slot, at once when one is free; rejects with AbortedError when `signal` aborts first. */
  acquire(signal?: AbortSignal): Promise<T> {
    if (signal?.aborted) return Promise.reject(new AbortedError());
    const slot = this.free.shift();
    if (slot !== undefined) return Promise.resolve(slot);
    return new Promise<T>((resolve, reject) => {
      const waiter = {
        resolve,
        reject,
        signal,
        onAbort: () => {
          const i = this.waiters.indexOf(waiter);
          if (i >= 0) this.waiters.splice(i, 1);
          reject(new AbortedError());
        },
      };
      signal?.addEventListener("abort", waiter.onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  /** Gives a slot back, to the longest-waiting request if any. */
  release(slot: T): void {
    const next = this.waiters.shift();
    if (!next) {
      this.free.push(slot);
      return;
    }
    next.signal?.removeEventListener("abort", next.onAbort);
    next.resolve(slot);
  }
}
