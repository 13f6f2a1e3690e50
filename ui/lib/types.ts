/** Shapes of the admin API's answers, as far as the dashboard reads them. */
import type { ProjectView } from "../../src/projects/service";
import type { KeyView } from "../../src/keys/service";
import type { WebhookView } from "../../src/webhooks/service";
import type { PostResult } from "../../src/webhooks/post";
import type { DeliveryView, JobView } from "../../src/jobs/service";
import type { Workload as ServerWorkload } from "../../src/workloads/service";
import type { launchPreview } from "../../src/admin/extras";

/** A project (the server's own type). */
export type Project = ProjectView;
/** An API key as listed; the secret only in the create answer. */
export type Key = KeyView & { secret?: string };
/** A webhook destination; the secret only in the create answer. */
export type Webhook = WebhookView & { secret?: string };
/** The receiver's answer to a test ping. */
export type PingResult = PostResult;
/** One destination's delivery of a job result. */
export type Delivery = DeliveryView;
/** An async job with its deliveries. */
export type Job = JobView;
/** The launch preview of a workload form: the final command and the tenant policy's verdict. */
export type LaunchPreview = ReturnType<typeof launchPreview>;


/** Request and token counters of a key or a workload. */
export interface Usage {
  requests: number;
  input_tokens: number;
  output_tokens: number;
  total_tokens: number;
  errors?: number;
  last_used_at: string | null;
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

/** A workload (the server's own type), with the serving view when fetched one by one. */
export type Workload = ServerWorkload & {
  assignments?: Assignment[];
  scheduling_error?: string | null;
  queue_depth?: number;
  usage?: Usage;
};

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
