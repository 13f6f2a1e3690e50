/** Shapes of the admin API's answers, as far as the dashboard reads them. */

/** A project. */
export interface Project {
  id: string;
  name: string;
  slug: string;
  created_at: string;
}

/** Request and token counters of a key or a workload. */
export interface Usage {
  requests: number;
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  errors?: number;
  last_used_at: string | null;
}

/** An API key as listed (the secret only in the create answer). */
export interface Key {
  id: string;
  name: string;
  type: "sdk" | "live";
  scope: "project" | "endpoints";
  endpoints: string[];
  prefix: string;
  project_slug: string;
  created_at: string;
  revoked_at: string | null;
  usage: Usage;
  secret?: string;
}

/** Where a workload runs and how that replica is doing. */
export interface Assignment {
  id: string;
  worker_id: string;
  concurrency: number;
  gpus: number;
  gpu_indices: number[];
  auto?: boolean;
  state: string;
  reason?: string;
  in_flight: number;
  base_url?: string;
  served_model?: string;
}

/** A workload, with the serving view when fetched one by one. */
export interface Workload {
  id: string;
  name: string;
  description: string;
  slug: string;
  project_id: string;
  project_slug: string;
  task_type: string;
  backend: string;
  model_name: string;
  config: Record<string, unknown>;
  worker_id: string | null;
  execution_policy: string;
  created_at: string;
  endpoints: Record<string, boolean>;
  assignments?: Assignment[];
  scheduling_error?: string | null;
  queue_depth?: number;
  usage?: Usage;
}

/** One GPU of a worker with its latest probe. */
export interface Gpu {
  index: number;
  uuid?: string;
  name?: string;
  memory_total_mib: number;
  memory_used_mib: number;
  utilization_percent: number;
  temperature_c?: number;
}

/** A replica as a worker lists it. */
export interface Replica {
  assignment_id: string;
  workload_id: string;
  workload: string;
  state: string;
  concurrency: number;
  gpu_indices: number[];
}

/** A machine that runs workloads. */
export interface Worker {
  id: string;
  name: string;
  kind: string;
  hostname: string;
  state: "online" | "offline";
  cpu_cores: number;
  ram_bytes: number;
  gpus: Gpu[];
  telemetry?: { ram_free_bytes?: number; load_avg?: number[]; probed_at?: string };
  last_seen_at: string | null;
  replicas: Replica[];
  history?: TelemetrySample[];
}

/** One telemetry probe of a worker. */
export interface TelemetrySample {
  t: string;
  gpus: { index: number; utilization_percent: number; memory_used_mib: number; memory_total_mib: number; temperature_c?: number }[];
}

/** What this server is and what it can run. */
export interface Info {
  version: string;
  hostname: string;
  data_dir: string;
  allow_private_webhooks: boolean;
  ollama: { url: string; running: boolean };
  builtin_llama: boolean;
  llama_server?: string | null;
}

/** A webhook destination (secret only in the create answer). */
export interface Webhook {
  id: string;
  url: string;
  secret?: string;
  secret_prefix: string;
  created_at: string;
}

/** The receiver's answer to a test ping. */
export interface PingResult {
  ok: boolean;
  status_code: number | null;
  body: string | null;
  error: string | null;
  duration_ms: number;
}

/** One destination's delivery of a job result. */
export interface Delivery {
  id: string;
  url: string;
  event: string;
  state: "pending" | "delivered" | "terminal";
  attempts: number;
  last_status_code: number | null;
  last_error: string | null;
  next_attempt_at: string | null;
  delivered_at: string | null;
}

/** An async job with its deliveries. */
export interface Job {
  job_id: string;
  kind: string;
  status: string;
  created_at: string;
  finished_at: string | null;
  deliveries: Delivery[];
}

/** One try of a delivery. */
export interface Attempt {
  n: number;
  at: string;
  status_code: number | null;
  error: string | null;
  duration_ms: number | null;
}

/** A workload's request metrics over time. */
export interface WorkloadSeries {
  id: string;
  name: string;
  project_slug: string;
  slug: string;
  points: { t: string; rps: number; p50_ms: number | null; p99_ms: number | null; tokens_per_s: number; queue_depth: number }[];
}
