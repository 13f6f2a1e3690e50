import { Adapters } from "./adapters/service";
import { getWorkloadById } from "./workloads/service";
import type { Config } from "./config";
import type { Store } from "./db";
import { openConfiguredStore } from "./store/open";
import { listenForChanges } from "./db/notify";
import { adminToken, dataPaths, ensureDataDir, lockDataDir } from "./datadir";
import { createApp, type AppDeps } from "./app";
import { UsageRecorder } from "./usage/recorder";
import { keyUsageWrite } from "./keys/service";
import { log } from "./log";
import { VERSION } from "./version";
import { Fleet, localTarget, type TargetFactory } from "./workers/fleet";
import { getWorker, setOfflineAfter } from "./workers/service";
import { RemoteAgents } from "./agents/remote";
import { AgentHub } from "./agents/hub";
import { beginCall } from "./call";
import { loadHostCert, type HostCert } from "./tls/hostcert";
import { MetricsStore } from "./usage/series";
import { SeriesKeeper } from "./usage/series-store";
import { Metering } from "./usage/meter";
import { Limiter } from "./limits/limiter";
import { SharedLimits } from "./limits/shared";
import { storeQuotas } from "./limits/quotas";
import { startLocalAgent } from "./workers/local";
import { JobRunner } from "./jobs/runner";
import { pruneJobs, requeueJobsOfGoneHosts } from "./jobs/service";
import { pruneDeletedWebhooks } from "./webhooks/service";
import { pruneAudit } from "./audit/service";
import { DeliveryLoop, parseSchedule } from "./webhooks/deliver";
import { Settings } from "./settings/service";
import { commandHint } from "./invocation";
import { makeResolver } from "./webhooks/address";
import { caBundle } from "./webhooks/post";
import type { Agent } from "../agent/agent";
import { policyOf } from "./workloads/launch-policy";
import { tenantGuard } from "./models/tenant-access";
import { ByteBudget } from "./http";
import { restrictUmask, tightenDataDir } from "./perms";
import { JobQuota } from "./jobs/quota";
import { ModelManager } from "./models/manager";
import { ModelCollector } from "./models/gc";
import { Scaler } from "./scaling/scaler";
import { startCheckpointer, type Checkpointer } from "./db/checkpoint";
import { assertFreeDisk } from "./store/check";
import { AutoBackups, type AutoBackupOptions } from "./store/auto";
import { findPgTool, missingTool, pgAutoBackup } from "./store/pg-backup";
import { joinUrlOf, listenInfo, urlHost } from "./admin/listen";
import { Cluster } from "./cluster/cluster";
import { clusterCert } from "./tls/cluster-cert";
import { hostIdOf } from "./cluster/hosts";
import { deliveriesWaker, jobsWaker, wireCluster } from "./cluster/wiring";
import { localClusterLinks } from "./agents/local-links";
import { pruneRequests, RequestLog } from "./inspector/log";
import { loadTraceExporter } from "./tracing/tracing";
import { Tracing } from "./tracing/timeline";
import type { TraceExporter } from "./tracing/timeline";
import { plural } from "./words";
import { Providers } from "./providers/service";
import { CloudWorkers } from "./cloud/service";
import { kubernetes, runpod } from "./cloud/providers";
import { SecretBox } from "./providers/secrets";

/** A running server: its URL, the admin token in force, and a clean stop. */
export interface Running {
  url: string;
  port: number;
  adminToken: string;
  store: Store;
  fleet: Fleet;
  tlsPort: number;
  /** The request inspector's sink (finished requests to `request_log`). */
  requests: RequestLog;
  stop(): Promise<void>;
}

/** Background services of the host, started after the listeners and stopped before them. */
interface Services {
  deps: AppDeps;
  jobs: JobRunner;
  deliveries: DeliveryLoop;
  agents: RemoteAgents;
  collector: ModelCollector;
  cluster: Cluster;
  requests: RequestLog;
  /** Per-minute limits counted across the hosts (with a shared store only). */
  shared?: SharedLimits;
  ports: { http: number; tls: number };
}

