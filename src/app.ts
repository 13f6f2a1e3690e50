import { Elysia } from "elysia";
import { openapi } from "@elysiajs/openapi";
import { z } from "zod";
import type { Config } from "./config";
import type { Db } from "./db";
import { errorPlugin } from "./errors";
import { parseJsonBody, type ByteBudget } from "./http";
import type { JobQuota } from "./jobs/quota";
import type { ModelManager } from "./models/manager";
import { modelRoutes } from "./models/routes";
import type { Scaler } from "./scaling/scaler";
import { controlRoutes as replicaControlRoutes } from "./scaling/routes";
import { authenticateRequest } from "./auth/service";
import type { UsageRecorder } from "./keys/service";
import { projectRoutes } from "./projects/routes";
import { keyRoutes } from "./keys/routes";
import { adminWorkloadRoutes, controlRoutes } from "./workloads/routes";
import { adminRoutes, loginRoute } from "./admin/routes";
import { dataRoutes } from "./dataplane/routes";
import { workerRoutes } from "./workers/routes";
import type { Workload } from "./workloads/service";
import type { Fleet } from "./workers/fleet";
import type { MetricsStore } from "./metrics";
import type { RemoteAgents } from "./agents/remote";
import type { HostCert } from "./tls/hostcert";
import { agentRoutes } from "./agents/routes";
import { adminExtraRoutes } from "./admin/extras";
import type { AddressPolicy } from "./webhooks/address";
import { adminJobRoutes, jobRoutes } from "./jobs/routes";
import { webhookRoutes } from "./webhooks/routes";
import { uiRoutes } from "./ui/routes";
import type { LaunchPolicy } from "../agent/launch-policy";

/** Signals from the API to the parts that act on changes (the agents' reconcile loop). */
export interface AppEvents {
  workloadsChanged(): void;
}

/** Request metrics for telemetry (latency, tokens, errors per workload). */
export interface Metrics {
  observe(workloadId: string, ms: number, usage: { inputTokens: number; outputTokens: number }, ok: boolean): void;
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
  agents: RemoteAgents;
  hostCert: HostCert;
  /** The HTTPS URL agents join (for join commands). */
  joinUrl(): string;
  version: string;
  startedAt: string;
  /** The launch policy for tenants' workloads (from the `--policy-*` settings). */
  policy: LaunchPolicy;
  /** Request-body bytes the data plane may hold at once (`--max-buffered-bytes`). */
  bodyBudget: ByteBudget;
  /** Stored job bytes per project (`--max-job-bytes-per-project`). */
  jobQuota: JobQuota;
  /** The model store: pulls, progress, removal. */
  models: ModelManager;
  /** Execution policies made real: replicas started, stopped and swapped. */
  scaler: Scaler;
  /** The admin view of a workload: the stored fields plus what the serving side knows. */
  describeWorkload(w: Workload): unknown;
}

const JSON_PLANES = /^\/(api|admin)(\/|$)/;

/**
 * The path of a request URL without building a URL object (this runs on every request).
 * @example pathOf("http://h:1/a/b?x=1") // → "/a/b"
 */
export function pathOf(url: string): string {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  if (start < 0) return "/";
  const q = url.indexOf("?", start);
  return url.slice(start, q < 0 ? undefined : q);
}

/** Builds the inferd HTTP app (no listen): error mapping, the auth gate, body parsing, every route. */
export function createApp(deps: AppDeps) {
  return new Elysia()
    .use(errorPlugin)
    .onRequest(({ request }) => authenticateRequest(deps, request, pathOf(request.url)))
    // Our parser handles every body: JSON planes get limits and clear errors; elsewhere (the data
    // plane) the body is left unread (null marks it handled) for the route to stream or forward.
    .onParse({ as: "global" }, ({ request, path }) => (JSON_PLANES.test(path) ? parseJsonBody(request, deps.config.maxBodyBytes) : null))
    .use(
      openapi({
        path: "/docs",
        mapJsonSchema: { zod: z.toJSONSchema },
        documentation: { info: { title: "inferd", version: deps.version, description: "Workloads, inference endpoints and async jobs on your own GPUs." } },
      }),
    )
    .get("/healthz", () => ({ status: "ok", version: deps.version }))
    .use(adminRoutes(deps))
    .use(loginRoute(deps))
    .use(adminExtraRoutes(deps))
    .use(projectRoutes(deps))
    .use(keyRoutes(deps))
    .use(adminWorkloadRoutes(deps))
    .use(controlRoutes(deps))
    .use(workerRoutes(deps))
    .use(modelRoutes(deps))
    .use(replicaControlRoutes(deps))
    .use(webhookRoutes(deps))
    .use(adminJobRoutes(deps))
    .use(agentRoutes(deps))
    .use(jobRoutes(deps))
    .use(dataRoutes(deps))
    .use(uiRoutes());
}

/** The app's type, for tests and the server. */
export type App = ReturnType<typeof createApp>;
