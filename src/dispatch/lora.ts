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
 * (least recently used first) and, per adapter, the requests using it now (never unloaded under
 * them). Engines that take adapters at launch (llama.cpp) hold every known one.
 *
 * Least recently used, not least often: vLLM 0.11's unload only forgets the name
 * (vllm/entrypoints/openai/serving_models.py `unload_lora_adapter`), its CPU cache of
 * `--max-cpu-loras` keeps the weights and evicts its own least recently used one when the next load
 * comes; an order of inferd's own (a frequency count) evicts other adapters than the engine does, and
 * a request for one inferd still counts as held then pays the load inside the engine.
 */
export class ReplicaLora {
  /** Loaded adapters, least recently used first (the time of their last request). */
  private loaded = new Map<string, number>();
  private loading = new Map<string, Promise<void>>();
  private using = new Map<string, number>();

  constructor(
    readonly engine: EngineLora,
    private known: AdapterPath[],
    /** Adapters its runtime holds at once (past it the least recently used one is unloaded). */
    readonly slots: number,
    private call: CallRuntime,
  ) {}

  /**
   * Takes the replica's newer list of pulled adapters: one removed is unloaded from the runtime (in
   * the background: nothing waits for it) and no longer counted as held.
   */
  update(known: AdapterPath[]): void {
    this.known = known;
    for (const name of [...this.loaded.keys()]) {
      if (known.some((a) => a.name === name)) continue;
      this.loaded.delete(name);
      void this.run(this.engine.unload?.(name) ?? [], AbortSignal.timeout(30_000), true).catch(() => {});
    }
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
   * Makes sure the runtime holds `name` for a request, counting it as in use until `done` is called.
   * `hit`: it held it already. `loaded`: this request made the load (a second request for an adapter
   * being loaded waits for that load: no hit, no load of its own). For an engine that loads while
   * running, a load first unloads, while the adapters held and being loaded fill its slots, the least
   * recently used one no request uses. A refused load is a 502 naming the runtime's answer;
   * an adapter this replica has not pulled yet is a 503.
   */
  async acquire(name: string, signal: AbortSignal): Promise<{ hit: boolean; loaded: boolean; done: () => void }> {
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
      if (n > 0) return void this.using.set(name, n);
      this.using.delete(name);
      // A load waiting for a slot may take this one now.
      const woken = this.waiting;
      this.waiting = [];
      for (const w of woken) w();
    };
    try {
      if (this.holds(name)) {
        this.touch(name);
        return { hit: true, loaded: false, done };
      }
      let pending = this.loading.get(name);
      const mine = !pending;
      if (!pending) {
        pending = this.load({ name, path }, signal).finally(() => this.loading.delete(name));
        this.loading.set(name, pending);
      }
      await pending;
      this.touch(name);
      return { hit: false, loaded: mine, done };
    } catch (e) {
      done();
      throw e;
    }
  }

  /** Marks a loaded adapter used now (the most recently used). */
  private touch(name: string): void {
    this.loaded.delete(name);
    this.loaded.set(name, Date.now());
  }

  /** The least recently used loaded adapter no request uses, if any. */
  private victim(): string | undefined {
    for (const name of this.loaded.keys()) if (!this.using.has(name)) return name;
    return undefined;
  }

  /**
   * Loads `a`: first, while the adapters held and the other loads under way fill the slots, unloads
   * the least recently used one no request uses; when every one is in use, waits until a
   * request gives one back (the engine never holds more than its slots: past them it would evict one
   * itself, which inferd would still count as held).
   */
  private async load(a: AdapterPath, signal: AbortSignal): Promise<void> {
    for (;;) {
      const others = this.loading.size - (this.loading.has(a.name) ? 1 : 0);
      if (this.loaded.size + others < this.slots) break;
      const name = this.victim();
      if (name === undefined) {
        await this.freed(signal);
        continue;
      }
      this.loaded.delete(name);
      await this.run(this.engine.unload?.(name) ?? [], signal, true);
    }
    await this.run(this.engine.load?.(a) ?? [], signal, false);
  }

  private waiting: (() => void)[] = [];

  /** Resolves when a request gives an adapter back (or rejects when the request went away). */
  private freed(signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(new AppError(499, "client_closed", "the client went away"));
      const wake = () => {
        signal.removeEventListener("abort", gone);
        resolve();
      };
      const gone = () => {
        this.waiting = this.waiting.filter((w) => w !== wake);
        reject(new AppError(499, "client_closed", "the client went away"));
      };
      signal.addEventListener("abort", gone, { once: true });
      this.waiting.push(wake);
    });
  }

  /** Runs calls in order; a load's "already loaded" counts as done, an unload's "not found" too. */
  private async run(calls: RuntimeCall[], signal: AbortSignal, unloading: boolean): Promise<void> {
    for (const c of calls) {
      const r = await this.call(c, signal);
      if (r.status >= 200 && r.status < 300) continue;
      if (/already (been )?loaded|already exists/i.test(r.body)) continue;
      if (unloading && (r.status === 404 || /not found|cannot be found|does not exist/i.test(r.body))) continue;
      throw new AppError(
        502,
        "adapter_load_failed",
        `the runtime refused to ${unloading ? "unload" : "load"} the adapter: ${c.method} ${c.path} answered ${r.status}: ${r.body.slice(0, 300)}`,
      );
    }
  }
}