/** After a workload change: places workloads again, and starts the grace period of models no workload uses now. */
async function afterWorkloadChange(fleet: Fleet, collector: ModelCollector): Promise<void> {
  await fleet.reconcile();
  await collector.mark().catch((e) => log.warn("could not note which models are unused", e));
}

/**
 * Builds every service and the app's dependencies over an open store. `config` is the settings'
 * live view: the runtime settings (private webhooks, retry schedule, default key limits, HF token)
 * are read where they are used, so a change on the Settings page applies without a restart.
 */
function buildServices(
  config: Config,
  store: Store,
  token: string,
  hostCert: HostCert,
  settings: Settings,
  traces?: TraceExporter,
): Services {
  const cluster = new Cluster(store.db, hostIdOf(config.dataDir), VERSION, store.pg, (alive) =>
    requeueJobsOfGoneHosts(store.db, alive),
  );
  // Finished requests go to the inspector's log and, with an exporter, out as traces.
  const requests = new RequestLog(store.db);
  const tracing = new Tracing(requests, cluster.hostId, traces);
  const usage = new UsageRecorder(store.db, (keyId, used) => keyUsageWrite(store.db, keyId, used));
  const since = Date.now();
  const metrics = new MetricsStore(since);
  // With a shared store the per-minute limits are counted across the hosts (src/limits/shared.ts).
  const shared = store.pg ? new SharedLimits(store.db, () => Math.max(1, cluster.alive.length)) : undefined;
  const limiter = new Limiter(
    storeQuotas(store.db, () => usage.flush()),
    Date.now,
    shared,
  );
  settings.follow("defaultKeyLimits", (items) => limiter.useDefaults(items));
  const metering = new Metering({ usage, series: metrics, limits: limiter, timelines: tracing });
  setOfflineAfter(config.workerTimeoutMs);
  const ports = { http: 0, tls: 0 };
  const listen = () =>
    listenInfo({ host: config.host, port: ports.http, tlsPort: ports.tls, advertiseHost: config.advertiseHost });
  // Remote workers' replicas are reached through the agents' hub, local ones on loopback.
  const hub = new AgentHub();
  const targets: TargetFactory = (worker, report, concurrency, workloadId) =>
    worker.kind === "remote"
      ? hub.target(worker.id, report, concurrency, workloadId)
      : localTarget(worker, report, concurrency, workloadId);
  const policy = policyOf(config);
  const providers = new Providers(
    store.db,
    new SecretBox({ setting: config.secretsKey, dataDir: config.dataDir, engine: store.db.engine }),
    () => config.allowPrivateProviders,
  );
  const fleet = new Fleet(store.db, {
    providers: () => providers.targets(),
    limits: { waitMs: config.queueWaitMs, maxWaiting: config.queueMax },
    makeTarget: targets,
    policy,
    places: () => cluster.leading,
    hostId: cluster.hostId,
    groupRestart: {
      baseMs: config.restartBackoffMs,
      maxMs: 60_000,
      maxCrashes: config.maxCrashes,
      windowMs: 10 * 60_000,
    },
  });
  const series = new SeriesKeeper(store.db, cluster.hostId, [metrics, fleet.telemetry], since);
  const scaler = new Scaler(store.db, fleet);
  fleet.scaling = scaler;
  const models = new ModelManager(store.db, {
    dataDir: config.dataDir,
    env: {
      ...process.env,
      get HF_TOKEN() {
        return config.hfToken;
      },
    },
    concurrency: config.modelDownloadConcurrency,
    gcAfterHours: config.modelGcAfterHours,
    tenantGuard: tenantGuard(policy),
    onReady: () => void fleet.reconcile(),
  });
  const collector = new ModelCollector(store.db, models, config.modelGcAfterHours * 3_600_000);
  const agents = new RemoteAgents(store.db, fleet, config.workerTimeoutMs, hub);
  const cloud = new CloudWorkers(store.db, {
    providers: () => ({
      ...(config.runpodApiKey
        ? {
            runpod: runpod({
              apiUrl: config.runpodApiUrl,
              apiKey: config.runpodApiKey,
              timeoutMs: config.cloudConfirmMs,
            }),
          }
        : {}),
      ...(config.kubeApiUrl && config.kubeToken
        ? {
            kubernetes: kubernetes({
              apiUrl: config.kubeApiUrl,
              token: config.kubeToken,
              namespace: config.kubeNamespace,
              gpuHourlyCost: config.kubeGpuHourlyCost ? Number(config.kubeGpuHourlyCost) : undefined,
              timeoutMs: config.cloudConfirmMs,
            }),
          }
        : {}),
    }),
    image: () => config.cloudImage,
    joinUrl: () => config.cloudJoinUrl ?? joinUrlOf(listen()),
    fingerprint: () => hostCert.fingerprint,
    confirmMs: () => config.cloudConfirmMs,
    retryMs: () => config.cloudRetryMs,
    onRemoved: async (id) => {
      agents.forget(id);
      await fleet.reconcile();
    },
  });
  const webhooks = {
    policy: {
      get allowPrivate() {
        return config.allowPrivateWebhooks;
      },
      resolve: makeResolver(config.webhookDnsServers),
    },
    ca: caBundle(config.webhookCaFile),
  };
  const deliveries = new DeliveryLoop(store.db, {
    schedule: () => parseSchedule(config.webhookRetrySchedule),
    concurrency: config.webhookConcurrency,
    ...webhooks,
  });
  const jobs = new JobRunner(
    store.db,
    fleet,
    metering,
    deliveriesWaker(store.db, store.pg, deliveries),
    3,
    cluster.hostId,
    tracing,
  );
  const deps: AppDeps = {
    inspector: requests,
    db: store.db,
    config,
    adminToken: token,
    metricsToken: config.metricsToken,
    usage,
    events: { workloadsChanged: () => afterWorkloadChange(fleet, collector) },
    version: VERSION,
    startedAt: new Date().toISOString(),
    policy,
    providers,
    cloud,
    bodyBudget: new ByteBudget(Math.max(config.maxBufferedBytes, config.maxDataBodyBytes)),
    jobQuota: new JobQuota(store.db, config.maxJobBytesPerProject),
    models,
    adapters: new Adapters(store.db, models, () => afterWorkloadChange(fleet, collector)),
    scaler,
    fleet,
    metrics,
    series,
    metering,
    limiter,
    jobs: jobsWaker(store.db, store.pg, jobs),
    webhooks,
    agents,
    cluster,
    hostCert,
    listen,
    joinUrl: () => joinUrlOf(listen()),
    describeWorkload: (w) => fleet.describe(w),
    settings,
    tracing,
  };
  return { deps, jobs, deliveries, agents, collector, cluster, shared, ports, requests };
}

