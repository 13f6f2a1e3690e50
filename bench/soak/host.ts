/**
 * The soak's processes: `inferd serve` hosts (one, or several on one PostgreSQL) each killed with
 * SIGKILL and restarted on the same data dir and the same ports, with their RSS and open file
 * descriptors sampled from /proc, and one remote agent (`inferd agent join …`, later `inferd agent`)
 * that is killed and rejoins the same way.
 */
import { mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fixtureEnv, freePort } from "../../test/fixtures";
import {
  adminCaller,
  reapRuntimes,
  REPO_ROOT,
  spawnWithTail,
  waitForListening,
  type BenchInferd,
  type TailedChild,
} from "../lib";

/** One reading of a process's memory and descriptors. */
export interface Sample {
  /** Epoch ms. */
  at: number;
  /** ms since this process printed `listening on`. */
  age: number;
  rssKiB: number;
  fds: number;
  /** Descriptors that are not sockets (files, pipes, PTYs, event fds): these do not come and go with connections. */
  nonSocketFds: number;
  /** What the soak was doing: `idle` before traffic or after the drain, `load` while clients ran. */
  phase: "idle" | "load";
}

/** One inferd process of the run (a restart makes a new one). */
export interface Life {
  pid: number;
  spawnedAt: number;
  listeningAt: number;
  killedAt?: number;
  samples: Sample[];
}

