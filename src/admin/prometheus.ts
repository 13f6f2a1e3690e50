import { sql } from "drizzle-orm";
import type { Db } from "../db";
import { deliveries, jobs } from "../db/schema";
import type { MetricsStore } from "../usage/series";
import type { Metering } from "../usage/meter";
import { WINDOW_S } from "../usage/lag";
import type { Fleet } from "../workers/fleet";
import { listAllAssignments, listWorkers } from "../workers/service";
import { listAllWorkloads } from "../workloads/service";

const esc = (v: string) => v.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n");
const labels = (l: Record<string, string | number>) =>
  `{${Object.entries(l)
    .map(([k, v]) => `${k}="${esc(String(v))}"`)
    .join(",")}}`;

/** Collects metric families as Prometheus text exposition (version 0.0.4). */
class Exposition {
  private lines: string[] = [];
  family(
    name: string,
    type: "counter" | "gauge" | "summary",
    help: string,
    samples: [Record<string, string | number>, number | null][],
  ): void {
    this.lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
    for (const [l, v] of samples)
      if (v !== null && Number.isFinite(v)) this.lines.push(`${name}${Object.keys(l).length ? labels(l) : ""} ${v}`);
  }
  /** Lines already in exposition format (a histogram family). */
  raw(lines: string[]): void {
    this.lines.push(...lines);
  }
  text(): string {
    return `${this.lines.join("\n")}\n`;
  }
}