/** Removes what has outlived its retention (the leader's duty): finished jobs and the inspector's requests, deleted webhooks, old audit entries, unused tenant models. */
async function prune(config: Config, s: Services): Promise<void> {
  if (!s.cluster.leading) return;
  const { db } = s.deps;
  await pruneJobs(db, config.jobRetentionHours * 3_600_000);
  await pruneRequests(db, config.jobRetentionHours * 3_600_000);
  await pruneDeletedWebhooks(db);
  await pruneAudit(db, config.auditRetentionDays);
  await s.collector.sweep().catch((e) => log.warn("could not remove unused models", e));
}

/**
 * Automatic backups: of the SQLite file alone; with a shared PostgreSQL store, `pg_dump` archives
 * taken by the leading host into its data dir (off, with a warning, when pg_dump is not installed).
 */
function autoBackupOptions(config: Config, store: Store, leading: () => boolean): AutoBackupOptions {
  const intervalMs = config.backupIntervalHours * 3_600_000;
  const base = { dataDir: config.dataDir, keep: config.backupKeep };
  if (!store.pg || !config.databaseUrl) return { ...base, intervalMs };
  if (intervalMs > 0 && !findPgTool("pg_dump")) log.warn(`automatic backups are off: ${missingTool("pg_dump")}`);
  return {
    ...base,
    intervalMs: findPgTool("pg_dump") ? intervalMs : 0,
    kind: "pgdump",
    when: leading,
    run: pgAutoBackup(config.databaseUrl, config.dataDir, config.backupKeep),
  };
}

