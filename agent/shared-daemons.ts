/**
 * The shared daemons an agent starts (Ollama's `ollama serve`): one per key, serving every replica
 * that holds it, restricted to the GPUs of those replicas. When that set changes the daemon inferd
 * started is restarted with the new set (Ollama reads CUDA_VISIBLE_DEVICES only at GPU discovery,
 * discover/runner.go v0.12.6); when no replica holds it any more it is stopped. A daemon inferd did
 * not start is never touched: the replica's log says so.
 */
import type { LogRing } from "./ring";
import { gpuEnv } from "./runtimes/args";
import type { LaunchPlan } from "./runtimes/types";
import { Supervisor, type SupervisorOptions } from "./supervisor";

/** A shared daemon as a launch plan asks for it. */
export type DaemonSpec = NonNullable<LaunchPlan["daemon"]>;

/** What the daemons are started with. */
export interface SharedDaemonsOptions {
  /** Supervisor settings (spawn, timings). */
  supervisor: Partial<SupervisorOptions>;
  /** The environment every daemon gets before its own. */
  env: Record<string, string>;
  /** Where a daemon's output goes. */
  ringFor(key: string): LogRing;
}

interface Entry {
  spec: DaemonSpec;
  /** The GPUs each holding replica asked for. */
  holders: Map<string, number[]>;
  /** The daemon inferd runs, and the GPU list it was started with. */
  sup?: Supervisor;
  gpus?: string;
  /** One change at a time per daemon. */
  queue: Promise<unknown>;
}

/** The sorted union of the holders' GPUs. */
const gpusOf = (e: Entry) => [...new Set([...e.holders.values()].flat())].sort((a, b) => a - b);

/** The same, as CUDA_VISIBLE_DEVICES lists them. */
const gpuList = (e: Entry) => gpusOf(e).join(",");

const running = (s?: Supervisor) => !!s && s.state !== "failed" && s.state !== "stopped";

/** The shared daemons of one agent. */
export class SharedDaemons {
  private entries = new Map<string, Entry>();

  constructor(private opts: SharedDaemonsOptions) {}

  /**
   * Keeps `d` running for replica `holder`, with its GPUs among the daemon's, and waits until it
   * answers; returns a line for the replica's log when the daemon answering is not one inferd started.
   */
  ensure(holder: string, d: DaemonSpec): Promise<string | undefined> {
    const e: Entry = this.entries.get(d.key) ?? { spec: d, holders: new Map(), queue: Promise.resolve() };
    this.entries.set(d.key, e);
    e.spec = d;
    e.holders.set(holder, d.gpus);
    return this.serial(e, async () => {
      if (!running(e.sup)) {
        if (await answers(d.healthUrl))
          return `[inferd] a daemon inferd did not start answers at ${d.healthUrl}: inferd leaves it as it is, so the GPUs it uses and how long it keeps models loaded are its own settings (OLLAMA_KEEP_ALIVE), not the workload's`;
        this.start(e, `for GPUs ${gpuList(e) || "none"}`);
      } else if (e.gpus !== gpuList(e)) await this.restart(e);
      await ready(e.sup!, d);
      return undefined;
    });
  }

  /** Replica `holder` no longer needs daemon `key`: restarted without its GPUs, or stopped when no replica is left. */
  release(holder: string, key: string): Promise<void> {
    const e = this.entries.get(key);
    if (!e?.holders.delete(holder)) return Promise.resolve();
    return this.serial(e, async () => {
      if (!running(e.sup)) return;
      if (e.holders.size === 0) {
        this.say(e, "no workload uses it any more: stopping it");
        await e.sup!.stop();
        e.sup = undefined;
      } else if (e.gpus !== gpuList(e)) await this.restart(e);
    });
  }

  /** Stops every daemon started here. */
  async stop(): Promise<void> {
    await Promise.all([...this.entries.values()].map((e) => e.sup?.stop()));
    this.entries.clear();
  }

  private serial<T>(e: Entry, fn: () => Promise<T>): Promise<T> {
    const next = e.queue.then(fn, fn);
    e.queue = next.catch(() => {});
    return next;
  }

  private async restart(e: Entry): Promise<void> {
    this.say(e, `the GPUs of its workloads changed (${e.gpus || "none"} → ${gpuList(e) || "none"}): restarting it`);
    await e.sup!.stop();
    this.start(e, `for GPUs ${gpuList(e) || "none"}`);
  }

  private start(e: Entry, why: string): void {
    const { spec } = e;
    e.gpus = gpuList(e);
    this.say(e, `starting ${spec.argv.join(" ")} ${why}`);
    e.sup = new Supervisor({
      ...this.opts.supervisor,
      argv: spec.argv,
      env: { ...this.opts.env, ...spec.env, ...gpuEnv(gpusOf(e)) },
      healthUrls: [spec.healthUrl],
      ring: this.opts.ringFor(`daemon:${spec.key}`),
    });
    e.sup.start();
  }

  /** A line in the daemon's own log. */
  private say(e: Entry, text: string): void {
    this.opts.ringFor(`daemon:${e.spec.key}`).push(`\x1b[1m[inferd] ${text}\x1b[0m\r\n`);
  }
}

/** Whether something answers the daemon's health URL now. */
function answers(url: string): Promise<boolean> {
  return fetch(url, { signal: AbortSignal.timeout(2000) }).then(
    (r) => r.ok,
    () => false,
  );
}

/** Waits until the supervised daemon is ready (60 s at most). */
async function ready(sup: Supervisor, d: DaemonSpec): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (sup.state !== "ready") {
    if (sup.state === "failed") throw new Error(`${d.argv.join(" ")} failed: ${sup.reason}`);
    if (Date.now() > deadline) throw new Error(`${d.argv.join(" ")} did not become ready within 60 s`);
    await Bun.sleep(100);
  }
}
