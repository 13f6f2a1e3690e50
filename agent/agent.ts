import { createServer } from "node:net";
import { probeMachine, realExec, type Exec } from "./gpu";
import { SerialRunner } from "./serial";
import { LogRing } from "./ring";
import { Replica, type ReplicaHost } from "./replica";
import type { SpawnFn, SupervisorOptions } from "./supervisor";
import { SharedDaemons } from "./shared-daemons";
import { reapStale, trackedSpawn } from "./pidfiles";
import type { GpuInfo, MachineInfo, ReplicaReport, ReplicaSpec } from "./protocol";
import { runtimeEnv } from "./env";
import { directPuller, type ModelPuller } from "./replica-models";
import { LlamaGpuBuilds, npmRegistry } from "./runtimes/llama-gpu";

/**
 * How an agent talks to its host. The local agent calls the host in-process; a remote agent
 * implements the same calls over HTTPS.
 */
export interface HostLink {
  /** Registers (or re-registers) this machine; returns the worker id. */
  register(machine: MachineInfo): Promise<string>;
  heartbeat(workerId: string, machine: MachineInfo): Promise<void>;
  desired(workerId: string): Promise<ReplicaSpec[]>;
  report(workerId: string, r: ReplicaReport): void;
  /** The ring a replica's output goes to (the host reads logs from it). */
  ringFor(assignmentId: string): LogRing;
  /** Calls `cb` when the desired state may have changed; returns an unsubscribe. */
  subscribe(cb: () => void): () => void;
}

/** Settings of an agent; side effects default to the real ones. */
export interface AgentOptions {
  host: HostLink;
  dataDir: string;
  env?: Record<string, string | undefined>;
  exec?: Exec;
  telemetryMs?: number;
  builtinLlama: () => { argv: string[]; env: Record<string, string> };
  supervisor?: Partial<SupervisorOptions>;
  /** Variables (`NAME` or `PREFIX*`) runtimes get beyond the allow-list (`--runtime-env`). */
  runtimeEnv?: string[];
  /** How models named by commands are pulled; default: into `<dataDir>/models` on this machine. */
  pullModel?: ModelPuller;
  /** Where the other members of a multi-node group reach this machine (`--cluster-address`). */
  clusterAddress?: string;
}

/** An IPv4 or IPv6 address or a host name: what `--cluster-address` may be. */
const CLUSTER_ADDRESS =
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,62})(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}))*\.?|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)$/;

