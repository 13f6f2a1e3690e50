/**
 * The protocol shared by the host (src/) and agents (agent/): what an agent reports about its
 * machine and replicas, and what the host asks it to run. Each shape is defined once, as a zod
 * schema (the host checks remote agents' messages with it) with its type inferred from it; plain
 * JSON data, so the local agent (in-process) and remote agents (over HTTPS) use the same shapes.
 */
import { z } from "zod";
import { DEFAULT_RING_BYTES } from "./ring";
import type { LaunchPolicy } from "./launch-flags";

/**
 * Bounds of what an agent may send the host. Every field of every agent → host message has one
 * (zod numbers are finite), so one credential cannot make the host hold more than a message's worth.
 */
export const AGENT_LIMITS = {
  /** Largest JSON message (join, heartbeat, report, logs); answers stream on their own. */
  messageBytes: 1 << 20,
  /** Largest body of a failure the agent reports instead of an answer (a short JSON error). */
  failureBytes: 64 << 10,
  /** GPUs of one machine. */
  gpus: 64,
  /** Replicas one heartbeat reports. */
  replicas: 1024,
  /** Log chunks one logs message carries. */
  logChunks: 500,
  /** Names, ids, versions, times. */
  name: 256,
  /** URLs, model names, paths, keys. */
  text: 4096,
  /** A replica's reason quotes the runtime's last lines, which its log ring bounds. */
  reason: DEFAULT_RING_BYTES + 16 * 1024,
} as const;

const name = () => z.string().max(AGENT_LIMITS.name);
const text = () => z.string().max(AGENT_LIMITS.text);
const count = () => z.number().int().min(0).max(Number.MAX_SAFE_INTEGER);

/** One GPU as probed from nvidia-smi or rocm-smi. Memory in MiB, utilisation in percent. */
export const GpuInfoSchema = z.object({
  index: z.number().int().min(0).max(1023),
  uuid: name(),
  name: name(),
  vendor: z.enum(["nvidia", "amd"]),
  memory_total_mib: z.number(),
  memory_used_mib: z.number(),
  utilization_percent: z.number(),
  temperature_c: z.number().nullable(),
});
export type GpuInfo = z.infer<typeof GpuInfoSchema>;

/** What an agent knows of its machine, sent at registration and with every heartbeat. */
export const MachineInfoSchema = z.object({
  hostname: name(),
  cpu_cores: count(),
  ram_bytes: count(),
  ram_free_bytes: count(),
  gpus: z.array(GpuInfoSchema).max(AGENT_LIMITS.gpus),
  /** 1, 5 and 15 minute load averages. */
  load_avg: z.array(z.number()).max(3),
  probed_at: name(),
  /** The address other members of a multi-node group reach this machine at (`--cluster-address`). */
  cluster_address: name().optional(),
  /** Host RAM (MiB) sleeping replicas may hold here at most (`INFERD_SLEEP_RAM_MIB`; absent: half the RAM). */
  sleep_ram_mib: count().optional(),
});
export type MachineInfo = z.infer<typeof MachineInfoSchema>;

/** States of one replica (an assignment's runtime on a worker). */
export const REPLICA_STATES = [
  "pending",
  "downloading",
  "installing",
  "starting",
  "ready",
  /** Its process is up, its GPU memory freed (the host offers none of its slots). */
  "sleeping",
  /** Waking from `sleeping`: its memory coming back (the host offers none of its slots yet). */
  "waking",
  "failed",
  "stopped",
] as const;
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

/** One member of a multi-node group as every member sees it. */
export interface GroupMember {
  rank: number;
  /** Its worker's name (for reasons and logs). */
  worker: string;
  /** Its worker's `--cluster-address`. */
  address: string;
  /** `address:port` of its group listener (rendezvous, Ray head, RPC server), once it reported one. */
  endpoint?: string;
  /** Whether its process is up (a Ray worker joined, an RPC server listening). */
  ready: boolean;
}

/**
 * The group a replica is a member of when its workload spans machines (`nodes > 1`): its rank
 * (0 leads and alone serves requests), the group's generation (bumped when the group restarts)
 * and every member. Endpoints and readiness change without a restart: the agent waits on them.
 */
export interface GroupSpec {
  id: string;
  nodes: number;
  rank: number;
  generation: number;
  members: GroupMember[];
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
  /** Set when the workload spans machines: this member's place in its group. */
  group?: GroupSpec;
  /**
   * The host may put this replica to sleep: it is launched with its engine's enabling flags and
   * environment (engines without sleep: ignored). Part of the revision.
   */
  sleep_mode?: boolean;
  /** Sleep now at this level (absent: be awake). Not part of the revision: changing it never restarts the process. */
  sleep?: 1 | 2;
  /**
   * The workload's LoRA adapters (issue 39): the runtime is launched with its engine's LoRA flags
   * (`max_rank`, `slots`) and the agent pulls each adapter, reporting where it is. For an engine that
   * loads adapters while running, the list is not part of the revision (a new one is pulled, never a
   * restart); for one that takes them at launch (llama.cpp) it is.
   */
  lora?: { max_rank: number; slots: number; adapters: { name: string; source: string }[] };
}

