import { AppError } from "../errors";
import { FairQueue, type Place, type WaitClass } from "./fair";
import { hash32, LOAD_FACTOR, PrefixRouter } from "./prefix";
import type { LoraStats, ReplicaLora } from "./lora";

/**
 * A replica that can take requests: `capacity` slots (its assignment's concurrency), `inFlight`
 * of them busy. `send` runs one request on it; local replicas fetch their loopback runtime, remote
 * ones hand the request to their agent.
 */
export interface Target {
  id: string;
  workloadId: string;
  workerId: string;
  capacity: number;
  inFlight: number;
  send(req: Upstream, signal: AbortSignal): Promise<Response>;
  /** Its LoRA adapters, when its workload has any (./lora.ts). */
  lora?: ReplicaLora;
}

/** A request as it goes to a runtime: path under the runtime's base URL, headers and body. */
export interface Upstream {
  path: string;
  method: string;
  headers: Record<string, string>;
  body: Uint8Array | null;
  /** A JSON body, sent with `model` set to the name the chosen runtime serves. */
  json?: Record<string, unknown>;
  /** `json`'s text as the client sent it (when `json` is that text unchanged): sent as it is where nothing in it changes. */
  text?: string;
  /** A body not read yet (an upload): streamed to a local runtime, read whole for a remote agent. */
  source?: BodySource;
  /** For a multipart upload: the `model` values that mean this workload's model, set to the served name. */
  modelAliases?: readonly string[];
  /** The JSON body's last change on its way to the runtime, once `model` is the served name (a LoRA adapter's selection). */
  select?: (body: Record<string, unknown>) => Record<string, unknown>;
}

/** An upload's body, passed on as it arrives or, when a hop needs it whole, read once and kept. */
export interface BodySource {
  /** The body as a stream: as the client sends it the first time, from the kept copy after `bytes()`. */
  stream(): ReadableStream<Uint8Array>;
  /** The body whole (read on first call, then kept, so a request can be tried on another replica). */
  bytes(): Promise<Uint8Array>;
}

/** A granted slot: the target to use and `release()` to give the slot back (idempotent). */
export interface Slot {
  target: Target;
  release(): void;
}

/**
 * Who asks for a slot and how it should be placed: the request's kind, the key it came with (for
 * priorities and fair share between keys) and its prefix affinity (for prefix-aware routing).
 */
export interface Ticket {
  kind: "sync" | "job";
  /** The API key's id (undefined: no key, e.g. the dashboard's playground). */
  keyId?: string;
  /** The key's share against other keys waiting for the same workload (default 1). */
  weight?: number;
  /** "batch": served after interactive requests, as jobs are (default "interactive" for sync requests). */
  priority?: "interactive" | "batch";
  /** Hashes of the prompt's prefix blocks, first block first (empty or undefined: no affinity). */
  affinity?: readonly number[];
  /**
   * The LoRA adapter it asks for, and whether it goes where the adapter is loaded (`aware`: the
   * workload routes by prefix, the default) or to the least-loaded replica like any request.
   */
  adapter?: { name: string; aware: boolean };
}

interface Waiter {
  workloadId: string;
  ticket: Ticket;
  resolve(slot: Slot): void;
  reject(err: AppError): void;
  timer: unknown;
  onAbort: () => void;
  signal?: AbortSignal;
  kind: "sync" | "job";
  place?: Place<Waiter>;
}

/**
 * The class a ticket waits in: jobs and the synchronous requests of `priority: "batch"` keys are
 * batch; other synchronous requests (keyless ones included) are interactive.
 */
export const classOf = (t: Ticket): WaitClass => (t.kind === "job" || t.priority === "batch" ? "batch" : "interactive");

/** A synchronous request with no key or affinity. */
export const SYNC: Ticket = { kind: "sync" };

/** An async job's request. */
export const JOB: Ticket = { kind: "job" };

/** Limits of the queue, from settings. */
export interface QueueLimits {
  /** How long a request may wait for a slot before 503. */
  waitMs: number;
  /** How many requests may wait per workload before 429. */
  maxWaiting: number;
}

/** How the queue waits: real timers by default, fake ones in unit tests. */
export interface Timers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const REAL_TIMERS: Timers = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

/** Why a workload cannot take requests at all (answers at once instead of queueing). */
export type Unservable = (workloadId: string, kind: "sync" | "job") => string | undefined;

/**
 * Per-workload queues over the replicas' slots. A request takes a free slot on a ready replica of
 * its workload at once, or waits until one frees, a replica becomes ready, its wait runs out (503)
 * or the queue is full (429). Waiters are served fairly (./fair.ts): interactive before batch with
 * a bounded share for batch, deficit round-robin over keys within each class. One request is served
 * by exactly one replica.
 */
export class Dispatcher {
  private targets = new Map<string, Target>();
  private waiting = new Map<string, FairQueue<Waiter>>();
  /** Prefix-aware choice for tickets with an affinity: the ring per workload and its hit counts. */
  readonly prefix = new PrefixRouter();
  /** Per workload: requests for a LoRA adapter, those that found it loaded, loads (./lora.ts). */
  readonly lora: LoraStats = new Map();
  /**
   * Workloads with a replica asleep or waking and none ready (set by the fleet from the agents'
   * reports): a request that waits for one waits for a wake (its timeline's `wake` span).
   */
  readonly asleep = new Set<string>();

