/**
 * What the HTTP app's modules may use, declared in this leaf so each module takes a `Pick<AppDeps, …>`
 * of the parts it needs (the composition root, `server.ts`, builds the whole bag; `app.ts` only
 * composes routes).
 */
import type { Config } from "./config";
import type { Db } from "./db";
import type { UsageRecorder } from "./usage/recorder";
import type { Fleet, WorkloadDetail } from "./workers/fleet";
import type { MetricsStore } from "./usage/series";
import type { SeriesKeeper } from "./usage/series-store";
import type { Metering } from "./usage/meter";
import type { Limiter } from "./limits/limiter";
import type { RemoteAgents } from "./agents/remote";
import type { HostCert } from "./tls/hostcert";
import type { AddressPolicy } from "./webhooks/address";
import type { LaunchPolicy } from "../agent/launch-policy";
import type { Providers } from "./providers/service";
import type { CloudWorkers } from "./cloud/service";
import type { ByteBudget } from "./http";
import type { JobQuota } from "./jobs/quota";
import type { ModelManager } from "./models/manager";
import type { Adapters } from "./adapters/service";
import type { Scaler } from "./scaling/scaler";
import type { Workload } from "./workloads/service";
import type { ListenInfo } from "./admin/listen";
import type { Cluster } from "./cluster/cluster";
import type { Settings } from "./settings/service";
import type { RequestSink } from "./inspector/record";
import type { Tracing } from "./tracing/timeline";

/** Signals from the API to the parts that act on changes (the agents' reconcile loop). */
export interface AppEvents {
  /** Resolves once placement has run for the change. */
  workloadsChanged(): Promise<void>;
}

/** Everything the HTTP app needs, injected so tests build it exactly as `serve` does. */
export interface AppDeps {
  db: Db;
  config: Config;
  adminToken: string;
  metricsToken?: string;
  usage: UsageRecorder;
  events: AppEvents;
  fleet: Fleet;
  jobs: { wake(workloadId?: string): void };
  webhooks: { policy: AddressPolicy; ca: string[] | undefined };
  metrics: MetricsStore;
  /** The charts' series in the store: completed buckets written, older and other hosts' ones read back. */
  series: SeriesKeeper;
  /** The one metering path: a meter per request, recorded once where it ends. */
  metering: Metering;
  /** Per-key limits and quotas on the data plane. */
  limiter: Limiter;
  agents: RemoteAgents;
  /** This host in its cluster (a cluster of one with the embedded store): its id, the lead, the hosts. */
  cluster: Cluster;
  hostCert: HostCert;
  /** Where the HTTP listener is bound and the address the network reaches it by. */
  listen(): ListenInfo;
  /** The HTTPS URL agents join (for join commands). */
  joinUrl(): string;
  version: string;
  startedAt: string;
  /** The launch policy for tenants' workloads (from the `--policy-*` settings). */
  policy: LaunchPolicy;
  /** External providers' workloads: their sealed keys and the targets that call them. */
  providers: Providers;
  /** Cloud GPU workers: pods made and ended through their providers, billed. */
  cloud: CloudWorkers;
  /** Request-body bytes the data plane may hold at once (`--max-buffered-bytes`). */
  bodyBudget: ByteBudget;
  /** Stored job bytes per project (`--max-job-bytes-per-project`). */
  jobQuota: JobQuota;
  /** The model store: pulls, progress, removal. */
  models: ModelManager;
  /** Base workloads' LoRA adapters: added (pulled and checked), removed. */
  adapters: Adapters;
  /** Execution policies made real: replicas started, stopped and swapped. */
  scaler: Scaler;
  /** The settings in force, some changeable while serving (`config` is their live view). */
  settings: Settings;
  /** The request inspector's log: every finished data-plane request and job run goes here. */
  inspector: RequestSink;
  /** Request timelines: started at arrival, ended in the meter into the inspector and, when on, OpenTelemetry. */
  tracing: Tracing;
  /** The admin view of a workload: the stored fields plus what the serving side knows. */
  describeWorkload(w: Workload): Promise<WorkloadDetail>;
}