/** How far a download is: bytes, percent, rate and estimated time left. */
export const TransferProgressSchema = z.object({
  bytes_done: z.number(),
  bytes_total: z.number(),
  percent: z.number(),
  rate_bps: z.number(),
  eta_s: z.number().nullable(),
  /** The file being fetched now. */
  file: text().optional(),
});
export type TransferProgress = z.infer<typeof TransferProgressSchema>;

/** An agent's report of one replica's state. */
export const ReplicaReportSchema = z.object({
  assignment_id: name(),
  state: z.enum(REPLICA_STATES),
  reason: z.string().max(AGENT_LIMITS.reason).optional(),
  /** Loopback base URL of the runtime's OpenAI-style server, when ready. */
  base_url: text().optional(),
  /** The model name the runtime serves (what upstream requests must carry). */
  served_model: text().optional(),
  /** The runtime's own API key (its command's `--api-key`), sent upstream as Bearer; never shown. */
  api_key: text().optional(),
  /** A custom server's routes: inferd's route under `/v1/` → its own path (agent/engines/custom.ts). */
  paths: z.record(text(), text()).optional(),
  /** While `downloading`: how far the model pull is. */
  progress: TransferProgressSchema.optional(),
  /** The compute backend that really runs, once ready, when the runtime says (built-in llama.cpp: "CUDA", "CPU (GPU build unavailable: …)"). */
  backend: text().optional(),
  /** Requests the runtime serves at once (its own batch capacity), once ready. */
  slots: z
    .number()
    .int()
    .positive()
    .max(1 << 16)
    .optional(),
  /** A group member: the port of its group listener on its cluster address (the host adds the address). */
  group_port: z.number().int().min(1).max(65535).optional(),
  /** A group member: the group generation this report is about (older ones are stale). */
  group_generation: count().optional(),
  /** While `sleeping`: the level it sleeps at. */
  sleep_level: z.union([z.literal(1), z.literal(2)]).optional(),
  /** While `sleeping`: host RAM (MiB) it holds: its weights' size on disk at level 1, ~0 at level 2 (absent: unknown). */
  host_ram_mib: z.number().int().min(0).optional(),
  /** How long the last sleep or wake took (ms), sent with the state it led to. */
  switch_ms: z.number().min(0).optional(),
  /** The LoRA adapters pulled for it, in launch order, with their paths on this machine (what a load names). */
  adapters: z
    .array(z.object({ name: name(), path: text() }))
    .max(1000)
    .optional(),
  /** How many adapters its runtime holds at once, from its command (past it the host unloads the least recently used). */
  lora_slots: z.number().int().positive().max(100_000).optional(),
});
export type ReplicaReport = z.infer<typeof ReplicaReportSchema>;

/** An agent's first message: its one-time join token, its version and its machine. */
export const JoinSchema = z.strictObject({
  token: z.string().min(1).max(AGENT_LIMITS.text),
  version: name().min(1),
  machine: MachineInfoSchema,
});

/** A heartbeat: the agent's version, its machine's telemetry and every replica's state. */
export const HeartbeatSchema = z.strictObject({
  version: name(),
  machine: MachineInfoSchema,
  replicas: z.array(ReplicaReportSchema).max(AGENT_LIMITS.replicas),
});

/** Runtime output going up: base64 chunks per replica. */
export const LogsSchema = z.strictObject({
  chunks: z
    .array(z.strictObject({ assignment_id: name(), data_b64: z.string().max(AGENT_LIMITS.messageBytes) }))
    .max(AGENT_LIMITS.logChunks),
});

/**
 * The headers of an agent's answer to one request (`POST /agent/v1/work/:id/response`): the runtime's
 * status and content type, or `x-inferd-failure` when the agent answered itself (see AgentFailure).
 */
export const AnswerHeadSchema = z.object({
  "x-inferd-status": z.coerce.number().int().min(200).max(599).default(502),
  "x-inferd-content-type": name().default("application/octet-stream"),
  "x-inferd-failure": name().min(1).optional(),
});

/** One request the host hands a remote agent to run against a replica's runtime. */
export interface WorkMessage {
  id: string;
  assignment_id: string;
  path: string;
  method: string;
  headers: Record<string, string>;
  body_b64: string | null;
}