  constructor(
    private limits: QueueLimits,
    private unservable: Unservable = () => undefined,
    /** Told when a request has to wait for a workload (a replica may need starting: scale from zero, scale up). */
    private onWait: (workloadId: string) => void = () => {},
    private timers: Timers = REAL_TIMERS,
    /** Why a workload has no free slot now (e.g. "waiting for GPU memory"), added to a timeout's message. */
    private explain: (workloadId: string) => string | undefined | Promise<string | undefined> = () => undefined,
  ) {}

  /** Adds or replaces a ready replica, then hands it queued requests. */
  upsertTarget(t: Target): void {
    const old = this.targets.get(t.id);
    // Keep the same object: granted slots release on the object they were taken from.
    if (old)
      Object.assign(old, {
        capacity: t.capacity,
        send: t.send,
        workerId: t.workerId,
        workloadId: t.workloadId,
        lora: t.lora,
      });
    else this.targets.set(t.id, t);
    this.drain(t.workloadId);
  }

  /** A ready replica by id. */
  targetOf(id: string): Target | undefined {
    return this.targets.get(id);
  }

  /** Removes a replica (not ready any more); requests it is running finish or fail on their own. */
  removeTarget(id: string): void {
    const t = this.targets.get(id);
    this.targets.delete(id);
    if (t) this.failIfUnservable(t.workloadId);
  }

  /** Removes every replica of a worker. */
  removeWorker(workerId: string): void {
    for (const t of [...this.targets.values()]) if (t.workerId === workerId) this.removeTarget(t.id);
  }

  /** Every ready replica. */
  allTargets(): Target[] {
    return [...this.targets.values()];
  }

  /** How many ready replicas a workload has (no list is made: the data plane asks on every request). */
  replicaCount(workloadId: string): number {
    let n = 0;
    for (const t of this.targets.values()) if (t.workloadId === workloadId) n++;
    return n;
  }

  /** Ready replicas of a workload. */
  targetsOf(workloadId: string): Target[] {
    return [...this.targets.values()].filter((t) => t.workloadId === workloadId);
  }

  /** How many requests wait for a workload. */
  depth(workloadId: string): number {
    return this.waiting.get(workloadId)?.size ?? 0;
  }

  /** How many requests wait for a workload, per class. */
  depthByClass(workloadId: string): Record<WaitClass, number> {
    const q = this.waiting.get(workloadId);
    return { interactive: q?.sizeOf("interactive") ?? 0, batch: q?.sizeOf("batch") ?? 0 };
  }

  /** Total queued requests per workload id. */
  depths(): Map<string, number> {
    return new Map([...this.waiting].map(([k, v]) => [k, v.size]));
  }

  /**
   * The replica a request takes now, or undefined when none has a free slot: the prefix ring's
   * choice for a ticket with an affinity (the workload routes by prefix), else the least-loaded.
   */
  private freeTarget(workloadId: string, ticket?: Ticket): Target | undefined {
    if (ticket?.adapter?.aware) {
      const chosen = this.adapterTarget(workloadId, ticket.adapter.name, ticket.affinity);
      if (chosen) return chosen;
    } else if (ticket?.affinity?.length) {
      const chosen = this.prefix.choose(workloadId, this.targetsOf(workloadId), ticket.affinity);
      if (chosen) return chosen;
    }
    let best: Target | undefined;
    for (const t of this.targets.values()) {
      if (t.workloadId !== workloadId || t.inFlight >= t.capacity) continue;
      if (!best || t.inFlight / t.capacity < best.inFlight / best.capacity) best = t;
    }
    return best;
  }

  /**
   * The replica for a request asking for LoRA adapter `name`: among those that hold it, with a free
   * slot and in flight below the bound of consistent hashing with bounded loads (./prefix.ts), the
   * one its conversation's prefix names when the request has an affinity and that replica is one of
   * them (its earlier turns are cached there too), else the least loaded of them; when none holds
   * it, the adapter's own replica on a ring of the workload's replicas (so each adapter has a home
   * and loads spread evenly), within the same bound. Undefined: the least-loaded choice decides.
   */
  private adapterTarget(workloadId: string, name: string, affinity?: readonly number[]): Target | undefined {
    const all = this.targetsOf(workloadId);
    let total = 0;
    for (const t of all) total += t.inFlight;
    const bound = Math.ceil((LOAD_FACTOR * (total + 1)) / Math.max(1, all.length));
    const holders = all.filter((t) => t.lora?.holds(name) && t.inFlight < t.capacity && t.inFlight < bound);
    if (holders.length > 1 && affinity?.length) {
      const home = this.prefix.home(workloadId, all, affinity);
      const own = holders.find((t) => t.id === home);
      if (own) return own;
    }
    if (holders.length) return holders.reduce((a, b) => (b.inFlight / b.capacity < a.inFlight / a.capacity ? b : a));
    return this.prefix.choose(workloadId, all, [hash32(`lora\u001e${name}`)]);
  }

