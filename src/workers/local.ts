import { Agent, type HostLink } from "../../agent/agent";
import type { SupervisorOptions } from "../../agent/supervisor";
import { builtinLlama } from "../../agent/runtimes/builtin";
import type { ModelPuller } from "../../agent/replica-models";
import type { Db } from "../db";
import type { Fleet } from "./fleet";
import { recordMachine, upsertLocalWorker } from "./service";

/** The local agent's link to the host: plain function calls, no network hop. */
export function localHostLink(db: Db, fleet: Fleet, version: string, hostId: string | null = null): HostLink {
  return {
    register: async (machine) => {
      const w = await upsertLocalWorker(db, machine, version, hostId);
      await fleet.reconcile();
      return w.id;
    },
    heartbeat: async (workerId, machine) => {
      await recordMachine(db, workerId, machine);
      fleet.telemetry.add(workerId, machine);
      fleet.scaling?.wake(); // fresh free-memory numbers: a replica waiting for room may start
    },
    desired: async (workerId) => fleet.desired(workerId),
    report: (workerId, r) => fleet.report(workerId, r),
    ringFor: (id) => fleet.ringFor(id),
    subscribe: (cb) => fleet.subscribe(cb),
  };
}

/** Starts the agent for this machine inside `serve`. */
export async function startLocalAgent(opts: {
  db: Db;
  fleet: Fleet;
  dataDir: string;
  version: string;
  hostId?: string;
  env?: Record<string, string | undefined>;
  telemetryMs?: number;
  supervisor?: Partial<SupervisorOptions>;
  runtimeEnv?: string[];
  pullModel?: ModelPuller;
  clusterAddress?: string;
  link?: (primary: HostLink) => HostLink;
}): Promise<Agent> {
  const primary = localHostLink(opts.db, opts.fleet, opts.version, opts.hostId ?? null);
  const agent = new Agent({
    host: opts.link ? opts.link(primary) : primary,
    dataDir: opts.dataDir,
    env: opts.env,
    telemetryMs: opts.telemetryMs,
    builtinLlama: () => builtinLlama(opts.dataDir),
    supervisor: opts.supervisor,
    runtimeEnv: opts.runtimeEnv,
    pullModel: opts.pullModel,
    clusterAddress: opts.clusterAddress,
  });
  await agent.start();
  return agent;
}
