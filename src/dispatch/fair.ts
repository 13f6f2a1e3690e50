/**
 * The waiting line of one workload, fair between classes and between keys. Pure: no timers, no
 * I/O; the dispatcher (./queue.ts) owns the clock, the slots and the promises.
 *
 * Two classes wait apart: `interactive` (synchronous requests of keys without `priority: "batch"`,
 * and keyless ones such as the dashboard's playground) and `batch` (async jobs, Batch API work, and
 * synchronous requests of `priority: "batch"` keys). Interactive goes first, but batch never
 * starves: while both wait, at least one grant in `BATCH_EVERY` (10, i.e. 10 % of the slots that
 * free) goes to batch.
 *
 * Within a class, deficit round-robin (DRR, Shreedhar & Varghese) over the keys waiting: each key has
 * its own FIFO; the keys with waiters form a ring; the key at the head of the ring is credited its
 * quantum (its `weight`, 1–1000, default 1) and takes one grant per unit of credit, then goes to the
 * back of the ring. A grant costs 1 (what a request will cost is unknown when it is granted), so a
 * key of weight 3 gets three grants to a weight-1 key's one while both wait. As in fq_codel (RFC
 * 8290), a key that had no one waiting joins a `fresh` ring served before the keys with a backlog,
 * for one quantum: a key that sends a trickle is served at the next free slot, whatever the queues
 * of the others; a key that floods builds a backlog, waits behind its own queue only and takes its
 * turns in the `old` ring. DRR rather than weighted fair queuing: O(1) per grant with integer
 * quanta, no virtual clock, no sorting.
 *
 * Every operation is O(1), except `fattest` (O(keys), used only when the queue is full): waiters and
 * keys live in doubly-linked lists, so removing a waiter that timed out or left (in the middle of a
 * 10,000-long queue) is an unlink, not a splice.
 */

/** The two classes of waiters, served interactive first with a bounded share for batch. */
export type WaitClass = "interactive" | "batch";

/** While both classes wait, one grant in this many goes to batch (at least). */
export const BATCH_EVERY = 10;

/** The largest weight a key may have (the smallest is 1). */
export const MAX_WEIGHT = 1000;

/** A node of a doubly-linked list. */
interface Link<N> {
  prev: N | undefined;
  next: N | undefined;
}

/** A doubly-linked list of nodes that carry their own links: push and unlink are O(1). */
class Chain<N extends Link<N>> {
  head: N | undefined;
  tail: N | undefined;
  size = 0;

  push(n: N): void {
    n.prev = this.tail;
    n.next = undefined;
    if (this.tail) this.tail.next = n;
    else this.head = n;
    this.tail = n;
    this.size++;
  }

  /** Takes `n` out; it must be in this list. */
  unlink(n: N): void {
    if (n.prev) n.prev.next = n.next;
    else this.head = n.next;
    if (n.next) n.next.prev = n.prev;
    else this.tail = n.prev;
    n.prev = n.next = undefined;
    this.size--;
  }
}

/** One key's waiters in one class, and its place in the class's ring. */
interface Flow<T> extends Link<Flow<T>> {
  key: string;
  quantum: number;
  /** Grants it may still take in its current turn. */
  deficit: number;
  entries: Chain<Entry<T>>;
  /** How many of its waiters count against the queue's bound. */
  bounded: number;
  /** The ring it is in: fresh (it just started waiting) or old (it has had a turn and still waits). */
  ring: Chain<Flow<T>>;
}

/** One waiter; `flow` is undefined once it has left the line. */
interface Entry<T> extends Link<Entry<T>> {
  value: T;
  flow: Flow<T> | undefined;
  drr: Drr<T>;
  bounded: boolean;
}

/** Where a waiter stands in a `FairQueue`: give it back to `remove` when the waiter leaves. */
export type Place<T> = { readonly value: T };

/** How a waiter joins: its class, its key ("" for none), the key's weight, and whether it counts against the bound. */
export interface Joining {
  cls: WaitClass;
  key: string;
  weight?: number;
  bounded: boolean;
}

/**
 * A weight as a DRR quantum: a whole number from 1 to `MAX_WEIGHT` (anything else: 1, or the bound).
 * @example quantumOf(undefined) // → 1
 */
export const quantumOf = (weight: number | undefined) =>
  weight === undefined || !Number.isFinite(weight) ? 1 : Math.min(MAX_WEIGHT, Math.max(1, Math.floor(weight)));

/**
 * Deficit round-robin over the keys of one class, with two rings as fq_codel has: `fresh` for keys
 * that just started waiting, served first for one quantum, and `old` for keys with a backlog.
 * Invariant: the flow served next (head of `fresh`, else of `old`) has credit (deficit ≥ 1).
 */
class Drr<T> {
  private flows = new Map<string, Flow<T>>();
  private fresh = new Chain<Flow<T>>();
  private old = new Chain<Flow<T>>();
  size = 0;

  push(value: T, key: string, weight: number | undefined, bounded: boolean): Entry<T> {
    let flow = this.flows.get(key);
    if (!flow) {
      flow = {
        key,
        quantum: quantumOf(weight),
        deficit: quantumOf(weight),
        entries: new Chain(),
        bounded: 0,
        ring: this.fresh,
        prev: undefined,
        next: undefined,
      };
      this.flows.set(key, flow);
      this.fresh.push(flow);
    }
    // The weight a key's newest request carries is the key's weight from now on (limits change live).
    flow.quantum = quantumOf(weight);
    const e: Entry<T> = { value, flow, drr: this, bounded, prev: undefined, next: undefined };
    flow.entries.push(e);
    if (bounded) flow.bounded++;
    this.size++;
    this.credit();
    return e;
  }

