/**
 * The soak's faults and when they happen: `kill -9` of inferd (restarted on the same data dir and
 * port; with several hosts, each host in turn), `kill -9` of a runtime's process group (inferd or the
 * agent restarts it), `kill -9` of the remote agent (run again from its data dir), and a webhook
 * receiver taken down and brought back. Each fault is recorded with when it started, when inferd
 * listened again (kills of inferd) and when the system was whole again, so the report can tell which
 * errors a fault explains. In a cluster a killed host stays down at least `hostDownMs` (default 0); one that led
 * is restarted only once another host is seen leading (else it could take the lead back at its start
 * and the lead would never move), and every `goneEvery`-th killed host stays down until the others
 * list it as gone (past the host timeout: its running jobs then go back to the queue by the leader's
 * chores, not its own restart).
 */
import { runtimePids } from "../lib";
import type { SoakAgent, SoakHost } from "./host";
import type { SoakReceiver } from "./receivers";

/** What was broken. */
export type FaultKind = "inferd" | "runtime" | "agent" | "receiver";

/** One fault: started `at`; inferd listening again `upAt` (inferd kills); whole again `recoveredAt`. */
export interface Fault {
  kind: FaultKind;
  what: string;
  at: number;
  upAt?: number;
  recoveredAt?: number;
  /** Why it did not recover in time, or could not be done. */
  error?: string;
  /** Kills of a host of a cluster: which one (index into the hosts). Unset with one host. */
  host?: number;
  /** Cluster: the killed host led the cluster (as the hosts said just before the kill). */
  wasLeader?: boolean;
  /** Cluster, kills of the leader: ms from the kill until another host was seen leading. */
  takeoverMs?: number;
  /** Cluster: kept down until the other hosts listed it as gone; `goneMs` from the kill until they did. */
  gone?: boolean;
  goneMs?: number;
  /** Cluster: jobs it was running when killed (`running`, claimed by it, in the database just after the kill). */
  heldJobs?: number;
  /** Cluster, `gone` kills: ms from the kill until none of its jobs was running any more (the leader put them back in the queue). */
  requeuedMs?: number;
}

/** When faults happen: `kills` kills of inferd every `periodMs`, the first after `firstKillMs`; another fault half-way between. */
export interface FaultPlan {
  kills: number;
  periodMs: number;
  firstKillMs: number;
  /** How long the remote agent stays dead (past the host's worker timeout, so the host sees it offline). */
  agentDownMs: number;
  /** How long the flapping receiver stays down (well inside the retry schedule, so nothing owed to it ends terminal). */
  receiverDownMs: number;
  /** Longest wait for the system to be whole again after a fault (and, in a cluster, for a new leader or a host listed gone). */
  recoverMs: number;
  /** Cluster: every `goneEvery`-th kill keeps its host down until the others list it as gone; unset or 0: never. */
  goneEvery?: number;
  /**
   * Cluster: shortest time a killed host stays down (default: restarted at once). Its machine is an
   * agent of the other hosts; what it had taken from them runs again when its new process polls.
   */
  hostDownMs?: number;
}

/** A runtime the soak may kill: the agent data dir whose `run/` lists it, and a word of its command line. */
export interface RuntimeRef {
  label: string;
  dataDir: string;
  model: string;
}

/** What the faults ask of a cluster, through the hosts that are up (`GET /admin/info`). */
export interface ClusterControl {
  /** The host id the cluster names as leader; undefined when no host answers or none leads. */
  leader(): Promise<string | undefined>;
  /** Whether a host that is up lists host `hostId` as not alive. */
  listedGone(hostId: string): Promise<boolean>;
  /** How many jobs the database shows `running` and claimed by host `hostId`. */
  runningJobsOf(hostId: string): Promise<number>;
}

/** What the faults act on. */
export interface FaultTargets {
  /** The inferd hosts, killed in turn (one: the single-host soak). */
  hosts: SoakHost[];
  agent: SoakAgent;
  flapping: SoakReceiver;
  runtimes: RuntimeRef[];
  /** True when every replica that should run is ready (remote ones only while the agent runs), and in a cluster every host is alive and one leads. */
  whole(): Promise<boolean>;
  /** Set with several hosts. */
  cluster?: ClusterControl;
  log(line: string): void;
}

