/**
 * The soak's cluster (`--hosts N`): N `inferd serve` hosts on one PostgreSQL database, each with its
 * own data dir, ports, local agent and fake GPUs, all with the same admin token. Here: starting them
 * (one after the other, so each host's local worker is known), asking them who leads and which hosts
 * are alive (`GET /admin/info` → `cluster`), watching the lead over the run, and the report's
 * cluster part: each host's kills and processes, the leaders seen, and the answers by host.
 */
import type { SQL } from "bun";
import { percentile } from "../lib";
import type { ClusterControl, Fault } from "./faults";
import { startSoakHost, type SoakHost } from "./host";
import { inferdUsage, type ClusterReport, type SoakReport } from "./report";
import type { HostWorker } from "./setup";
import type { Outcome } from "./traffic";

/** `GET /admin/info` → `cluster`, as far as the soak reads it. */
interface ClusterInfo {
  mode: string;
  host_id: string;
  leader: { id: string } | null;
  hosts: { id: string; alive: boolean }[];
}

/** Host names in the report: `host A`, `host B`, … */
export const hostName = (i: number) => `host ${String.fromCharCode(65 + i)}`;

/** How long one `/admin/info` may take before the host counts as not answering. */
const INFO_TIMEOUT_MS = 3000;

/** The cluster as `host` sees it; undefined when it does not answer. */
async function infoOf(host: SoakHost): Promise<ClusterInfo | undefined> {
  try {
    const r = await fetch(`${host.url}/admin/info`, {
      headers: { authorization: `Bearer ${host.adminToken}` },
      signal: AbortSignal.timeout(INFO_TIMEOUT_MS),
    });
    if (!r.ok) {
      await r.body?.cancel();
      return undefined;
    }
    return ((await r.json()) as { cluster: ClusterInfo }).cluster;
  } catch {
    return undefined;
  }
}

/** The cluster as the first host that is up and answers sees it. */
async function anyInfo(hosts: SoakHost[]): Promise<ClusterInfo | undefined> {
  for (const h of hosts.filter((x) => x.up)) {
    const info = await infoOf(h);
    if (info) return info;
  }
  return undefined;
}

/** What the faults ask of the cluster (see `ClusterControl`), through the hosts that are up and the database `db`. */
export function clusterControl(hosts: SoakHost[], db: SQL): ClusterControl {
  return {
    leader: async () => (await anyInfo(hosts))?.leader?.id,
    listedGone: async (hostId) => (await anyInfo(hosts))?.hosts.find((h) => h.id === hostId)?.alive === false,
    runningJobsOf: async (hostId) => {
      const [row] = await db`SELECT count(*)::int AS n FROM jobs WHERE status = 'running' AND claimed_by = ${hostId}`;
      return Number(row.n);
    },
  };
}

/** True when every host is up, a host that answers lists each of them alive, and one of them leads. */
export async function clusterWhole(hosts: SoakHost[]): Promise<boolean> {
  if (!hosts.every((h) => h.up)) return false;
  const info = await anyInfo(hosts);
  if (!info?.leader || !hosts.some((h) => h.hostId === info.leader!.id)) return false;
  return hosts.every((h) => info.hosts.some((x) => x.id === h.hostId && x.alive));
}

/**
 * Starts `n` hosts on the database at `env.INFERD_DATABASE_URL`, one after the other: each one's
 * local worker is the local worker that appears once it listens. `envOf(i)` is host i's environment.
 */
export async function startClusterHosts(
  n: number,
  args: string[],
  envOf: (i: number) => Record<string, string>,
  onStarted: (h: SoakHost) => void,
): Promise<HostWorker[]> {
  const out: HostWorker[] = [];
  for (let i = 0; i < n; i++) {
    const host = await startSoakHost(args, envOf(i), hostName(i));
    onStarted(host);
    if (!host.hostId)
      throw new Error(
        `${host.name} did not say its cluster host id (GET /admin/info → cluster.host_id); is it on the database?`,
      );
    const known = new Set(out.map((h) => h.workerId));
    const deadline = Date.now() + 60_000;
    let workerId: string | undefined;
    while (!workerId) {
      const workers: { id: string; kind: string }[] = await host.admin("/admin/workers");
      const locals = workers.filter((w) => w.kind === "local" && !known.has(w.id));
      if (locals.length > 1)
        throw new Error(
          `the database already has local workers (${locals.map((w) => w.id).join(", ")}): the soak needs an empty database`,
        );
      workerId = locals[0]?.id;
      if (!workerId && Date.now() > deadline)
        throw new Error(`${host.name}'s local worker did not appear within 60 s\n--- its output ---\n${host.output()}`);
      if (!workerId) await Bun.sleep(100);
    }
    out.push({ host, workerId });
  }
  return out;
}

