import type { LaunchPolicy } from "./launch-policy";

/**
 * The protocol shared by the host (src/) and agents (agent/): what an agent reports about its
 * machine and replicas, and what the host asks it to run. Plain data, JSON-serialisable, so the
 * local agent (in-process) and remote agents (over HTTPS) use the same shapes.
 */

/** One GPU as probed from nvidia-smi or rocm-smi. Memory in MiB, utilisation in percent. */
export interface GpuInfo {
  index: number;
  uuid: string;
  name: string;
  vendor: "nvidia" | "amd";
  memory_total_mib: number;
  memory_used_mib: number;
  utilization_percent: number;
  temperature_c: number | null;
}

/** What an agent knows of its machine, sent at registration and with every heartbeat. */
export interface MachineInfo {
  hostname: string;
  cpu_cores: number;
  ram_bytes: number;
  ram_free_bytes: number;
  gpus: GpuInfo[];
  /** 1, 5 and 15 minute load averages. */
  load_avg: number[];
  probed_at: string;
}

/** States of one replica (an assignment's runtime on a worker). */
export const REPLICA_STATES = ["pending", "installing", "starting", "ready", "failed", "stopped"] as const;
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

/** An agent's report of one replica's state. */
export interface ReplicaReport {
  assignment_id: string;
  state: ReplicaState;
  reason?: string;
  /** Loopback base URL of the runtime's OpenAI-style server, when ready. */
  base_url?: string;
  /** The model name the runtime serves (what upstream requests must carry). */
  served_model?: string;
  /** The runtime's own API key (its command's `--api-key`), sent upstream as Bearer; never shown. */
  api_key?: string;
}

/** One request the host hands a remote agent to run against a replica's runtime. */
export interface WorkMessage {
  id: string;
  assignment_id: string;
  path: string;
  method: string;
  headers: Record<string, string>;
  body_b64: string | null;
}