/** How often a cluster host reads the token quota counts again (what the other hosts charged). */
const QUOTA_REFRESH_MS = 2000;

/** Periodic chores: usage and the inspector's requests to disk, queue depth samples, placement, pruning. Returns a stop. */
function startChores(config: Config, s: Services): () => void {
  const { deps } = s;
  const timers = [
    setInterval(() => {
      deps.usage.flush().catch((e) => log.warn("could not write usage counters", e));
    }, 1000),
    setInterval(() => {
      for (const [id, depth] of deps.fleet.dispatcher.depths()) deps.metrics.sampleQueue(id, depth);
      for (const [id, counts] of deps.fleet.dispatcher.prefix.counts) deps.metrics.samplePrefix(id, counts);
      for (const [id, counts] of deps.fleet.dispatcher.lora) deps.metrics.sampleLora(id, counts);
      deps.series.flush().catch((e) => log.warn("could not write the charts' series", e));
      void s.requests.flush();
    }, 1000),
    setInterval(() => {
      void deps.fleet.reconcile();
      s.jobs.wake();
    }, 10_000),
    setInterval(() => {
      void prune(config, s).catch((e) => log.warn("pruning failed", e));
    }, 3_600_000),
  ];
  // In a cluster the other hosts charge tokens too: quota counts are read again every few seconds.
  if (s.shared)
    timers.push(
      setInterval(
        () => void deps.limiter.refreshCounts().catch((e) => log.warn("could not read token quota counts", e)),
        QUOTA_REFRESH_MS,
      ),
    );
  s.shared?.start();
  return () => timers.forEach(clearInterval);
}

/** The host's ground: the data dir, its lock and the open store, with what watches the store. */
interface Ground {
  config: Config;
  lock: ReturnType<typeof lockDataDir>;
  store: Store;
  checkpointer?: Checkpointer;
  unlisten?: () => Promise<void>;
}

/** Makes the data dir ready (permissions, free space), takes its lock and opens the store (WAL checkpoints off the request thread; a shared store's change feed heard). */
async function openGround(config: Config): Promise<Ground> {
  restrictUmask();
  ensureDataDir(config.dataDir);
  for (const line of tightenDataDir(config.dataDir))
    log.warn(`file permissions: ${line} (the data dir holds secrets and job payloads)`);
  assertFreeDisk(config.dataDir, config.minFreeDiskMb);
  const lock = lockDataDir(config.dataDir);
  const ground: Partial<Ground> & { config: Config; lock: typeof lock } = { config, lock };
  try {
    const store = (ground.store = await openConfiguredStore(config));
    if (store.sqlite) ground.checkpointer = startCheckpointer(store.sqlite, dataPaths(config.dataDir).db);
    if (store.pg) ground.unlisten = await listenForChanges(store.db, store.pg);
    return ground as Ground;
  } catch (e) {
    await closeGround(ground);
    throw e;
  }
}

/** Closes what `openGround` opened, in reverse. */
async function closeGround(g: Partial<Ground> & { lock: { release(): void } }): Promise<void> {
  g.checkpointer?.stop();
  await g.unlisten?.().catch(() => {});
  await g.store?.close().catch(() => {});
  g.lock.release();
}

/** The HTTP and HTTPS listeners over one app, and the URL the server prints. */
interface Listeners {
  url: string;
  port: number;
  tlsPort: number;
  stop(): Promise<void>;
}

