import { Elysia } from "elysia";
import { z } from "zod";
import { hostname } from "node:os";
import type { Db } from "../db";
import type { Config } from "../config";
import type { Fleet } from "../workers/fleet";
import type { Cluster } from "../cluster/cluster";
import type { Metering } from "../usage/meter";
import type { MetricsStore } from "../usage/series";
import type { SeriesKeeper } from "../usage/series-store";
import type { ListenInfo } from "./listen";
import { jsonBody } from "../http";
import { flagValue, splitCommand } from "../../agent/command";
import { ENGINES } from "../../agent/engines";
import { ollamaAddress } from "../../agent/engines/ollama";
import { BACKENDS, type Backend } from "../workloads/schema";
import { checkConfig, listAllWorkloads, resolveWorkload } from "../workloads/service";
import type { ReplicaSpec } from "../../agent/protocol";
import { prometheusText } from "./prometheus";
import { BUCKET_MS, windowOf } from "../usage/series";
import { tenantVerdict } from "../workloads/launch-policy";
import type { LaunchPolicy } from "../../agent/launch-policy";
import { thisCommand } from "../invocation";
import { notFound } from "../errors";
import { principalOf } from "../auth/service";
import { seesProject } from "../users/access";
import { defaultKeyLimitsView } from "../limits/defaults";

const Preview = z.strictObject({
  backend: z.enum(BACKENDS),
  model_name: z.string().min(1).max(500),
  config: z.record(z.string(), z.unknown()).optional(),
  gpus: z.union([z.literal(1), z.literal(2), z.literal(4), z.literal(8)]).optional(),
});

/** A placeholder port shown where the agent will pick a free one at launch. */
const PORT_PLACEHOLDER = 65535;

/**
 * The final command the agent would run for a workload form, without launching anything: the
 * dashboard shows it under the command field.
 */