/** Everything the dashboard charts, as Prometheus metrics: requests, latency, tokens, queues, replicas, GPUs, jobs. */
export async function prometheusText(db: Db, fleet: Fleet, metrics: MetricsStore, metering: Metering): Promise<string> {
  const e = new Exposition();
  const wls = (await listAllWorkloads(db)).map((w) => ({ w, l: { workload: `${w.project_slug}/${w.slug}` } }));
  const states = new Map<string, Map<string, number>>();
  const all = await listAllAssignments(db);
  for (const a of all) {
    const counts = states.get(a.workload_id) ?? new Map<string, number>();
    counts.set(a.state, (counts.get(a.state) ?? 0) + 1);
    states.set(a.workload_id, counts);
  }
  const tot = (id: string) => metrics.totals.get(id) ?? { requests: 0, errors: 0, inputTokens: 0, outputTokens: 0 };
  e.family(
    "inferd_requests_total",
    "counter",
    "Inference requests and jobs finished, per workload.",
    wls.map(({ w, l }) => [l, tot(w.id).requests]),
  );
  e.family(
    "inferd_request_errors_total",
    "counter",
    "Inference requests and jobs that failed, per workload.",
    wls.map(({ w, l }) => [l, tot(w.id).errors]),
  );
  e.family(
    "inferd_tokens_total",
    "counter",
    "Tokens processed, per workload and direction.",
    wls.flatMap(
      ({ w, l }) =>
        [
          [{ ...l, direction: "input" }, tot(w.id).inputTokens],
          [{ ...l, direction: "output" }, tot(w.id).outputTokens],
        ] as [Record<string, string>, number][],
    ),
  );
  e.family(
    "inferd_requests_refused_total",
    "counter",
    "Data-plane requests refused before a runtime (authentication, a key's limits or quotas, a switched-off route, a bad request), per project, key (ids; empty when unknown) and error code.",
    [...metering.refusals].map(([k, n]) => {
      const [project, key, code] = k.split(" ");
      return [{ project, key, code }, n];
    }),
  );
  // Histograms, measured from each request's arrival: labelled by workload (project/slug) and kind.
  const names = new Map(wls.map(({ w, l }) => [w.id, l.workload]));
  const relabel = (x: Record<string, string>) =>
    names.has(x.workload) ? { workload: names.get(x.workload)!, kind: x.kind } : null;
  for (const h of [metering.duration, metering.firstToken, metering.queueWait, metering.tokenRate])
    e.raw(h.exposition(relabel));
  e.family(
    "inferd_event_loop_stall_seconds",
    "gauge",
    `The event loop's longest stall in the last ${WINDOW_S} seconds: how long the server could answer nothing.`,
    [[{}, metering.loop.longestMs() / 1000]],
  );
  e.family(
    "inferd_event_loop_own_stall_seconds",
    "gauge",
    `The same stall less the time the server's thread waited for a CPU meanwhile (Linux; elsewhere the whole stall): what its own work held the loop.`,
    [[{}, metering.loop.longestOwnMs() / 1000]],
  );
  e.family(
    "inferd_heap_allocated_bytes_total",
    "counter",
    "JS heap bytes allocated since start: the heap's growth summed over readings 100 ms apart (what a collection freed within one is not seen).",
    [[{}, metering.loop.allocatedBytes()]],
  );
  const prefixed = wls.filter(({ w }) => w.routing === "prefix");
  const prefix = (id: string) => fleet.dispatcher.prefix.counts.get(id) ?? { routed: 0, hits: 0 };
  e.family(
    "inferd_prefix_routed_total",
    "counter",
    "Requests routed by prompt prefix (two replicas or more), per workload routed by prefix.",
    prefixed.map(({ w, l }) => [l, prefix(w.id).routed]),
  );
  e.family(
    "inferd_prefix_hits_total",
    "counter",
    "Requests routed by prompt prefix that went to the replica the ring named (not spilled by load), per workload.",
    prefixed.map(({ w, l }) => [l, prefix(w.id).hits]),
  );
  const lora = wls.flatMap(({ w, l }) => {
    const c = fleet.dispatcher.lora.get(w.id);
    return c ? [{ l, c }] : [];
  });
  e.family(
    "inferd_lora_requests_total",
    "counter",
    "Requests for a LoRA adapter, per workload and whether the replica they got already held the adapter (loaded: true) or loaded it for them.",
    lora.flatMap(({ l, c }) => [
      [{ ...l, loaded: "true" }, c.hits] as [Record<string, string>, number],
      [{ ...l, loaded: "false" }, c.requests - c.hits] as [Record<string, string>, number],
    ]),
  );
  e.family(
    "inferd_lora_loads_total",
    "counter",
    "LoRA adapters loaded into a replica's runtime for a request, per workload.",
    lora.map(({ l, c }) => [l, c.loads]),
  );
  e.family(
    "inferd_queue_depth",
    "gauge",
    "Requests and jobs waiting for a slot, per workload.",
    wls.map(({ w, l }) => [l, fleet.dispatcher.depth(w.id)]),
  );
  e.family(
    "inferd_queue_class_depth",
    "gauge",
    "Requests and jobs waiting for a slot, per workload and class (interactive; batch: jobs and batch-priority keys).",
    wls.flatMap(({ w, l }) =>
      Object.entries(fleet.dispatcher.depthByClass(w.id)).map(
        ([cls, n]) => [{ ...l, class: cls }, n] as [Record<string, string>, number],
      ),
    ),
  );
  e.family(
    "inferd_replicas",
    "gauge",
    "Replicas per workload and state.",
    wls.flatMap(({ w, l }) =>
      [...(states.get(w.id) ?? [])].map(([state, n]) => [{ ...l, state }, n] as [Record<string, string>, number]),
    ),
  );
  const labelOf = new Map(wls.map(({ w, l }) => [w.id, l.workload]));
  e.family(
    "inferd_replica_state",
    "gauge",
    "1 for each replica in its state (ready, sleeping, waking, starting, idle, failed…), with what the scaler wants of it (desired: run, sleep, deep_sleep, idle).",
    all.map((a) => [
      { workload: labelOf.get(a.workload_id) ?? a.workload_id, replica: a.id, state: a.state, desired: a.desired },
      1,
    ]),
  );
  e.raw(
    fleet.switches.exposition((x) =>
      labelOf.has(x.workload) ? { workload: labelOf.get(x.workload)!, kind: x.kind } : null,
    ),
  );
  const workers = await listWorkers(db);
  e.family(
    "inferd_worker_online",
    "gauge",
    "1 when the worker reported recently.",
    workers.map((w) => [{ worker: w.name }, w.state === "online" ? 1 : 0]),
  );
  const gpus = workers.flatMap((w) => w.gpus.map((g) => ({ g, l: { worker: w.name, gpu: g.index, name: g.name } })));
  e.family(
    "inferd_gpu_utilization_percent",
    "gauge",
    "GPU utilisation.",
    gpus.map(({ g, l }) => [l, g.utilization_percent]),
  );
  e.family(
    "inferd_gpu_memory_used_bytes",
    "gauge",
    "GPU memory in use.",
    gpus.map(({ g, l }) => [l, g.memory_used_mib * 2 ** 20]),
  );
  e.family(
    "inferd_gpu_memory_total_bytes",
    "gauge",
    "GPU memory.",
    gpus.map(({ g, l }) => [l, g.memory_total_mib * 2 ** 20]),
  );
  e.family(
    "inferd_gpu_temperature_celsius",
    "gauge",
    "GPU temperature.",
    gpus.map(({ g, l }) => [l, g.temperature_c]),
  );
  const jobCounts = await db
    .select({ s: jobs.status, n: sql<number>`count(*)`.mapWith(Number) })
    .from(jobs)
    .groupBy(jobs.status);
  e.family(
    "inferd_jobs",
    "gauge",
    "Stored jobs per status.",
    jobCounts.map((r) => [{ status: r.s }, r.n]),
  );
  const dlv = await db
    .select({ s: deliveries.state, n: sql<number>`count(*)`.mapWith(Number) })
    .from(deliveries)
    .groupBy(deliveries.state);
  e.family(
    "inferd_webhook_deliveries",
    "gauge",
    "Webhook deliveries per state.",
    dlv.map((r) => [{ state: r.s }, r.n]),
  );
  return e.text();
}
