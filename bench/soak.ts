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
 *   bun bench/soak.ts [--short] [--json]
 *
 * Full mode kills inferd 22 times, every 9 s (about 5 minutes in all); `--short` 5 times (under 2
 * minutes in all). `--json` prints the report as one JSON line on stdout (everything else goes to
 * stderr). Exit code 0 when nothing accepted was lost and every 5xx is explained by a fault (see
 * FAULT_CODES in bench/soak/report.ts), 1 otherwise, 2 when stopped by the time limit or Ctrl-C.
 */
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { makeTestPki } from "../test/fixtures/tls";
import { machineLoad, runBenchmark } from "./lib";
import { runFaults, type FaultPlan } from "./soak/faults";
import { joinSoakAgent, soakEnv, startSoakHost } from "./soak/host";
import { formatReport } from "./soak/print";
import { startSoakReceivers } from "./soak/receivers";
import { classify, failuresOf, faultSummary, inferdUsage, type SoakReport } from "./soak/report";
import { PROJECT, setupSoak } from "./soak/setup";
import { startTraffic, type TrafficPlan } from "./soak/traffic";
import { drainJobs, tallyJobs } from "./soak/verify";

const USAGE = "usage: bun bench/soak.ts [--short] [--json]";
const argv = process.argv.slice(2);
for (const a of argv) {
  if (a !== "--short" && a !== "--json") {
    console.error(`unknown argument "${a}"\n${USAGE}`);
    process.exit(2);
  }
}
const SHORT = argv.includes("--short");
const JSON_OUT = argv.includes("--json");
/** Progress lines: stdout, or stderr when stdout is kept for the JSON report. */
const log = (line: string) => (JSON_OUT ? console.error(line) : console.log(line));

const WORKER_TIMEOUT_MS = 4000;
/** Delays before delivery attempts 2–6: a delivery to the failing receiver is terminal about 8 s after its first attempt. */
const RETRY_SCHEDULE = "1s,1s,2s,2s,2s";
const FAULTS: FaultPlan = {
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
const HARD_LIMIT_MS = SHORT ? 118_000 : 15 * 60_000;
/** Fake runtimes: 40 ms per answer, streams of 8 tokens 15 ms apart; fast loads so restarts are quick. */
const FAKE = { FAKE_LOAD_MS: "100", FAKE_DELAY_MS: "40", FAKE_FIRST_TOKEN_MS: "30", FAKE_TOKEN_MS: "15" };
/** Settings for the host and the agent: deliberate crashes must not mark a replica failed. */
const SHARED_SETTINGS = { INFERD_TELEMETRY_INTERVAL_MS: "1000", INFERD_RESTART_BACKOFF_MS: "200", INFERD_MAX_CRASHES: "1000", INFERD_LOG_LEVEL: "warn" };

let report: SoakReport | undefined;
const code = await runBenchmark(HARD_LIMIT_MS, async (cleanup) => {
  const t0 = Date.now();
  log(`soak${SHORT ? " (short)" : ""}: ${FAULTS.kills} kills of inferd every ${FAULTS.periodMs / 1000} s; ${machineLoad()}`);
  const dir = mkdtempSync(join(tmpdir(), "inferd-soak-pki-"));
  cleanup.add("temp dir", () => rmSync(dir, { recursive: true, force: true }));
  const pki = makeTestPki(dir, ["localhost"]);
  const receivers = await startSoakReceivers(pki);
  for (const r of Object.values(receivers)) cleanup.add(`receiver ${r.name}`, () => r.close());
  const hostArgs = ["--allow-private-webhooks", "--webhook-ca-file", pki.caFile, "--webhook-retry-schedule", RETRY_SCHEDULE, "--worker-timeout-ms", String(WORKER_TIMEOUT_MS), "--queue-wait-ms", "20000"];
  const host = await startSoakHost(hostArgs, soakEnv({ INFERD_LOCAL_AGENT: "1", FAKE_GPUS: "2x NVIDIA GeForce RTX 4090:24564", ...FAKE, ...SHARED_SETTINGS }));
  cleanup.add("inferd", () => host.stop());
  const agent = await joinSoakAgent(host, "soak-remote", soakEnv({ FAKE_GPUS: "1x NVIDIA L4:23034", ...FAKE, ...SHARED_SETTINGS }));
  cleanup.add("agent", () => agent.stop());
  const setup = await setupSoak(host, agent, receivers);
  log(`inferd ${host.url} (pid ${host.pid}, agents at port ${host.tlsPort}); remote agent pid ${agent.pid}; receivers ${Object.values(receivers).map((r) => `${r.name}:${r.port}`).join(", ")}; ready after ${Date.now() - t0} ms`);

  let phase: "idle" | "load" = "idle";
  const sampler = setInterval(() => host.sample(phase), 500);
  cleanup.add("sampler", () => clearInterval(sampler));
  for (let i = 0; i < 3; i++) {
    host.sample("idle");
    await Bun.sleep(300);
  }
  phase = "load";
  const tTraffic = Date.now();
  const traffic = startTraffic({ url: host.url, project: PROJECT, workloads: setup.workloads.map((w) => w.slug), liveKey: setup.liveKey, runId: crypto.randomUUID().slice(0, 8) }, TRAFFIC);
  let faults;
  try {
    faults = await runFaults(FAULTS, { host, agent, flapping: receivers.flapping, runtimes: setup.runtimes, whole: setup.whole, log });
    // The last process serves under load for as long as the first did before its kill.
    const lastUp = faults.filter((f) => f.kind === "inferd").at(-1)?.upAt ?? Date.now();
    await Bun.sleep(Math.max(0, lastUp + FAULTS.firstKillMs - Date.now()));
  } finally {
    await traffic.stop();
  }
  phase = "idle";
  const tDrain = Date.now();
  log(`traffic stopped after ${Math.round((tDrain - tTraffic) / 1000)} s (${traffic.outcomes.length} requests); draining (at most ${DRAIN_MS / 1000} s)`);
  const accepted = traffic.outcomes.filter((o) => o.kind === "job" && o.status === 202 && o.jobId).map((o) => ({ jobId: o.jobId!, workload: o.workload, ctx: o.ctx! }));
  const drain = await drainJobs(host.url, setup.liveKey, accepted, DRAIN_MS);
  await Bun.sleep(1000); // late duplicates, and an idle sample of the drained process
  host.sample("idle");
  const end = Date.now();
  const { jobs, deliveries } = tallyJobs(traffic.outcomes, drain.views, receivers, setup.receiverOfUrl);
  const partial = {
    mode: SHORT ? ("short" as const) : ("full" as const),
    seconds: { total: (end - t0) / 1000, traffic: (tDrain - tTraffic) / 1000, drain: drain.drainMs / 1000 },
    faults: faultSummary(faults, FAULTS.kills),
    ...classify(traffic.outcomes, faults, end),
    jobs,
    deliveries,
    inferd: inferdUsage(host.lives),
  };
  const failures = failuresOf(partial, drain.drained);
  report = { ...partial, failures, ok: failures.length === 0 };
  log(formatReport(report));
  if (!report.ok) log(`\n--- end of inferd's output ---\n${host.output().slice(-4000)}`);
});
if (JSON_OUT && report) console.log(JSON.stringify(report));
process.exit(code !== 0 ? code : report?.ok ? 0 : 1);
