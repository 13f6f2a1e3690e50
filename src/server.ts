import type { Config } from "./config";
import { openStore, type Store } from "./db";
import { adminToken, dataPaths, ensureDataDir, lockDataDir } from "./datadir";
import { createApp, type AppDeps, type AppEvents } from "./app";
import { UsageRecorder } from "./keys/service";
import { log } from "./log";
import { VERSION } from "./version";
import { Fleet, localTarget, type TargetFactory } from "./workers/fleet";
import { getWorker, setOfflineAfter } from "./workers/service";
import { RemoteAgents } from "./agents/remote";
import { viaTls } from "./agents/routes";
import { loadHostCert } from "./tls/hostcert";
import { hostname } from "node:os";
import { MetricsStore } from "./metrics";
import { startLocalAgent } from "./workers/local";
import { JobRunner } from "./jobs/runner";
import { pruneJobs } from "./jobs/service";
import { DeliveryLoop, parseSchedule } from "./webhooks/deliver";
import { makeResolver } from "./webhooks/address";
import { caBundle } from "./webhooks/post";
import type { Agent } from "../agent/agent";

/** A running server: its URL, the admin token in force, and a clean stop. */
export interface Running {
  url: string;
  port: number;
  adminToken: string;
  store: Store;
  fleet: Fleet;
  tlsPort: number;
  stop(): Promise<void>;
}

/** The host name agents use to reach this server. */
function advertised(config: Config): string {
  if (config.advertiseHost) return config.advertiseHost;
  if (config.host === "0.0.0.0" || config.host === "::") return hostname();
  return config.host.includes(":") ? `[${config.host}]` : config.host;
}

/** How often usage counters are written to SQLite. */
const USAGE_FLUSH_MS = 1000;

/**
 * Starts `inferd serve` in a fixed order: data dir → lock → SQLite (pragmas, embedded migrations)
 * → admin token → app → listen. Nothing runs on import; `main.ts` calls this.
 */
export async function startServer(config: Config, out: (line: string) => void = (l) => console.log(l)): Promise<Running> {
  ensureDataDir(config.dataDir);
  const lock = lockDataDir(config.dataDir);
  let store: Store | undefined;
  try {
    store = openStore(dataPaths(config.dataDir).db);
    const token = adminToken(config.dataDir, config.adminToken);
    const usage = new UsageRecorder(store.db);
    const metrics = new MetricsStore();
    setOfflineAfter(config.workerTimeoutMs);
    const hostCert = loadHostCert(config.dataDir, config.tlsCert, config.tlsKey, config.advertiseHost ? [config.advertiseHost] : []);
    let agents: RemoteAgents | undefined;
    const targets: TargetFactory = (workerId, report, concurrency, workloadId) =>
      getWorker(store!.db, workerId).kind === "remote" ? agents!.hub.target(workerId, report, concurrency, workloadId) : localTarget(workerId, report, concurrency, workloadId);
    const fleet = new Fleet(store.db, { waitMs: config.queueWaitMs, maxWaiting: config.queueMax }, targets);
    agents = new RemoteAgents(store.db, fleet, config.workerTimeoutMs);
    let tlsPort = 0;
    const webhooks = {
      policy: { allowPrivate: config.allowPrivateWebhooks, resolve: makeResolver(config.webhookDnsServers) },
      ca: caBundle([config.webhookCaFile, process.env.NODE_EXTRA_CA_CERTS]),
    };
    const deliveries = new DeliveryLoop(store.db, { schedule: parseSchedule(config.webhookRetrySchedule), concurrency: config.webhookConcurrency, ...webhooks });
    const jobs = new JobRunner(store.db, fleet, usage, metrics, () => deliveries.wake());
    const events: AppEvents = { workloadsChanged: () => fleet.reconcile() };
    const deps: AppDeps = {
      db: store.db,
      config,
      adminToken: token.token,
      metricsToken: config.metricsToken,
      usage,
      events,
      version: VERSION,
      startedAt: new Date().toISOString(),
      fleet,
      metrics,
      jobs,
      webhooks,
      agents,
      hostCert,
      joinUrl: () => `https://${advertised(config)}:${tlsPort}`,
      describeWorkload: (w) => fleet.describe(w),
    };
    const app = createApp(deps).listen({
      hostname: config.host,
      port: config.port,
      idleTimeout: 255,
      maxRequestBodySize: Math.max(config.maxBodyBytes, config.maxDataBodyBytes) + 1024 * 1024,
    });
    const server = app.server!;
    const tls = Bun.serve({
      hostname: config.host,
      port: config.tlsPort ?? (config.port === 0 ? 0 : config.port + 1),
      tls: { cert: hostCert.certPem, key: hostCert.keyPem },
      idleTimeout: 255,
      maxRequestBodySize: Math.max(config.maxBodyBytes, config.maxDataBodyBytes) + 1024 * 1024,
      fetch: (request) => {
        viaTls.add(request);
        return app.handle(request);
      },
    });
    tlsPort = tls.port!;
    const shownHost = config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host;
    const url = `http://${shownHost.includes(":") ? `[${shownHost}]` : shownHost}:${server.port}`;
    lock.update(url);
    const flusher = setInterval(() => {
      try {
        usage.flush();
      } catch (e) {
        log.warn("could not write usage counters", e);
      }
    }, USAGE_FLUSH_MS);
    fleet.reconcile();
    const sampler = setInterval(() => {
      for (const [id, depth] of fleet.dispatcher.depths()) metrics.sampleQueue(id, depth);
    }, 1000);
    const placer = setInterval(() => {
      fleet.reconcile();
      jobs.wake();
    }, 10_000);
    const pruner = setInterval(() => pruneJobs(store!.db, config.jobRetentionHours * 3_600_000), 3_600_000);
    jobs.start();
    deliveries.start();
    agents.start();
    let agent: Agent | undefined;
    if (config.localAgent) {
      agent = await startLocalAgent({
        db: store.db,
        fleet,
        dataDir: config.dataDir,
        version: VERSION,
        telemetryMs: config.telemetryMs,
        supervisor: {
          startTimeoutMs: config.startTimeoutMs,
          stallTimeoutMs: config.stallTimeoutMs,
          restart: { baseMs: config.restartBackoffMs, maxMs: 60_000, maxCrashes: config.maxCrashes, windowMs: 10 * 60_000 },
        },
      });
    }
    out(`inferd ${VERSION} listening on ${url} (data dir ${config.dataDir})`);
    out(`dashboard: ${url}/`);
    out(`agents join at https://${advertised(config)}:${tlsPort} (certificate sha256 ${hostCert.fingerprint})`);
    if (token.created) out(`admin token (saved in ${dataPaths(config.dataDir).adminToken}, shown once): ${token.token}`);
    const openedStore = store;
    let stopping: Promise<void> | undefined;
    return {
      url,
      port: server.port!,
      adminToken: token.token,
      store: openedStore,
      fleet,
      tlsPort,
      stop: () =>
        (stopping ??= (async () => {
          clearInterval(flusher);
          clearInterval(placer);
          clearInterval(sampler);
          clearInterval(pruner);
          agents!.stop();
          await jobs.stop();
          await deliveries.stop();
          await agent?.stop();
          await app.stop(true);
          tls.stop(true);
          usage.flush();
          openedStore.close();
          lock.release();
        })()),
    };
  } catch (e) {
    store?.close();
    lock.release();
    throw e;
  }
}