/** Resolves at epoch ms `t` (at once when it is past). */
const until = (t: number) => Bun.sleep(Math.max(0, t - Date.now()));

/** Polls `check` until it is true or `ms` pass; true when it held. */
async function pollTrue(check: () => Promise<boolean> | boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (
      await Promise.resolve()
        .then(check)
        .catch(() => false)
    )
      return true;
    await Bun.sleep(100);
  }
  return false;
}

/**
 * Cluster, after the kill of `host` and before its restart: waits until another host leads (when it
 * led) and, for a `gone` kill, until the others list it as not alive and none of the jobs it was
 * running is still running. Notes the times on `f`.
 */
async function awaitCluster(f: Fault, host: SoakHost, cluster: ClusterControl, plan: FaultPlan): Promise<string> {
  const notes: string[] = [];
  f.heldJobs = await cluster.runningJobsOf(host.hostId).catch(() => undefined);
  if (f.heldJobs) notes.push(`it was running ${f.heldJobs} job(s)`);
  if (f.wasLeader) {
    const moved = await pollTrue(async () => {
      const id = await cluster.leader();
      return id !== undefined && id !== host.hostId;
    }, plan.recoverMs);
    if (moved) {
      f.takeoverMs = Date.now() - f.at;
      notes.push(`another host led after ${f.takeoverMs} ms`);
    } else f.error = `no other host took the lead within ${plan.recoverMs} ms`;
  }
  if (f.gone) {
    if (await pollTrue(() => cluster.listedGone(host.hostId), plan.recoverMs)) {
      f.goneMs = Date.now() - f.at;
      notes.push(`listed gone after ${f.goneMs} ms`);
    } else f.error ??= `not listed as gone within ${plan.recoverMs} ms`;
    if (await pollTrue(async () => (await cluster.runningJobsOf(host.hostId)) === 0, plan.recoverMs)) {
      f.requeuedMs = Date.now() - f.at;
      if (f.heldJobs) notes.push(`its jobs back in the queue after ${f.requeuedMs} ms`);
    } else f.error ??= `its running jobs were not put back in the queue within ${plan.recoverMs} ms`;
  }
  return notes.map((n) => `; ${n}`).join("");
}

/** Runs the fault schedule; resolves with every fault once the last one has recovered (or given up). */
export async function runFaults(plan: FaultPlan, tg: FaultTargets): Promise<Fault[]> {
  const faults: Fault[] = [];
  const pending: Promise<void>[] = [];
  const recover = async (f: Fault, first: () => Promise<boolean> | boolean = () => true) => {
    const ok = (await pollTrue(first, plan.recoverMs)) && (await pollTrue(tg.whole, plan.recoverMs));
    if (ok) f.recoveredAt = Date.now();
    else f.error ??= `not whole again within ${plan.recoverMs} ms`;
  };
  const cluster = tg.hosts.length > 1 ? tg.cluster : undefined;
  const secondary = [killRuntime, killAgent, flapReceiver];
  let runtimeTurn = 0;
  let next = Date.now() + plan.firstKillMs;
  for (let i = 0; i < plan.kills; i++) {
    await until(next);
    const target = i % tg.hosts.length;
    const host = tg.hosts[target];
    const f: Fault = {
      kind: "inferd",
      what: cluster ? `kill -9 ${host.name} #${Math.floor(i / tg.hosts.length) + 1}` : `kill -9 inferd #${i + 1}`,
      at: Date.now(),
    };
    if (cluster) {
      const leader = await cluster.leader().catch(() => undefined);
      Object.assign(f, {
        host: target,
        wasLeader: leader === host.hostId,
        gone: !!plan.goneEvery && (i + 1) % plan.goneEvery === 0,
        at: Date.now(),
      });
    }
    faults.push(f);
    const pid = host.pid;
    await host.kill9();
    const notes = cluster ? await awaitCluster(f, host, cluster, plan) : "";
    if (cluster) await until(f.at + (plan.hostDownMs ?? 0));
    try {
      await host.restart();
      f.upAt = Date.now();
      tg.log(
        `  ${f.what} (pid ${pid}${f.wasLeader ? ", leading" : ""})${notes}; restarted as pid ${host.pid} in ${f.upAt - f.at} ms`,
      );
      pending.push(recover(f));
    } catch (e) {
      f.error = `restart failed: ${e instanceof Error ? e.message : String(e)}`;
      throw new Error(`${f.error}\n--- ${host.name}'s output ---\n${host.output().slice(-4000)}`);
    }
    // In a cluster a host may stay down past its slot (a takeover, a `gone` kill): the schedule
    // moves on from its restart, so the next fault does not land while it is still down.
    await until(Math.max(next + plan.periodMs / 2, cluster ? f.upAt + 1000 : 0));
    const kind = secondary[i % secondary.length];
    const g = await kind(plan, tg, kind === killRuntime ? runtimeTurn++ : 0);
    faults.push(g.fault);
    pending.push(g.done.then(() => recover(g.fault, g.back)));
    next = Math.max(next + plan.periodMs, cluster ? f.upAt + plan.periodMs / 2 : 0);
  }
  await Promise.all(pending);
  return faults;
}