/** A free TCP port on `host` (loopback by default), found by binding port 0. */
export function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, host, () => {
      const port = (srv.address() as { port: number }).port;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * The GPU agent: registers the machine, sends telemetry, and reconciles the replicas it runs with
 * what the host wants (start new ones, restart edited ones, stop removed ones).
 */
export class Agent {
  workerId?: string;
  private replicas = new Map<string, Replica>();
  private readonly daemons: SharedDaemons;
  /** Telemetry: one GPU probe at a time, the next scheduled after the last ends. */
  private probes?: SerialRunner;
  private unsubscribe?: () => void;
  /** Reconciles one pass at a time; a failed pass (the host away) waits for the next change. */
  private readonly reconciler = new SerialRunner(() => this.reconcileOnce(), { onError: () => {} });
  private stopped = false;
  private readonly env: Record<string, string | undefined>;
  /** What runtimes and daemons get: the allow-listed part of the agent's environment. */
  private readonly runtimeBase: Record<string, string>;
  private readonly spawn: SpawnFn;
  private readonly pullModel: ModelPuller;
  /** The machine's GPUs as last probed. */
  private gpus: GpuInfo[] = [];
  /** The built-in llama.cpp runtime's GPU builds, fetched from the npm registry (`npm_config_registry`). */
  private readonly llamaGpu: LlamaGpuBuilds;

  constructor(private opts: AgentOptions) {
    if (opts.clusterAddress !== undefined && !CLUSTER_ADDRESS.test(opts.clusterAddress)) {
      throw new Error(
        `--cluster-address "${opts.clusterAddress}" is not an IP address or host name (no port, no scheme)`,
      );
    }
    this.env = opts.env ?? process.env;
    this.runtimeBase = runtimeEnv(this.env, opts.runtimeEnv);
    this.pullModel = opts.pullModel ?? directPuller(opts.dataDir, this.env);
    this.spawn = trackedSpawn(opts.dataDir);
    this.daemons = new SharedDaemons({
      supervisor: { spawn: this.spawn, ...opts.supervisor },
      env: this.runtimeBase,
      ringFor: (key) => opts.host.ringFor(key),
    });
    this.llamaGpu = new LlamaGpuBuilds({
      dataDir: opts.dataDir,
      registry: npmRegistry(this.env),
      gpus: () => this.gpus,
    });
  }

  /** Registers, starts telemetry and runs the first reconcile. */
  async start(): Promise<void> {
    const reaped = await reapStale(this.opts.dataDir);
    if (reaped.length)
      process.stderr.write(`inferd: stopped ${reaped.length} runtime process group(s) left over from a previous run\n`);
    this.workerId = await this.opts.host.register(await this.machine());
    this.probes = new SerialRunner(() => this.sendTelemetry(), { every: this.opts.telemetryMs ?? 5000 });
    this.probes.start();
    this.reconciler.start();
    this.unsubscribe = this.opts.host.subscribe(() => void this.reconcile());
    await this.reconcile();
  }

  /** The machine as probed now, with its cluster address. */
  private async machine(): Promise<MachineInfo> {
    const m = await probeMachine(this.opts.exec ?? realExec);
    this.gpus = m.gpus;
    return this.opts.clusterAddress ? { ...m, cluster_address: this.opts.clusterAddress } : m;
  }

  /** Probes the machine and sends the telemetry now (after a probe in progress, never beside it). */
  private probe(): Promise<void> {
    return this.probes?.run() ?? Promise.resolve();
  }

  private sendTelemetry(): Promise<void> {
    return this.machine()
      .then((m) => (this.stopped ? undefined : this.opts.host.heartbeat(this.workerId!, m)))
      .catch(() => {});
  }

  /** Brings running replicas in line with the host's wishes; concurrent calls coalesce. */
  reconcile(): Promise<void> {
    return this.reconciler.run();
  }

  private async reconcileOnce(): Promise<void> {
    const wanted = await this.opts.host.desired(this.workerId!);
    const ids = new Set(wanted.map((s) => s.assignment_id));
    let stopped = 0;
    for (const [id, r] of this.replicas) {
      if (!ids.has(id)) {
        this.replicas.delete(id);
        await r.stop();
        stopped++;
      }
    }
    // Memory a stopped runtime freed shows at once (the host may be waiting for it to start another).
    if (stopped) await this.probe();
    for (const spec of wanted) {
      const existing = this.replicas.get(spec.assignment_id);
      if (existing) {
        await existing.update(spec);
        continue;
      }
      const r = new Replica(spec, this.opts.host.ringFor(spec.assignment_id), this.replicaHost());
      this.replicas.set(spec.assignment_id, r);
      void r.start();
    }
  }

  private replicaHost(): ReplicaHost {
    return {
      dataDir: this.opts.dataDir,
      env: this.runtimeBase,
      which: (cmd) => (cmd.includes("/") ? cmd : Bun.which(cmd, { PATH: this.env.PATH ?? "" })),
      freePort,
      builtinLlama: this.opts.builtinLlama,
      gpus: () => this.gpus,
      llamaGpu: this.llamaGpu,
      ensureDaemon: (d, holder) => this.daemons.ensure(holder, d),
      releaseDaemon: (key, holder) => this.daemons.release(holder, key),
      report: (r) => {
        if (!this.workerId || this.stopped) return;
        this.opts.host.report(this.workerId, r);
        // Memory a runtime put to sleep freed shows at once (the host may be waiting for it to wake another).
        if (r.state === "sleeping") void this.probe();
      },
      supervisor: { spawn: this.spawn, ...this.opts.supervisor },
      pullModel: this.pullModel,
    };
  }

  /** Stops every runtime and daemon it started (process groups; nothing is left behind). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    await Promise.all([this.probes?.stop(), this.reconciler.stop()]);
    await Promise.all([...this.replicas.values()].map((r) => r.stop()));
    this.replicas.clear();
    await this.daemons.stop();
  }
}
