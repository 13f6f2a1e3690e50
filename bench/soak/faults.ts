/**
 * The soak's faults and when they happen: `kill -9` of inferd (restarted on the same data dir and
 * port), `kill -9` of a runtime's process group (inferd or the agent restarts it), `kill -9` of the
 * remote agent (run again from its data dir), and a webhook receiver taken down and brought back.
 * Each fault is recorded with when it started, when inferd listened again (kills of inferd) and when
 * the system was whole again, so the report can tell which errors a fault explains.
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
  /** Longest wait for the system to be whole again after a fault. */
  recoverMs: number;
}

/** A runtime the soak may kill: the agent data dir whose `run/` lists it, and a word of its command line. */
export interface RuntimeRef {
  label: string;
  dataDir: string;
  model: string;
}

/** What the faults act on. */
export interface FaultTargets {
  host: SoakHost;
  agent: SoakAgent;
  flapping: SoakReceiver;
  runtimes: RuntimeRef[];
  /** True when every replica that should run is ready (remote ones only while the agent runs). */
  whole(): Promise<boolean>;
  log(line: string): void;
}

/** Resolves at epoch ms `t` (at once when it is past). */
const until = (t: number) => Bun.sleep(Math.max(0, t - Date.now()));

/** Polls `check` until it is true or `ms` pass; true when it held. */
async function pollTrue(check: () => Promise<boolean> | boolean, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await Promise.resolve().then(check).catch(() => false)) return true;
    await Bun.sleep(100);
  }
  return false;
}

/** Runs the fault schedule; resolves with every fault once the last one has recovered (or given up). */
export async function runFaults(plan: FaultPlan, tg: FaultTargets): Promise<Fault[]> {
  const faults: Fault[] = [];
  const pending: Promise<void>[] = [];
  const recover = async (f: Fault, first: () => Promise<boolean> | boolean = () => true) => {
    const ok = (await pollTrue(first, plan.recoverMs)) && (await pollTrue(tg.whole, plan.recoverMs));
    if (ok) f.recoveredAt = Date.now();
    else f.error = `not whole again within ${plan.recoverMs} ms`;
  };
  const t0 = Date.now();
  const secondary = [killRuntime, killAgent, flapReceiver];
  let runtimeTurn = 0;
  for (let i = 0; i < plan.kills; i++) {
    await until(t0 + plan.firstKillMs + i * plan.periodMs);
    const f: Fault = { kind: "inferd", what: `kill -9 inferd #${i + 1}`, at: Date.now() };
    faults.push(f);
    await tg.host.kill9();
    try {
      await tg.host.restart();
      f.upAt = Date.now();
      tg.log(`  ${f.what} (pid ${tg.host.lives.at(-2)?.pid}); restarted as pid ${tg.host.pid} in ${f.upAt - f.at} ms`);
      pending.push(recover(f));
    } catch (e) {
      f.error = `restart failed: ${e instanceof Error ? e.message : String(e)}`;
      throw new Error(`${f.error}\n--- inferd's output ---\n${tg.host.output().slice(-4000)}`);
    }
    await until(t0 + plan.firstKillMs + (i + 0.5) * plan.periodMs);
    const kind = secondary[i % secondary.length];
    const g = await kind(plan, tg, kind === killRuntime ? runtimeTurn++ : 0);
    faults.push(g.fault);
    pending.push(g.done.then(() => recover(g.fault, g.back)));
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
