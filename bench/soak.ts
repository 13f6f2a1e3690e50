#!/usr/bin/env bun
/**
 * Soak test and fault script, loopback only, bounded in time and count. One `inferd serve` host
 * (local agent, fake vLLM runtimes) and one remote agent serve two workloads; three HTTPS receivers
 * take their jobs' results (`steady` answers 200, `failing` 500, `flapping` 200 but is taken down and
 * up). Clients send synchronous chat, streaming chat and async jobs (each with a unique `context` id)
 * for the whole run while faults happen on a schedule: `kill -9` of inferd (restarted on the same
 * data dir and port), of a runtime's process group, of the remote agent (run again), and the receiver
 * flap. Then traffic and faults stop, the system drains (bounded), and the report is printed: requests
 * by kind and status, 5xx and cut streams by cause, jobs and deliveries by id, inferd's RSS and fds.
 *
 *   bun bench/soak.ts [--short] [--json] [--hosts N] [--database-url postgres://…]
 *
 * Full mode kills inferd 22 times, every 9 s (about 5 minutes in all); `--short` 5 times (under 2
 * minutes in all). `--json` prints the report as one JSON line on stdout (everything else goes to
 * stderr). Exit code 0 when nothing accepted was lost and every 5xx is explained by a fault (see
 * FAULT_CODES in bench/soak/report.ts), 1 otherwise, 2 when stopped by the time limit or Ctrl-C.
 *
 * Cluster mode, `--hosts N` (2 to 4; default 1, the single host above): N hosts on one PostgreSQL
 * database (`--database-url`, an empty database the soak may fill; without it a throwaway PostgreSQL
 * is started in a temp dir with `testPostgres()` of test/helpers/postgres.ts, which needs Debian's
 * postgresql package, and removed at the end), each with its own data dir, ports, local agent and
 * fake GPUs, all with the same admin token; the remote agent joins the first host and learns the
 * others from it. `alpha` has a replica on every host's machine, `beta` on the first host's machine
 * and on the remote agent. The clients take the hosts in turn, request by request. The hosts are
 * killed in turn (`kill -9`, restarted on the same data dir and ports) and restarted at once (a
 * host's machine is an agent of the other hosts: what it had taken from them and not answered runs
 * again when its new process polls, well before the worker timeout); one
 * that led is restarted only once another host is seen leading, and every third kill keeps its host
 * down until the others list it as gone (past the 10 s host timeout), and until the jobs it was
 * running are back in the queue (read from the database). Runtime, agent and receiver faults come
 * between kills as above. Every job answered 202 by either host is read back by id through another
 * host; the leader is read from `GET /admin/info` every 500 ms; a request without an answer is
 * explained only by a kill of the host it was sent to, and a 5xx only by a fault (`during` tells a
 * kill of its own host from one of another host). Full mode kills the hosts 20 times in all, every
 * 12 s or more (about 5 minutes in all); `--short` 4 times, twice each with two hosts (under 2 minutes).
 * The report adds `cluster`: each host's kills, processes and answers, the leaders seen and how soon
 * another host led. It fails unless every host was killed and the lead moved at least once. With
 * `--hosts 1`, `--database-url` runs the single-host soak on that database.
 */
import { SQL } from "bun";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeTestPki } from "../test/fixtures/tls";
import { stopTestPostgres, testPostgres } from "../test/helpers/postgres";
import { machineLoad, runBenchmark } from "./lib";
import {
  clusterControl,
  clusterFailures,
  clusterReport,
  clusterWhole,
  startClusterHosts,
  watchLeader,
} from "./soak/cluster";
import { runFaults, type FaultPlan } from "./soak/faults";
import { joinSoakAgent, soakEnv, startSoakHost, type SoakHost } from "./soak/host";
import { formatReport } from "./soak/print";
import { startSoakReceivers } from "./soak/receivers";
import { classify, failuresOf, faultSummary, inferdUsage, type SoakReport } from "./soak/report";
import { PROJECT, setupSoak, type HostWorker } from "./soak/setup";
import { startTraffic, type Outcome, type TrafficPlan } from "./soak/traffic";
import { drainJobs, tallyJobs } from "./soak/verify";

