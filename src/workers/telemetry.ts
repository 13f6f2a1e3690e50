import type { MachineInfo } from "../../agent/protocol";
import { completeUntil, KEEP as KEEP_BUCKETS, BUCKET_MS } from "../usage/series";
import type { BucketRow, SeriesKeeper } from "../usage/series-store";

/** One telemetry sample of a worker: per-GPU utilisation and memory, and free RAM. */
export interface Sample {
  t: string;
  gpus: {
    index: number;
    utilization_percent: number;
    memory_used_mib: number;
    memory_total_mib: number;
    temperature_c: number | null;
  }[];
  ram_free_bytes: number;
  load_avg: number[];
}

/** How many samples are kept per worker (an hour at the default 5 s heartbeat). */
const KEEP = 720;

/** A kept sample and the bucket it arrived in (the store writes it with that bucket). */
interface Entry {
  bucket: number;
  sample: Sample;
}

/**
 * Recent telemetry of every worker, in memory, for the dashboard's charts and /metrics; as a
 * series source (kind "gpu", one row per worker and 10 s bucket holding the samples that arrived
 * in it) the store keeps it across restarts (src/usage/series-store.ts).
 */
export class TelemetryHistory {
  private byWorker = new Map<string, Entry[]>();
  /** The kind of its rows in the store. */
  readonly kind = "gpu";

  /** Adds a heartbeat's figures. */
  add(workerId: string, m: MachineInfo, now = Date.now()): void {
    this.keep(workerId, completeUntil(now), [
      {
        t: m.probed_at,
        gpus: m.gpus.map((g) => ({
          index: g.index,
          utilization_percent: g.utilization_percent,
          memory_used_mib: g.memory_used_mib,
          memory_total_mib: g.memory_total_mib,
          temperature_c: g.temperature_c,
        })),
        ram_free_bytes: m.ram_free_bytes,
        load_avg: m.load_avg,
      },
    ]);
  }

  private keep(workerId: string, bucket: number, samples: Sample[]): void {
    const list = this.byWorker.get(workerId) ?? [];
    list.push(...samples.map((sample) => ({ bucket, sample })));
    if (list.length > KEEP) list.splice(0, list.length - KEEP);
    this.byWorker.set(workerId, list);
  }

  /** Samples of a worker this process received, oldest first. */
  of(workerId: string): Sample[] {
    return (this.byWorker.get(workerId) ?? []).map((e) => e.sample);
  }

  /** Per worker, the samples that arrived in each bucket of [from, until), for the store. */
  completed(from: number, until: number): BucketRow[] {
    return [...this.byWorker].flatMap(([subject, list]) => {
      const byT = new Map<number, Sample[]>();
      for (const e of list)
        if (e.bucket >= from && e.bucket < until) byT.set(e.bucket, [...(byT.get(e.bucket) ?? []), e.sample]);
      return [...byT].map(([t, data]) => ({ subject, t, data }));
    });
  }

  /** Takes in the samples a previous run of this host stored for bucket `t` (the one this process started in). */
  carry(subject: string, t: number, data: unknown): void {
    const earlier = (data as Sample[]).map((sample) => ({ bucket: t, sample }));
    this.byWorker.set(subject, [...earlier, ...(this.byWorker.get(subject) ?? [])].slice(-KEEP));
  }

  /** Forgets a deleted worker. */
  drop(workerId: string): void {
    this.byWorker.delete(workerId);
  }
}

/**
 * A worker's telemetry over the last hour, oldest first: what the store kept (earlier runs of this
 * host, other hosts of a cluster) followed by what this process received. The charts break their
 * lines where samples are missing (the server was down).
 */
export async function gpuHistory(
  keeper: SeriesKeeper,
  telemetry: TelemetryHistory,
  workerId: string,
  now = Date.now(),
): Promise<Sample[]> {
  const rows = await keeper.read(
    "gpu",
    completeUntil(now) - KEEP_BUCKETS * BUCKET_MS,
    completeUntil(now) + BUCKET_MS,
    workerId,
  );
  const seen = new Set<string>();
  return [...rows.flatMap((r) => r.data as Sample[]), ...telemetry.of(workerId)]
    .filter((s) => !seen.has(s.t) && !!seen.add(s.t))
    .sort((a, b) => Date.parse(a.t) - Date.parse(b.t));
}