/** One leader seen: from when (epoch ms), which host id, and through which host. */
export interface LeaderSeen {
  at: number;
  id: string;
  via: string;
}

/** Asks every host that is up who leads, every `everyMs`, and keeps each change of leader. */
export function watchLeader(hosts: SoakHost[], everyMs = 500): { seen: LeaderSeen[]; stop(): Promise<void> } {
  const seen: LeaderSeen[] = [];
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      for (const h of hosts.filter((x) => x.up)) {
        const id = (await infoOf(h))?.leader?.id;
        if (id && id !== seen.at(-1)?.id) seen.push({ at: Date.now(), id, via: h.name });
      }
      await Bun.sleep(everyMs);
    }
  })();
  return {
    seen,
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}

/** The cluster part of the report, from the hosts, the faults, the leaders seen and the clients' outcomes. */
export function clusterReport(
  hosts: SoakHost[],
  faults: Fault[],
  seen: LeaderSeen[],
  outcomes: Outcome[],
  t0: number,
): ClusterReport {
  const kills = faults.filter((f) => f.kind === "inferd");
  const nameOf = (id: string) => hosts.find((h) => h.hostId === id)?.name ?? id;
  const takeovers = kills.filter((f) => f.takeoverMs !== undefined).map((f) => f.takeoverMs!);
  return {
    hosts: hosts.map((h, i) => {
      const mine = kills.filter((f) => f.host === i);
      const down = mine.filter((f) => f.upAt).map((f) => f.upAt! - f.at);
      const sent = outcomes.filter((o) => o.host === i);
      return {
        name: h.name,
        id: h.hostId,
        kills: mine.length,
        killsWhileLeading: mine.filter((f) => f.wasLeader).length,
        killsListedGone: mine.filter((f) => f.gone && f.goneMs !== undefined).length,
        jobsHeldAtKills: mine.reduce((n, f) => n + (f.heldJobs ?? 0), 0),
        jobsRequeuedByLeader: mine
          .filter((f) => f.gone && f.requeuedMs !== undefined)
          .reduce((n, f) => n + (f.heldJobs ?? 0), 0),
        downMsP50: percentile(down, 50),
        downMsMax: down.length ? Math.max(...down) : NaN,
        restartMsP50: percentile(
          h.lives.map((l) => l.listeningAt - l.spawnedAt),
          50,
        ),
        inferd: inferdUsage(h.lives),
        requests: {
          sent: sent.length,
          ok: sent.filter((o) => o.status !== undefined && o.status < 300).length,
          fiveXX: sent.filter((o) => o.status !== undefined && o.status >= 500).length,
          noResponse: sent.filter((o) => o.status === undefined).length,
        },
      };
    }),
    leader: {
      seen: seen.map((s) => ({ t: Math.round((s.at - t0) / 100) / 10, host: nameOf(s.id), via: s.via })),
      changes: Math.max(0, seen.length - 1),
      killsOfLeader: kills.filter((f) => f.wasLeader).length,
      takeoverMsP50: percentile(takeovers, 50),
      takeoverMsMax: takeovers.length ? Math.max(...takeovers) : NaN,
    },
  };
}

/** The cluster's failures: a host never killed, a lead that never moved. */
export function clusterFailures(c: ClusterReport, plannedKills: number): string[] {
  const out: string[] = [];
  if (plannedKills >= c.hosts.length)
    for (const h of c.hosts) if (h.kills === 0) out.push(`${h.name} was never killed`);
  if (c.leader.changes < 1)
    out.push(`the lead never moved (leaders seen: ${c.leader.seen.map((s) => s.host).join(" → ") || "none"})`);
  if (c.leader.killsOfLeader < 1) out.push("the leader was never killed");
  return out;
}