export function launchPreview(input: z.infer<typeof Preview>, policy: LaunchPolicy) {
  const config = checkConfig(input.backend as Backend, input.config ?? {});
  const spec: ReplicaSpec = {
    assignment_id: "preview",
    workload: {
      id: "preview",
      slug: "preview",
      project_slug: "preview",
      backend: input.backend,
      model_name: input.model_name,
      task_type: "text2text",
      config,
    },
    concurrency: 20,
    gpus: input.gpus ?? 1,
    gpu_indices: [],
    revision: "preview",
  };
  const engine = ENGINES[input.backend];
  const plan = engine.launch({
    spec,
    freePort: PORT_PLACEHOLDER,
    dataDir: "<data-dir>",
    env: process.env,
    gpus: [],
    which: (cmd) => (cmd.includes("/") ? cmd : Bun.which(cmd)),
    builtinLlama: () => ({ argv: ["inferd", "llama-runner"], env: {} }),
  });
  const original = config.command ? splitCommand(String(config.command)) : [];
  const argv = (plan.argv ?? plan.prep.flatMap((p) => p.argv ?? [])).map((a) =>
    a === String(PORT_PLACEHOLDER) ? "<free port>" : a,
  );
  return {
    argv,
    command: argv.map((a) => (/[\s'"]/.test(a) ? JSON.stringify(a) : a)).join(" "),
    builtin: !!plan.builtin,
    port_added: engine.family !== null && flagValue(original, ["--port"]) === undefined,
    tp_added:
      !engine.tensorParallelSpansGroup &&
      engine.flags.tensorParallel.length > 0 &&
      !original.some((a) => engine.flags.tensorParallel.some((f) => a === f || a.startsWith(`${f}=`))),
    /** Whether a tenant (control-plane key) could save this command under the launch policy. */
    tenant: tenantVerdict(policy, input.backend, config),
  };
}

/** Whether an Ollama daemon answers at OLLAMA_HOST. */
async function ollamaStatus(): Promise<{ url: string; running: boolean }> {
  const { url } = ollamaAddress(process.env.OLLAMA_HOST);
  const running = await fetch(`${url}/api/version`, { signal: AbortSignal.timeout(500) }).then(
    (r) => r.ok,
    () => false,
  );
  return { url, running };
}

/** What the dashboard's extras read: the store, the settings, the fleet, the cluster, the meters and charts, where we listen. */
export interface ExtrasDeps {
  db: Db;
  config: Config;
  fleet: Fleet;
  cluster: Cluster;
  metering: Metering;
  metrics: MetricsStore;
  series: SeriesKeeper;
  policy: LaunchPolicy;
  version: string;
  startedAt: string;
  listen(): ListenInfo;
}

/** Admin routes behind the dashboard's extras: server info, launch preview, metrics series. */
export const adminExtraRoutes = (deps: ExtrasDeps) =>
  new Elysia({ detail: { tags: ["admin"] } })
    .get(
      "/admin/info",
      async () => ({
        version: deps.version,
        hostname: hostname(),
        data_dir: deps.config.dataDir,
        listen: deps.listen(),
        started_at: deps.startedAt,
        allow_private_webhooks: deps.config.allowPrivateWebhooks,
        /** The limits a key gets where it has none of its own (`--default-key-limits`), by the keys' limit names. */
        default_key_limits: defaultKeyLimitsView(deps.config.defaultKeyLimits),
        /** How this server was started (`inferd`, `bun run start --`…): the prefix of commands the dashboard prints. */
        command: thisCommand(),
        ollama: await ollamaStatus(),
        builtin_llama: true,
        llama_server: Bun.which("llama-server"),
        store: { engine: deps.db.engine },
        cluster: await deps.cluster.view(),
      }),
      {
        detail: {
          summary:
            "What this server is and what it can run; which host of the cluster leads and every host's last heartbeat",
        },
      },
    )
    .post("/admin/launch-preview", ({ body }) => launchPreview(body, deps.policy), {
      ...jsonBody(Preview),
      detail: { summary: "The command the agent would run for a workload form" },
    })
    .get(
      "/admin/metrics/series",
      async ({ query, request }) => {
        const minutes = Math.min(Math.max(Number(query.minutes ?? 15) || 15, 1), 60);
        const now = Date.now();
        const { from, until } = windowOf(minutes, now);
        // A project member sees their projects' workloads only; another project's is not found.
        const who = principalOf(request);
        const one = query.workload ? await resolveWorkload(deps.db, String(query.workload)) : undefined;
        if (one && !seesProject(who, one.project_id)) throw notFound(`workload "${String(query.workload)}"`);
        const list = one ? [one] : (await listAllWorkloads(deps.db)).filter((w) => seesProject(who, w.project_id));
        // Older buckets (earlier runs, other hosts of a cluster) come from the store; this process's from memory.
        const stored = await deps.series.workloads(from, until, one?.id);
        return {
          interval_s: BUCKET_MS / 1000,
          /** The start of the first bucket and the end of the last one: every point is a complete bucket. */
          from: new Date(from).toISOString(),
          complete_until: new Date(until).toISOString(),
          workloads: list.map((w) => ({
            id: w.id,
            name: w.name,
            project_slug: w.project_slug,
            slug: w.slug,
            points: deps.metrics.points(w.id, minutes, now, stored.of(w.id)),
          })),
        };
      },
      {
        detail: {
          summary:
            "Per workload, one point per complete 10 s bucket (the one still filling is left out; `complete_until` says until when), kept across restarts and merged over a cluster's hosts: requests/s, latency and time to first token p50/p99, tokens/s, errors/s, queue depth; every figure null in a bucket no host was up in (a gap). ?minutes (1–60), ?workload (an id)",
        },
      },
    )
    .get(
      "/metrics",
      ({ set }) => {
        set.headers["content-type"] = "text/plain; version=0.0.4; charset=utf-8";
        return prometheusText(deps.db, deps.fleet, deps.metrics, deps.metering);
      },
      { detail: { summary: "Prometheus metrics (admin token or the metrics token)" } },
    );