const USAGE = "usage: bun bench/soak.ts [--short] [--json] [--hosts N] [--database-url postgres://…]";
const usageError = (why: string): never => {
  console.error(`${why}\n${USAGE}`);
  process.exit(2);
};
let SHORT = false;
let JSON_OUT = false;
let HOSTS = 1;
let DATABASE_URL: string | undefined;
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const [flag, inline] =
    argv[i].startsWith("--") && argv[i].includes("=")
      ? [argv[i].slice(0, argv[i].indexOf("=")), argv[i].slice(argv[i].indexOf("=") + 1)]
      : [argv[i], undefined];
  const value = () => inline ?? argv[++i] ?? usageError(`${flag} needs a value`);
  if (flag === "--short" && inline === undefined) SHORT = true;
  else if (flag === "--json" && inline === undefined) JSON_OUT = true;
  else if (flag === "--hosts") {
    const v = value();
    HOSTS = /^[1-4]$/.test(v) ? Number(v) : usageError(`--hosts takes 1 to 4, not "${v}"`);
  } else if (flag === "--database-url") {
    DATABASE_URL = value();
    if (!/^postgres(ql)?:\/\//.test(DATABASE_URL)) usageError("--database-url takes a postgres:// URL");
  } else usageError(`unknown argument "${argv[i]}"`);
}
const CLUSTER = HOSTS > 1;
/** Progress lines: stdout, or stderr when stdout is kept for the JSON report. */
const log = (line: string) => (JSON_OUT ? console.error(line) : console.log(line));

const WORKER_TIMEOUT_MS = 4000;
/** Delays before delivery attempts 2–6: a delivery to the failing receiver is terminal about 8 s after its first attempt. */
const RETRY_SCHEDULE = "1s,1s,2s,2s,2s";
const FAULTS: FaultPlan = CLUSTER
  ? {
      // A killed host comes back at once (once another host leads), every third one only past the
      // host timeout (10 s): a longer period than one host's, so the system is whole again between kills.
      kills: SHORT ? 4 : 20,
      periodMs: 12_000,
      firstKillMs: 8000,
      agentDownMs: WORKER_TIMEOUT_MS + 1000,
      receiverDownMs: 3000,
      recoverMs: 30_000,
      goneEvery: 3,
    }
  : {
      kills: SHORT ? 5 : 22,
      periodMs: 9000,
      firstKillMs: 8000,
      agentDownMs: WORKER_TIMEOUT_MS + 1000,
      receiverDownMs: 3000,
      recoverMs: 30_000,
    };
const TRAFFIC: TrafficPlan = { clients: { chat: 2, stream: 2, job: 2 }, thinkMs: { chat: 100, stream: 100, job: 300 } };
/** Longest wait for every accepted job and owed delivery to be over after the traffic stops. */
const DRAIN_MS = SHORT ? 30_000 : 60_000;
const HARD_LIMIT_MS = CLUSTER ? (SHORT ? 180_000 : 15 * 60_000) : SHORT ? 118_000 : 15 * 60_000;
/** Fake runtimes: 40 ms per answer, streams of 8 tokens 15 ms apart; fast loads so restarts are quick. */
const FAKE = { FAKE_LOAD_MS: "100", FAKE_DELAY_MS: "40", FAKE_FIRST_TOKEN_MS: "30", FAKE_TOKEN_MS: "15" };
/** Settings for the host and the agent: deliberate crashes must not mark a replica failed. */
const SHARED_SETTINGS = {
  INFERD_TELEMETRY_INTERVAL_MS: "1000",
  INFERD_RESTART_BACKOFF_MS: "200",
  INFERD_MAX_CRASHES: "1000",
  INFERD_LOG_LEVEL: "warn",
};
/** Each host's machine (fake `nvidia-smi`): two 24 GiB GPUs, a different model per host so GPU ids differ between machines. */
const HOST_GPUS = ["NVIDIA GeForce RTX 4090", "NVIDIA RTX A5000", "NVIDIA GeForce RTX 3090", "NVIDIA RTX A6000"].map(
  (name) => `2x ${name}:24564`,
);

