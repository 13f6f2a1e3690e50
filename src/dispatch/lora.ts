/**
 * LoRA adapters on a workload's replicas (issue 39): which adapters each replica holds (least recently
 * used first), loading one on demand through its engine's own calls and unloading the least recently
 * used past the replica's slots, and the counts `/metrics` and the charts read (requests that found
 * their adapter loaded, loads). The choice of replica by adapter is in ./queue.ts (`freeTarget`).
 */
import type { AdapterPath, EngineLora, RuntimeCall } from "../../agent/engines/types";
import { AppError } from "../errors";

/** Sends one call to the replica's runtime; its status and body. */
export type CallRuntime = (call: RuntimeCall, signal: AbortSignal) => Promise<{ status: number; body: string }>;

/** Per workload, since this process started: requests for an adapter, those that found it loaded, loads, unloads. */
export interface LoraCounts {
  requests: number;
  hits: number;
  loads: number;
  unloads: number;
  /** Milliseconds each load took (the latest 1000). */
  loadMs: number[];
}

/** Counts per workload id. */
export type LoraStats = Map<string, LoraCounts>;

/** The counts of a workload, made on first use. */
export function countsOf(stats: LoraStats, workloadId: string): LoraCounts {
  let c = stats.get(workloadId);
  if (!c) stats.set(workloadId, (c = { requests: 0, hits: 0, loads: 0, unloads: 0, loadMs: [] }));
  return c;
}

/**
 * One replica's adapters: those pulled for it (`known`, in launch order), those loaded in its runtime
 * (most recently used last) and, per adapter, the requests using it now (never unloaded under them).
 * Engines that take adapters at launch (llama.cpp) hold every known one.
 */
export class ReplicaLora {
  private loaded = new Map<string, number>();
  private loading = new Map<string, Promise<void>>();
  private using = new Map<string, number>();

  constructor(
    readonly engine: EngineLora,
    private known: AdapterPath[],
    /** Adapters its runtime holds at once (past it the least recently used is unloaded). */
    readonly slots: number,
    private call: CallRuntime,
  ) {}

  /** Takes the replica's newer list of pulled adapters (an adapter removed is no longer loaded here). */
  update(known: AdapterPath[]): void {
    this.known = known;
    for (const name of [...this.loaded.keys()]) if (!known.some((a) => a.name === name)) this.loaded.delete(name);
  }

  /** Whether the adapter is pulled for this replica. */
  knows(name: string): boolean {
    return this.known.some((a) => a.name === name);
  }

  /** Whether its runtime holds the adapter now (a request for it needs no load). */
  holds(name: string): boolean {
    return this.engine.runtime ? this.loaded.has(name) : this.knows(name);
  }

  /** The adapters its runtime holds, least recently used first. */
  held(): string[] {
    return this.engine.runtime ? [...this.loaded.keys()] : this.known.map((a) => a.name);
  }

  /** The body that asks the runtime for `name` (its launch index for llama.cpp). */
  select(body: Record<string, unknown>, name: string): Record<string, unknown> {
    return this.engine.select(
      body,
      name,
      this.known.findIndex((a) => a.name === name),
    );
  }

  /**
   * Makes sure the runtime holds `name` for a request, counting it as in use until `done` is called:
   * at once when it does; else, for an engine that loads while running, unloads the least recently
   * used adapters no request uses past its slots, then loads it (one load per adapter at a time: a
   * second request waits for the first's). True when a load was needed. A refused load is a 502
   * naming the runtime's answer; an adapter this replica has not pulled yet is a 503.
   */
  async acquire(name: string, signal: AbortSignal): Promise<{ loaded: boolean; done: () => void }> {
    const path = this.known.find((a) => a.name === name)?.path;
    if (!path)
      throw new AppError(
        503,
        "adapter_unavailable",
        `the adapter "${name}" is not on this replica yet (it is being pulled); retry in a moment`,
        { "retry-after": "5" },
      );
    this.using.set(name, (this.using.get(name) ?? 0) + 1);
    let ended = false;
    const done = () => {
      if (ended) return;
      ended = true;
      const n = (this.using.get(name) ?? 1) - 1;
      if (n > 0) this.using.set(name, n);
      else this.using.delete(name);
    };
    try {
      if (this.holds(name)) {
        this.touch(name);
        return { loaded: false, done };
      }
      let pending = this.loading.get(name);
      if (!pending) {
        pending = this.load({ name, path }, signal).finally(() => this.loading.delete(name));
        this.loading.set(name, pending);
      }
      await pending;
      return { loaded: true, done };
    } catch (e) {
      done();
      throw e;
    }
  }

  private touch(name: string): void {
    this.loaded.delete(name);
    this.loaded.set(name, Date.now());
  }

  private async load(a: AdapterPath, signal: AbortSignal): Promise<void> {
    for (const name of this.loaded.keys()) {
      if (this.loaded.size < this.slots) break;
      if (this.using.has(name) || this.loading.has(name)) continue;
      this.loaded.delete(name);
      await this.run(this.engine.unload?.(name) ?? [], signal, true);
    }
    await this.run(this.engine.load?.(a) ?? [], signal, false);
    this.touch(a.name);
  }

  /** Runs calls in order; a load's "already loaded" counts as done, an unload's "not found" too. */
  private async run(calls: RuntimeCall[], signal: AbortSignal, unloading: boolean): Promise<void> {
    for (const c of calls) {
      const r = await this.call(c, signal);
      if (r.status >= 200 && r.status < 300) continue;
      if (/already (been )?loaded|already exists/i.test(r.body)) continue;
      if (unloading && (r.status === 404 || /not found|cannot be found/i.test(r.body))) continue;
      throw new AppError(
        502,
        "adapter_load_failed",
        `the runtime refused to ${unloading ? "unload" : "load"} the adapter: ${c.method} ${c.path} answered ${r.status}: ${r.body.slice(0, 300)}`,
      );
    }
  }

  /** Forgets what the runtime holds (it restarted: nothing is loaded any more). */
  reset(): void {
    this.loaded.clear();
  }
}