/** Starts the HTTP listener and the HTTPS one (agents, and sign-in cookies marked secure), both on one app. */
function listen(config: Config, services: Services): Listeners {
  const { deps } = services;
  const bodyLimit = Math.max(config.maxBodyBytes, config.maxDataBodyBytes) + 1024 * 1024;
  const app = createApp(deps).listen({
    hostname: config.host,
    port: config.port,
    idleTimeout: 255,
    maxRequestBodySize: bodyLimit,
  });
  const tls = Bun.serve({
    hostname: config.host,
    port: config.tlsPort ?? (config.port === 0 ? 0 : config.port + 1),
    tls: { cert: deps.hostCert.certPem, key: deps.hostCert.keyPem },
    idleTimeout: 255,
    maxRequestBodySize: bodyLimit,
    fetch: (request) => {
      beginCall(request, true);
      return app.handle(request);
    },
  });
  services.ports.tls = tls.port!;
  services.ports.http = app.server!.port!;
  const shownHost = config.host === "0.0.0.0" || config.host === "::" ? "127.0.0.1" : config.host;
  return {
    url: `http://${urlHost(shownHost)}:${app.server!.port}`,
    port: app.server!.port!,
    tlsPort: tls.port!,
    stop: async () => {
      await app.stop(true);
      tls.stop(true);
    },
  };
}

/** The loops started after the listeners, and this machine's agent; `stop` ends them in order. */
interface Background {
  stop(): Promise<void>;
}

/** Joins the cluster, starts the chores, loops and backups, resumes downloads, and starts this machine's agent when it has one. */
async function startBackground(
  ground: Ground,
  services: Services,
  settings: Settings,
  url: string,
  out: (line: string) => void,
): Promise<Background> {
  const { config, store } = ground;
  const { deps } = services;
  const unwire = await wireCluster(store.db, store.pg, services.cluster, {
    fleet: deps.fleet,
    agents: services.agents,
    scaler: deps.scaler,
    deliveries: services.deliveries,
    jobs: services.jobs,
  });
  await services.cluster.start({
    url: deps.listen().url ?? url,
    agentUrl: deps.joinUrl(),
    fingerprint: deps.hostCert.fingerprint,
  });
  await deps.fleet.reconcile();
  const stopChores = startChores(settings.live, services);
  deps.metering.loop.start();
  const unwatchSettings = await settings.watch();
  const backups = new AutoBackups(autoBackupOptions(config, store, () => services.cluster.leading));
  backups.start();
  await services.jobs.start();
  await services.agents.start();
  deps.cloud.start();
  await services.collector.mark();
  const resumed = await deps.models.resume();
  await deps.adapters.resume((id) => getWorkloadById(deps.db, id));
  if (resumed) out(`resuming ${plural(resumed, "model download")}`);
  // With a shared store, this machine's agent also takes work from the other hosts.
  const links = store.pg ? localClusterLinks(store.db, services.cluster, VERSION) : undefined;
  const agent = config.localAgent ? await startAgent(config, services, links) : undefined;
  return {
    stop: async () => {
      stopChores();
      deps.metering.loop.stop();
      await unwatchSettings();
      await services.shared?.stop();
      await deps.scaler.stop();
      backups.stop();
      services.agents.stop();
      await deps.cloud.stop();
      await unwire();
      await services.jobs.stop();
      await deps.models.stop();
      await services.deliveries.stop();
      await links?.stop();
      await agent?.stop();
      await services.cluster.stop();
    },
  };
}

/** Starts this machine's agent (linked to the other hosts' work in a cluster). */
async function startAgent(
  config: Config,
  services: Services,
  links: ReturnType<typeof localClusterLinks> | undefined,
): Promise<Agent> {
  const { deps } = services;
  const agent = await startLocalAgent({
    link: links?.wrap,
    db: deps.db,
    fleet: deps.fleet,
    dataDir: config.dataDir,
    version: VERSION,
    hostId: services.cluster.hostId,
    telemetryMs: config.telemetryMs,
    runtimeEnv: config.runtimeEnv,
    clusterAddress: config.clusterAddress,
    pullModel: deps.models.puller(),
    supervisor: {
      startTimeoutMs: config.startTimeoutMs,
      stallTimeoutMs: config.stallTimeoutMs,
      restart: { baseMs: config.restartBackoffMs, maxMs: 60_000, maxCrashes: config.maxCrashes, windowMs: 10 * 60_000 },
    },
  });
  await links?.start(agent.workerId!);
  return agent;
}