let report: SoakReport | undefined;
const code = await runBenchmark(HARD_LIMIT_MS, async (cleanup) => {
  const t0 = Date.now();
  const what = CLUSTER
    ? `${FAULTS.kills} kills of ${HOSTS} hosts in turn, every ${FAULTS.periodMs / 1000} s or more`
    : `${FAULTS.kills} kills of inferd every ${FAULTS.periodMs / 1000} s`;
  log(`soak${SHORT ? " (short)" : ""}: ${what}; ${machineLoad()}`);
  const dir = mkdtempSync(join(tmpdir(), "inferd-soak-pki-"));
  cleanup.add("temp dir", () => rmSync(dir, { recursive: true, force: true }));
  const pki = makeTestPki(dir, ["localhost"]);
  const receivers = await startSoakReceivers(pki);
  for (const r of Object.values(receivers)) cleanup.add(`receiver ${r.name}`, () => r.close());
  let databaseUrl = DATABASE_URL;
  if (CLUSTER && !databaseUrl) {
    // A throwaway PostgreSQL (initdb in a temp dir, a free loopback port), as the cluster tests use.
    cleanup.add("postgres", () => stopTestPostgres());
    databaseUrl = await (await testPostgres()).createDatabase("soak");
    log(`started a throwaway PostgreSQL: ${databaseUrl}`);
  }
  const hostArgs = [
    "--allow-private-webhooks",
    "--webhook-ca-file",
    pki.caFile,
    "--webhook-retry-schedule",
    RETRY_SCHEDULE,
    "--worker-timeout-ms",
    String(WORKER_TIMEOUT_MS),
    "--queue-wait-ms",
    "20000",
  ];
  const store: Record<string, string> = databaseUrl ? { INFERD_DATABASE_URL: databaseUrl } : {};
  const adminToken = `ik_admin_soak-${crypto.randomUUID().replaceAll("-", "")}`;
  const hostEnv = (i: number) =>
    soakEnv({
      INFERD_LOCAL_AGENT: "1",
      FAKE_GPUS: HOST_GPUS[i],
      ...FAKE,
      ...SHARED_SETTINGS,
      ...store,
      ...(CLUSTER ? { INFERD_ADMIN_TOKEN: adminToken } : {}),
    });
  const hosts: SoakHost[] = [];
  let hostWorkers: HostWorker[];
  if (CLUSTER) {
    hostWorkers = await startClusterHosts(HOSTS, hostArgs, hostEnv, (h) => {
      hosts.push(h);
      cleanup.add(h.name, () => h.stop());
    });
  } else {
    const host = await startSoakHost(hostArgs, hostEnv(0));
    hosts.push(host);
    cleanup.add("inferd", () => host.stop());
    const workers: { id: string; kind: string }[] = await host.admin("/admin/workers");
    const local = workers.find((w) => w.kind === "local");
    if (!local) throw new Error(`no local worker: ${JSON.stringify(workers)}`);
    hostWorkers = [{ host, workerId: local.id }];
  }
  const first = hosts[0];
  const agent = await joinSoakAgent(
    first,
    "soak-remote",
    soakEnv({ FAKE_GPUS: "1x NVIDIA L4:23034", ...FAKE, ...SHARED_SETTINGS }),
  );
  cleanup.add("agent", () => agent.stop());
  const setup = await setupSoak(hostWorkers, agent, receivers);
  const where = hosts
    .map(
      (h) =>
        `${CLUSTER ? `${h.name} ` : "inferd "}${h.url} (pid ${h.pid}, agents at port ${h.tlsPort}${CLUSTER ? `, id ${h.hostId}` : ""})`,
    )
    .join("; ");
  log(
    `${where}; remote agent pid ${agent.pid}; receivers ${Object.values(receivers)
      .map((r) => `${r.name}:${r.port}`)
      .join(", ")}; ready after ${Date.now() - t0} ms`,
  );
  const whole = CLUSTER ? async () => (await clusterWhole(hosts)) && (await setup.whole()) : setup.whole;

  let phase: "idle" | "load" = "idle";
  const sampler = setInterval(() => hosts.forEach((h) => h.sample(phase)), 500);
  cleanup.add("sampler", () => clearInterval(sampler));
  for (let i = 0; i < 3; i++) {
    hosts.forEach((h) => h.sample("idle"));
    await Bun.sleep(300);
  }
  const leaders = CLUSTER ? watchLeader(hosts) : undefined;
  if (leaders) cleanup.add("leader watch", () => leaders.stop());
  // The soak's own look at the shared database: which jobs a killed host was running.
  const db = CLUSTER ? new SQL({ url: databaseUrl!, max: 1 }) : undefined;
  if (db) cleanup.add("database connection", () => db.close());
  phase = "load";
  const tTraffic = Date.now();
  const urls = hosts.map((h) => h.url);
  const traffic = startTraffic(
    {
      urls,
      project: PROJECT,
      workloads: setup.workloads.map((w) => w.slug),
      liveKey: setup.liveKey,
      runId: crypto.randomUUID().slice(0, 8),
    },
    TRAFFIC,
  );
  let faults;
  try {
    faults = await runFaults(FAULTS, {
      hosts,
      agent,
      flapping: receivers.flapping,
      runtimes: setup.runtimes,
      whole,
      cluster: db ? clusterControl(hosts, db) : undefined,
      log,
    });
    // The last process serves under load for as long as the first did before its kill.
    const lastUp = faults.filter((f) => f.kind === "inferd").at(-1)?.upAt ?? Date.now();
    await Bun.sleep(Math.max(0, lastUp + FAULTS.firstKillMs - Date.now()));
  } finally {
    await traffic.stop();
  }
  phase = "idle";
  const tDrain = Date.now();
  log(
    `traffic stopped after ${Math.round((tDrain - tTraffic) / 1000)} s (${traffic.outcomes.length} requests); draining (at most ${DRAIN_MS / 1000} s)`,
  );
  const accepted = traffic.outcomes
    .filter((o) => o.kind === "job" && o.status === 202 && o.jobId)
    .map((o) => ({ jobId: o.jobId!, workload: o.workload, ctx: o.ctx!, host: o.host }));
  const drain = await drainJobs(urls, setup.liveKey, accepted, DRAIN_MS);
  await Bun.sleep(1000); // late duplicates, and an idle sample of the drained process
  hosts.forEach((h) => h.sample("idle"));
  await leaders?.stop();
  const end = Date.now();
  const { jobs, deliveries } = tallyJobs(traffic.outcomes, drain.views, receivers, setup.receiverOfUrl);
  // Each request that counts against the run, with the faults near it, for finding out what happened.
  const unexplained: string[] = [];
  const rel = (t: number | undefined) => (t === undefined ? "never" : `${((t - tTraffic) / 1000).toFixed(1)} s`);
  const describe = (o: Outcome, during: string) => {
    const near = faults
      .filter((f) => f.kind !== "receiver" && f.at <= o.t1 && (f.recoveredAt ?? end) + 5000 >= o.t0)
      .map((f) => `${f.what} at ${rel(f.at)} (up ${rel(f.upAt)}, whole ${rel(f.recoveredAt)})`);
    const answer =
      o.status === undefined
        ? `no answer (${o.error})`
        : `${o.status} ${o.code ?? ""}${o.stream && o.stream !== "done" ? ` stream ${o.stream}` : ""}${o.error ? ` (${o.error})` : ""}`;
    return `${o.kind} ${o.workload} to ${hosts[o.host].name} sent at ${rel(o.t0)}, over at ${rel(o.t1)}: ${answer}; during: ${during || "no fault"}${near.length ? `; faults near: ${near.join("; ")}` : ""}`;
  };
  const cluster = leaders ? clusterReport(hosts, faults, leaders.seen, traffic.outcomes, tTraffic) : undefined;
  const partial = {
    mode: SHORT ? ("short" as const) : ("full" as const),
    seconds: { total: (end - t0) / 1000, traffic: (tDrain - tTraffic) / 1000, drain: drain.drainMs / 1000 },
    faults: faultSummary(faults, FAULTS.kills),
    ...classify(traffic.outcomes, faults, end, (o, during) => unexplained.push(describe(o, during))),
    jobs,
    deliveries,
    inferd: inferdUsage(first.lives),
    ...(cluster ? { cluster } : {}),
  };
  const failures = [...failuresOf(partial, drain.drained), ...(cluster ? clusterFailures(cluster, FAULTS.kills) : [])];
  report = { ...partial, failures, ok: failures.length === 0 };
  log(formatReport(report));
  if (unexplained.length)
    log(
      `\nRequests that count against the run (times from the start of traffic):\n${unexplained
        .slice(0, 20)
        .map((x) => `  - ${x}`)
        .join("\n")}`,
    );
  // The end of each host's output, without the warnings the failing receiver causes by design.
  const output = (h: SoakHost) =>
    h
      .output()
      .split("\n")
      .filter((l) => !l.includes("is terminal after"))
      .join("\n")
      .slice(-4000);
  if (!report.ok)
    for (const h of hosts) log(`\n--- end of ${CLUSTER ? `${h.name}'s` : "inferd's"} output ---\n${output(h)}`);
});
if (JSON_OUT && report) console.log(JSON.stringify(report));
process.exit(code !== 0 ? code : report?.ok ? 0 : 1);