  /** The flow the next grant of this class goes to. */
  private serving(): Flow<T> | undefined {
    return this.fresh.head ?? this.old.head;
  }

  /** The waiter the next grant of this class goes to. */
  peek(): Entry<T> | undefined {
    return this.serving()?.entries.head;
  }

  /** Grants the next waiter: its key spends one unit of credit and, out of credit, goes to the back of the old ring. */
  take(): Entry<T> | undefined {
    const flow = this.serving();
    const e = flow?.entries.head;
    if (!flow || !e) return undefined;
    flow.deficit -= 1;
    this.unlinkEntry(e);
    if (flow.entries.size > 0 && flow.deficit < 1) {
      flow.ring.unlink(flow);
      flow.ring = this.old;
      this.old.push(flow);
      this.credit();
    }
    return e;
  }

  /** Takes a waiter out from anywhere in the line (it left, or its wait ran out). */
  remove(e: Entry<T>): void {
    this.unlinkEntry(e);
  }

  private unlinkEntry(e: Entry<T>): void {
    const flow = e.flow!;
    flow.entries.unlink(e);
    e.flow = undefined;
    if (e.bounded) flow.bounded--;
    this.size--;
    if (flow.entries.size > 0) return;
    // A key with no one waiting leaves its ring and forgets its credit (DRR's rule).
    this.flows.delete(flow.key);
    flow.ring.unlink(flow);
    this.credit();
  }

  /** Gives the flow served next its quantum when it has no credit left (only old flows can be out of it). */
  private credit(): void {
    const next = this.serving();
    if (next && next.deficit < 1) next.deficit += next.quantum;
  }

  /** How many bounded waiters `key` has here. */
  boundedOf(key: string): number {
    return this.flows.get(key)?.bounded ?? 0;
  }

  /** The flow with the most bounded waiters. */
  fattest(): Flow<T> | undefined {
    let best: Flow<T> | undefined;
    for (const f of this.flows.values()) if (f.bounded > (best?.bounded ?? 0)) best = f;
    return best;
  }

  *values(): Generator<T> {
    for (const ring of [this.fresh, this.old])
      for (let f = ring.head; f; f = f.next) for (let e = f.entries.head; e; e = e.next) yield e.value;
  }
}

/**
 * The fair waiting line of one workload: two classes (interactive first, batch at least one grant
 * in `BATCH_EVERY` while both wait), deficit round-robin over keys within each.
 * @example
 * const q = new FairQueue<string>();
 * q.push("job", { cls: "batch", key: "k1", bounded: false });
 * q.push("chat", { cls: "interactive", key: "k2", bounded: true });
 * q.shift() // → "chat"
 */
export class FairQueue<T> {
  private classes: Record<WaitClass, Drr<T>> = { interactive: new Drr(), batch: new Drr() };
  /** Interactive grants made in a row while batch waited. */
  private sinceBatch = 0;
  /** Waiters that count against the queue's bound (synchronous requests). */
  bounded = 0;

  /** How many wait. */
  get size(): number {
    return this.classes.interactive.size + this.classes.batch.size;
  }

  /** How many of a class wait. */
  sizeOf(cls: WaitClass): number {
    return this.classes[cls].size;
  }

  /** Adds a waiter at the end of its key's line; the place removes it later. */
  push(value: T, how: Joining): Place<T> {
    if (how.bounded) this.bounded++;
    return this.classes[how.cls].push(value, how.key, how.weight, how.bounded);
  }

  /** The class the next grant goes to. */
  private next(): Drr<T> | undefined {
    const { interactive, batch } = this.classes;
    if (batch.size > 0 && (interactive.size === 0 || this.sinceBatch >= BATCH_EVERY - 1)) return batch;
    return interactive.size > 0 ? interactive : undefined;
  }

  /** The waiter the next grant goes to (without granting it). */
  peek(): T | undefined {
    return this.next()?.peek()?.value;
  }

  /** Grants the next waiter: takes it out of the line and returns it (the one `peek` named). */
  shift(): T | undefined {
    const drr = this.next();
    const e = drr?.take();
    if (!e) return undefined;
    if (e.bounded) this.bounded--;
    if (drr === this.classes.batch) this.sinceBatch = 0;
    else this.sinceBatch = this.classes.batch.size > 0 ? this.sinceBatch + 1 : 0;
    return e.value;
  }

  /** Takes a waiter out wherever it stands; false when it had already left (granted or removed). */
  remove(place: Place<T>): boolean {
    const e = place as Entry<T>;
    if (!e.flow) return false;
    if (e.bounded) this.bounded--;
    e.drr.remove(e);
    return true;
  }

  /** How many bounded waiters `key` has in class `cls`. */
  boundedOf(cls: WaitClass, key: string): number {
    return this.classes[cls].boundedOf(key);
  }

  /**
   * The key with the most bounded waiters (over both classes), its count, and its newest bounded
   * waiter: who makes room when the queue is full (the fattest flow drops, as in fq_codel). O(keys).
   */
  fattest(): { key: string; cls: WaitClass; count: number; newest: T } | undefined {
    let best: { flow: Flow<T>; cls: WaitClass } | undefined;
    for (const cls of ["interactive", "batch"] as const) {
      const f = this.classes[cls].fattest();
      if (f && f.bounded > (best?.flow.bounded ?? 0)) best = { flow: f, cls };
    }
    if (!best) return undefined;
    let e = best.flow.entries.tail;
    while (e && !e.bounded) e = e.prev;
    return e && { key: best.flow.key, cls: best.cls, count: best.flow.bounded, newest: e.value };
  }

  /** Every waiter, interactive first, each class in ring order (for failing them all; O(n)). */
  *values(): Generator<T> {
    yield* this.classes.interactive.values();
    yield* this.classes.batch.values();
  }
}