/** Writes what is still in memory to the store (at the very end, after the listeners stopped). */
async function flushAll(services: Services): Promise<void> {
  const { deps } = services;
  await services.requests.flush();
  services.requests.close();
  await deps.usage.flush().catch((e) => log.warn("could not write usage counters", e));
  await deps.series.flush(Date.now(), true).catch((e) => log.warn("could not write the charts' series", e));
  await deps.tracing.stop();
}

/** The lines a starting server prints: where it listens, the dashboard, where agents join, and the admin token when it was just made. */
function announce(
  out: (line: string) => void,
  config: Config,
  url: string,
  deps: AppDeps,
  token: { token: string; created: boolean },
): void {
  out(`inferd ${VERSION} listening on ${url} (data dir ${config.dataDir})`);
  out(`dashboard: ${url}/`);
  out(`agents join at ${deps.joinUrl()} (certificate sha256 ${deps.hostCert.fingerprint})`);
  const listen = deps.listen();
  if (listen.loopback_only && !listen.url)
    out(
      `only this machine can connect (listening on ${listen.host}); to serve your network, restart with ${commandHint(`serve ${listen.restart!.flag}`)} (or ${listen.restart!.env})`,
    );
  if (token.created) out(`admin token (saved in ${dataPaths(config.dataDir).adminToken}, shown once): ${token.token}`);
}

/**
 * Starts `inferd serve` in a fixed order: data dir (enough free space) → lock → store (pragmas,
 * embedded migrations) → admin token, certificate, settings → services → HTTP and HTTPS listeners →
 * background loops → local agent; `stop` ends them in the reverse order. Nothing runs on import;
 * `main.ts` calls this.
 */
export async function startServer(
  config: Config,
  out: (line: string) => void = (l) => console.log(l),
): Promise<Running> {
  const ground = await openGround(config);
  try {
    const { store } = ground;
    const token = adminToken(config.dataDir, config.adminToken);
    const ownCert = loadHostCert(
      config.dataDir,
      config.tlsCert,
      config.tlsKey,
      config.advertiseHost ? [config.advertiseHost] : [],
    );
    // A cluster's hosts serve one certificate (unless the operator gives each its own with --tls-cert).
    const hostCert = store.pg && !config.tlsCert ? await clusterCert(store.db, ownCert) : ownCert;
    const settings = new Settings(store.db, config, store.pg);
    await settings.load();
    // OpenTelemetry's SDK loads only when an OTLP endpoint is set (src/tracing/tracing.ts).
    const services = buildServices(
      settings.live,
      store,
      token.token,
      hostCert,
      settings,
      await loadTraceExporter(process.env, VERSION),
    );
    await services.deps.series.start();
    const listeners = listen(config, services);
    ground.lock.update(listeners.url, { host: config.host, http: listeners.port, tls: listeners.tlsPort });
    const background = await startBackground(ground, services, settings, listeners.url, out);
    announce(out, config, listeners.url, services.deps, token);
    let stopping: Promise<void> | undefined;
    return {
      url: listeners.url,
      port: listeners.port,
      adminToken: token.token,
      store,
      fleet: services.deps.fleet,
      tlsPort: listeners.tlsPort,
      requests: services.requests,
      stop: () =>
        (stopping ??= (async () => {
          await background.stop();
          await listeners.stop();
          await flushAll(services);
          await closeGround(ground);
        })()),
    };
  } catch (e) {
    await closeGround(ground);
    throw e;
  }
}
