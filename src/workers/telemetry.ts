import type { MachineInfo } from "../../agent/protocol";

/** One telemetry sample of a worker: per-GPU utilisation and memory, and free RAM. */
export interface Sample {
  t: string;
  gpus: { index: number; utilization_percent: number; memory_used_mib: number; memory_total_mib: number; temperature_c: number | null }[];
  ram_free_bytes: number;
  load_avg: number[];
}

/** How many samples are kept per worker (an hour at the default 5 s heartbeat). */
const KEEP = 720;

/** Recent telemetry of every worker, in memory, for the dashboard's charts and /metrics. */
export class TelemetryHistory {
  private byWorker = new Map<string, Sample[]>();

  /** Adds a heartbeat's figures. */
  add(workerId: string, m: MachineInfo): void {
    const list = this.byWorker.get(workerId) ?? [];
    list.push({
      t: m.probed_at,
      gpus: m.gpus.map((g) => ({ index: g.index, utilization_percent: g.utilization_percent, memory_used_mib: g.memory_used_mib, memory_total_mib: g.memory_total_mib, temperature_c: g.temperature_c })),
      ram_free_bytes: m.ram_free_bytes,
      load_avg: m.load_avg,
    });
    if (list.length > KEEP) list.splice(0, list.length - KEEP);
    this.byWorker.set(workerId, list);
  }

  /** Samples of a worker, oldest first. */
  of(workerId: string): Sample[] {
    return this.byWorker.get(workerId) ?? [];
  }

  /** Forgets a deleted worker. */
  drop(workerId: string): void {
    this.byWorker.delete(workerId);
  }
}