  private grant(t: Target): Slot {
    t.inFlight++;
    let released = false;
    return {
      target: t,
      release: () => {
        if (released) return;
        released = true;
        t.inFlight--;
        this.drain(t.workloadId);
      },
    };
  }

  /**
   * Waits for a slot on the workload. Rejects with 429 when the queue is full, 503 when the wait
   * runs out or the workload cannot be served, and 499-style abort when the client goes away.
   * `--queue-max` bounds the synchronous requests waiting per workload (jobs wait unbounded: their
   * runner bounds how many wait); when it is full, the key with the most requests waiting makes
   * room: a request of another key takes the place of that key's newest one (which gets the 429).
   */
  acquire(workloadId: string, signal?: AbortSignal, ticket: Ticket = SYNC): Promise<Slot> {
    const kind = ticket.kind;
    const free = this.freeTarget(workloadId, ticket);
    if (free && this.depth(workloadId) === 0) return Promise.resolve(this.grant(free));
    const why = this.unservable(workloadId, kind);
    if (why) return Promise.reject(new AppError(503, "workload_unavailable", why, { "retry-after": "30" }));
    const queue = this.waiting.get(workloadId) ?? new FairQueue<Waiter>();
    const how = { cls: classOf(ticket), key: ticket.keyId ?? "", weight: ticket.weight, bounded: kind === "sync" };
    if (how.bounded && queue.bounded >= this.limits.maxWaiting && !this.makeRoom(queue, how.cls, how.key))
      return Promise.reject(this.full());
    return new Promise<Slot>((resolve, reject) => {
      const w: Waiter = {
        workloadId,
        ticket,
        resolve,
        reject,
        signal,
        kind,
        timer:
          kind === "sync"
            ? this.timers.set(() => {
                this.dropWaiter(w);
                const refuse = (why: string | undefined) =>
                  reject(
                    new AppError(
                      503,
                      "queue_timeout",
                      `no replica of this workload had a free slot within ${Math.round(this.limits.waitMs / 1000)} s (the server's --queue-wait-ms)${why ? `: ${why}` : ""}`,
                      { "retry-after": "5" },
                    ),
                  );
                void Promise.resolve(this.explain(workloadId)).then(refuse, () => refuse(undefined));
              }, this.limits.waitMs)
            : undefined,
        onAbort: () => {
          this.dropWaiter(w);
          reject(new AppError(499, "client_closed", "the client went away while queued"));
        },
      };
      signal?.addEventListener("abort", w.onAbort, { once: true });
      w.place = queue.push(w, how);
      this.waiting.set(workloadId, queue);
      this.drain(workloadId);
      if (this.depth(workloadId) > 0) this.onWait(workloadId);
    });
  }

  /** 429: the workload's queue is full. */
  private full(): AppError {
    return new AppError(
      429,
      "queue_full",
      `the queue of this workload is full (${this.limits.maxWaiting} waiting, the server's --queue-max); retry later`,
      { "retry-after": "1" },
    );
  }

  /**
   * A full queue makes room for a request of `key` when another key has at least two more requests
   * waiting: that key's newest waiter is refused (429) in its place. False: refuse the newcomer.
   */
  private makeRoom(queue: FairQueue<Waiter>, cls: WaitClass, key: string): boolean {
    const fat = queue.fattest();
    if (!fat || fat.key === key || fat.count <= queue.boundedOf(cls, key) + 1) return false;
    this.dropWaiter(fat.newest);
    fat.newest.reject(this.full());
    return true;
  }

  private dropWaiter(w: Waiter): void {
    if (w.timer !== undefined) this.timers.clear(w.timer);
    w.signal?.removeEventListener("abort", w.onAbort);
    const q = this.waiting.get(w.workloadId);
    if (!q) return;
    if (w.place) q.remove(w.place);
    if (q.size === 0) this.waiting.delete(w.workloadId);
  }

  /** Hands free slots to waiting requests of a workload, in the fair queue's order. */
  drain(workloadId: string): void {
    const q = this.waiting.get(workloadId);
    while (q && q.size > 0) {
      const w = q.peek()!;
      const t = this.freeTarget(workloadId, w.ticket);
      if (!t) break;
      q.shift();
      this.dropWaiter(w);
      w.resolve(this.grant(t));
    }
    this.failIfUnservable(workloadId);
  }

  /** Fails every waiter of a workload that has become unservable (e.g. all replicas failed). */
  failIfUnservable(workloadId: string): void {
    const q = this.waiting.get(workloadId);
    if (!q?.size) return;
    // Asked once per kind that waits (not per waiter): a long queue costs nothing while servable.
    const why = {
      sync: q.bounded > 0 ? this.unservable(workloadId, "sync") : undefined,
      job: q.size > q.bounded ? this.unservable(workloadId, "job") : undefined,
    };
    if (!why.sync && !why.job) return;
    for (const w of [...q.values()]) {
      const reason = why[w.kind];
      if (!reason) continue;
      this.dropWaiter(w);
      w.reject(new AppError(503, "workload_unavailable", reason, { "retry-after": "30" }));
    }
  }
}