/** A fault that has been done; `done` resolves when its own action is over, `back` tells when its part is restored. */
interface Started {
  fault: Fault;
  done: Promise<void>;
  back?: () => boolean;
}

/** SIGKILL of one runtime's process group (in turn: each runtime of `tg.runtimes`); whole again once another process runs it. */
async function killRuntime(_plan: FaultPlan, tg: FaultTargets, turn: number): Promise<Started> {
  const ref = tg.runtimes[turn % tg.runtimes.length];
  const fault: Fault = { kind: "runtime", what: `kill -9 runtime ${ref.label}`, at: Date.now() };
  const pid = runtimePids(ref.dataDir).find((r) => r.argv.some((a) => a.includes(ref.model)))?.pid;
  if (!pid) {
    fault.error = `no runtime of ${ref.label} was running to kill`;
    return { fault, done: Promise.resolve() };
  }
  try {
    process.kill(-pid, "SIGKILL");
  } catch (e) {
    fault.error = `kill of ${pid} failed: ${e instanceof Error ? e.message : String(e)}`;
  }
  tg.log(`  ${fault.what} (process group ${pid})`);
  const back = () => runtimePids(ref.dataDir).some((r) => r.pid !== pid && r.argv.some((a) => a.includes(ref.model)));
  return { fault, done: Promise.resolve(), back };
}

/** SIGKILL of the remote agent; run again after `agentDownMs` (`inferd agent` from its data dir). */
async function killAgent(plan: FaultPlan, tg: FaultTargets): Promise<Started> {
  const fault: Fault = { kind: "agent", what: "kill -9 remote agent", at: Date.now() };
  const pid = tg.agent.pid;
  await tg.agent.kill9();
  tg.log(`  ${fault.what} (pid ${pid}); back in ${plan.agentDownMs} ms`);
  const done = (async () => {
    await Bun.sleep(plan.agentDownMs);
    await tg.agent.rerun().catch((e) => {
      fault.error = `agent did not run again: ${e instanceof Error ? e.message : String(e)}`;
    });
  })();
  return { fault, done, back: () => tg.agent.running };
}

/** Takes the flapping receiver down for `receiverDownMs`, then up again on the same port. */
async function flapReceiver(plan: FaultPlan, tg: FaultTargets): Promise<Started> {
  const fault: Fault = { kind: "receiver", what: `receiver ${tg.flapping.name} down`, at: Date.now() };
  await tg.flapping.down();
  tg.log(`  ${fault.what} for ${plan.receiverDownMs} ms`);
  const done = (async () => {
    await Bun.sleep(plan.receiverDownMs);
    await tg.flapping.bringUp();
  })();
  return { fault, done, back: () => tg.flapping.up };
}
