/**
 * The protocol shared by the host (src/) and agents (agent/): what an agent reports about its
 * machine and replicas, and what the host asks it to run. Each shape is defined once, as a zod
 * schema (the host checks remote agents' messages with it) with its type inferred from it; plain
 * JSON data, so the local agent (in-process) and remote agents (over HTTPS) use the same shapes.
 */
import { z } from "zod";
import type { LaunchPolicy } from "./launch-policy";

/** One GPU as probed from nvidia-smi or rocm-smi. Memory in MiB, utilisation in percent. */
export const GpuInfoSchema = z.looseObject({
  index: z.number(),
  uuid: z.string(),
  name: z.string(),
  vendor: z.enum(["nvidia", "amd"]),
  memory_total_mib: z.number(),
  memory_used_mib: z.number(),
  utilization_percent: z.number(),
  temperature_c: z.number().nullable(),
});
export type GpuInfo = z.infer<typeof GpuInfoSchema>;

/** What an agent knows of its machine, sent at registration and with every heartbeat. */
export const MachineInfoSchema = z.looseObject({
  hostname: z.string(),
  cpu_cores: z.number(),
  ram_bytes: z.number(),
  ram_free_bytes: z.number(),
  gpus: z.array(GpuInfoSchema),
  /** 1, 5 and 15 minute load averages. */
  load_avg: z.array(z.number()),
  probed_at: z.string(),
});
export type MachineInfo = z.infer<typeof MachineInfoSchema>;

/** States of one replica (an assignment's runtime on a worker). */
export const REPLICA_STATES = ["pending", "downloading", "installing", "starting", "ready", "failed", "stopped"] as const;
export type ReplicaState = (typeof REPLICA_STATES)[number];

/** The workload fields an agent needs to launch a runtime. */
export interface WorkloadSpec {
  id: string;
  slug: string;
  project_slug: string;
  backend: string;
  model_name: string;
  task_type: string;
  config: Record<string, unknown>;
}

/** One replica the host wants an agent to run. `revision` changes when a restart is needed. */
export interface ReplicaSpec {
  assignment_id: string;
  workload: WorkloadSpec;
  concurrency: number;
  gpus: number;
  gpu_indices: number[];
  revision: string;
  /** The launch policy to enforce before launching (a tenant set the command); absent when trusted. */
  policy?: LaunchPolicy;
}

/** How far a download is: bytes, percent, rate and estimated time left. */
export const TransferProgressSchema = z.looseObject({
  bytes_done: z.number(),
  bytes_total: z.number(),
  percent: z.number(),
  rate_bps: z.number(),
  eta_s: z.number().nullable(),
  /** The file being fetched now. */
  file: z.string().optional(),
});
export type TransferProgress = z.infer<typeof TransferProgressSchema>;

/** An agent's report of one replica's state. */
export const ReplicaReportSchema = z.looseObject({
  assignment_id: z.string(),
  state: z.enum(REPLICA_STATES),
  reason: z.string().optional(),
  /** Loopback base URL of the runtime's OpenAI-style server, when ready. */
  base_url: z.string().optional(),
  /** The model name the runtime serves (what upstream requests must carry). */
  served_model: z.string().optional(),
  /** The runtime's own API key (its command's `--api-key`), sent upstream as Bearer; never shown. */
  api_key: z.string().optional(),
  /** While `downloading`: how far the model pull is. */
  progress: TransferProgressSchema.optional(),
  /** Requests the runtime serves at once (its own batch capacity), once ready. */
  slots: z.number().int().positive().optional(),
});
export type ReplicaReport = z.infer<typeof ReplicaReportSchema>;

/** One request the host hands a remote agent to run against a replica's runtime. */
export interface WorkMessage {
  id: string;
  assignment_id: string;
  path: string;
  method: string;
  headers: Record<string, string>;
  body_b64: string | null;
}