/** VmRSS (KiB) and the open descriptors of `pid` (all, and those that are not sockets), from /proc; undefined once it is gone. */
export function procUsage(pid: number): { rssKiB: number; fds: number; nonSocketFds: number } | undefined {
  try {
    const rss = Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1]);
    const fds = readdirSync(`/proc/${pid}/fd`);
    const sockets = fds.filter((fd) => {
      try {
        return readlinkSync(`/proc/${pid}/fd/${fd}`).startsWith("socket:");
      } catch {
        return false;
      }
    }).length;
    return Number.isFinite(rss) ? { rssKiB: rss, fds: fds.length, nonSocketFds: fds.length - sockets } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Environment of inferd processes: the fakes first on PATH, no inherited INFERD_* settings but
 * `INFERD_RUNTIME_ENV=FAKE_*` (so the fakes' FAKE_* timings reach the runtimes inferd starts), then `extra`.
 */
export function soakEnv(extra: Record<string, string>): Record<string, string> {
  const env = fixtureEnv();
  for (const k of Object.keys(env)) if (k.startsWith("INFERD_")) delete env[k];
  return Object.assign(env, { INFERD_RUNTIME_ENV: "FAKE_*" }, extra);
}

/** A host that can be killed and restarted in place; `admin` and `url` stay valid across restarts. */
export interface SoakHost extends BenchInferd {
  /** How the report names it: `inferd` alone, `host A`, `host B`… in a cluster. */
  name: string;
  /** Its id in the cluster (`GET /admin/info` → `cluster.host_id`; kept in its data dir across restarts). */
  hostId: string;
  port: number;
  tlsPort: number;
  /** Every process so far, the current one last. */
  lives: Life[];
  /** False from the moment a kill is decided until the new process prints `listening on`. */
  readonly up: boolean;
  /** SIGKILL of the current process (the restart is separate); resolves when it has exited. */
  kill9(): Promise<void>;
  /** Starts a new process on the same data dir and ports; resolves when it listens. */
  restart(): Promise<void>;
  /** Samples the current process now (the soak calls it on a timer). */
  sample(phase: Sample["phase"]): void;
}

/**
 * Starts `inferd serve` on two fixed free ports (HTTP and the agents' HTTPS) and a fresh data dir
 * with `args` after them; `env` is the whole child environment (its INFERD_ADMIN_TOKEN, when set, is
 * the admin token). Stop removes the data dir.
 */
export async function startSoakHost(args: string[], env: Record<string, string>, name = "inferd"): Promise<SoakHost> {
  const dataDir = mkdtempSync(join(tmpdir(), "inferd-soak-"));
  const port = await freePort();
  let tlsPort = await freePort();
  while (tlsPort === port) tlsPort = await freePort();
  const cmd = [
    process.execPath,
    join(REPO_ROOT, "src/main.ts"),
    "serve",
    "--port",
    String(port),
    "--tls-port",
    String(tlsPort),
    "--data-dir",
    dataDir,
    ...args,
  ];
  const lives: Life[] = [];
  let child: TailedChild | undefined;
  let up = false;
  let earlier = "";
  let url = "";

  const spawn = async () => {
    if (child) earlier = (earlier + child.output()).slice(-32 * 1024);
    const spawnedAt = Date.now();
    child = spawnWithTail(cmd, { env, name });
    url = await waitForListening(child.proc, child.stdoutHead, 60_000);
    lives.push({ pid: child.pid, spawnedAt, listeningAt: Date.now(), samples: [] });
    up = true;
  };
  const stopped = () => !child || child.proc.exitCode !== null || child.proc.signalCode !== null;
  const host: SoakHost = {
    name,
    hostId: "",
    get url() {
      return url;
    },
    adminToken: "",
    dataDir,
    port,
    tlsPort,
    lives,
    get pid() {
      return child?.pid ?? 0;
    },
    get up() {
      return up;
    },
    output: () => earlier + (child?.output() ?? ""),
    admin: (path, init) => adminCaller(url, host.adminToken)(path, init),
    track: () => {},
    kill9: async () => {
      up = false;
      const life = lives.at(-1);
      if (life) life.killedAt = Date.now();
      if (stopped()) return;
      child!.proc.kill("SIGKILL");
      await child!.proc.exited;
    },
    restart: spawn,
    sample: (phase) => {
      const life = lives.at(-1);
      const got = up && life ? procUsage(life.pid) : undefined;
      if (got && life) life.samples.push({ at: Date.now(), age: Date.now() - life.listeningAt, phase, ...got });
    },
    stop: async () => {
      up = false;
      await child?.stop(15_000);
      await Bun.sleep(200); // the runtimes' own SIGTERM handling
      reapRuntimes(dataDir, "outlived inferd");
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  try {
    await spawn();
  } catch (e) {
    await host.stop();
    throw new Error(`${e instanceof Error ? e.message : String(e)}\n--- inferd output ---\n${host.output()}`);
  }
  host.adminToken =
    env.INFERD_ADMIN_TOKEN ??
    /admin token \(.*\): (ik_admin_\S+)/.exec(child!.stdoutHead())?.[1] ??
    readFileSync(join(dataDir, "admin-token"), "utf8").trim();
  host.hostId = (await host.admin("/admin/info")).cluster?.host_id ?? "";
  return host;
}

/** A remote agent process that can be killed and run again from its data dir. */
export interface SoakAgent {
  workerId: string;
  dataDir: string;
  readonly pid: number;
  /** True while its process runs. */
  readonly running: boolean;
  output(): string;
  kill9(): Promise<void>;
  /** `inferd agent --data-dir <dir>` (after a kill); resolves when it prints `running as worker`. */
  rerun(): Promise<void>;
  /** SIGTERM (then SIGKILL), then any runtime it left, then removes its data dir. */
  stop(): Promise<void>;
}

/** Waits until `child` prints `running as worker` (fails if it exits first or takes over `ms`). */
async function waitRunning(child: TailedChild, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (!child.output().includes("running as worker")) {
    if (child.proc.exitCode !== null || child.proc.signalCode !== null)
      throw new Error(
        `agent exited (${child.proc.exitCode ?? child.proc.signalCode})\n--- its output ---\n${child.output()}`,
      );
    if (Date.now() > deadline)
      throw new Error(`agent not running within ${ms} ms\n--- its output ---\n${child.output()}`);
    await Bun.sleep(50);
  }
}

/**
 * Adds a worker on the host, joins a remote agent to it (`inferd agent join <url> --token <t>`, env
 * as given) and waits until it runs; later runs are `inferd agent` from the same data dir.
 */
export async function joinSoakAgent(host: SoakHost, name: string, env: Record<string, string>): Promise<SoakAgent> {
  const created = await host.admin("/admin/workers", { body: { name } });
  const joinUrl = String(created.join_command).split(" ")[3];
  const dataDir = mkdtempSync(join(tmpdir(), `inferd-soak-${name}-`));
  const base = [process.execPath, join(REPO_ROOT, "src/main.ts"), "agent"];
  let child = spawnWithTail([...base, "join", joinUrl, "--token", created.join_token, "--data-dir", dataDir], {
    env,
    name: `agent ${name}`,
  });
  let earlier = "";
  const running = () => child.proc.exitCode === null && child.proc.signalCode === null;
  const agent: SoakAgent = {
    workerId: created.id,
    dataDir,
    get pid() {
      return child.pid;
    },
    get running() {
      return running();
    },
    output: () => earlier + child.output(),
    kill9: async () => {
      if (!running()) return;
      child.proc.kill("SIGKILL");
      await child.proc.exited;
    },
    rerun: async () => {
      earlier = (earlier + child.output()).slice(-32 * 1024);
      child = spawnWithTail([...base, "--data-dir", dataDir], { env, name: `agent ${name}` });
      await waitRunning(child, 60_000);
    },
    stop: async () => {
      await child.stop(15_000);
      reapRuntimes(dataDir, `outlived agent ${name}`);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  try {
    await waitRunning(child, 60_000);
  } catch (e) {
    await agent.stop();
    throw e;
  }
  return agent;
}
