/** Shapes of the admin API's answers, as far as the dashboard reads them. */
import type { ProjectListed, ProjectView } from "../../src/projects/service";
import type { KeyView } from "../../src/keys/service";
import type { WebhookView } from "../../src/webhooks/service";
import type { PostResult } from "../../src/webhooks/post";
import type { DeliveryView, JobView } from "../../src/jobs/service";
import type { Workload as ServerWorkload } from "../../src/workloads/service";
import type { launchPreview } from "../../src/admin/extras";
import type { ListenInfo } from "../../src/admin/listen";
import type { ClusterView } from "../../src/cluster/cluster";
import type { WorkerReplica, WorkloadDetail } from "../../src/workers/fleet";
import type { StoreModel } from "../../src/models/tenants";
import type { projectUsage } from "../../src/limits/project";
import type { LocalFile, LocalModel } from "../../src/models/discover";
import type { fitPerWorker } from "../../src/models/routes";
import type { TransferProgress } from "../../agent/protocol";
import type { SeriesPoint as ServerSeriesPoint } from "../../src/usage/series";
import type { projectBatch, projectBatches } from "../../src/batches/admin-routes";

/** A project (the server's own type). */
export type Project = ProjectView;
/** One project as `GET /admin/projects/:project` shows it: with what it uses against its caps. */
export type ProjectDetail = ProjectView & { usage: Awaited<ReturnType<typeof projectUsage>> };
/** A project in the list, with its workload and live-key counts. */
export type ProjectRow = ProjectListed;
/** An API key as listed; the secret only in the create answer. */
export type Key = KeyView & { secret?: string };
/** A webhook destination; the secret only in the create answer. */
export type Webhook = WebhookView & { secret?: string };
/** The receiver's answer to a test ping. */
export type PingResult = PostResult;
/** One destination's delivery of a job result. */
export type Delivery = DeliveryView;
/** An async job with its deliveries. */
export type Job = JobView & { batch?: { id: string; custom_id: string | null } | null };
/** The launch preview of a workload form: the final command and the tenant policy's verdict. */
export type LaunchPreview = Awaited<ReturnType<typeof launchPreview>>;
/** A model in the store (pulled, downloading, registered), with its shape, estimate, users and the project it was pulled for. */
export type Model = StoreModel;
/** Where a model fits on one worker: its GPUs' free memory (or free RAM) against the estimate. */
export type ModelFit = Awaited<ReturnType<typeof fitPerWorker>>[number];
/** One model as `GET /admin/models/:id` shows it, with the fit per worker. */
export type ModelDetail = Model & { fit: ModelFit[] };
/** A GGUF file another tool left on this machine (`GET /admin/models/discover`). */
export type FoundModel = LocalModel;
/** What is at a path on this machine (`GET /admin/models/file`). */
export type FileCheck = LocalFile;
/** How far a download is: bytes, percent, rate and ETA. */
export type Progress = TransferProgress;

/** Where a workload runs and how that replica is doing (state, reason, download progress). */
export type Assignment = WorkloadDetail["assignments"][number];

/** A workload's scaling: policy, replicas wanted against running and ready, the last decision. */
export type Scaling = NonNullable<WorkloadDetail["scaling"]>;

/** A workload (the server's own type), with the serving view when fetched one by one. */
export type Workload = ServerWorkload & Partial<Omit<WorkloadDetail, keyof ServerWorkload>>;

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
export type Replica = WorkerReplica;

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
  /** A local worker's host; null for a remote agent. */
  host_id: string | null;
  replicas: Replica[];
  history?: TelemetrySample[];
  /** A cloud GPU worker's pod (the admin's view): provider, price, billed time, "termination pending (pod …)". */
  cloud?: {
    provider: string;
    pod_id: string;
    gpu_type: string;
    gpus: number;
    cost_per_hour: number | null;
    label: string | null;
    reason: string | null;
    billed_seconds: number;
    billed_cost: number | null;
  };
}

/** One telemetry probe of a worker. */
export interface TelemetrySample {
  t: string;
  gpus: {
    index: number;
    utilization_percent: number;
    memory_used_mib: number;
    memory_total_mib: number;
    temperature_c?: number;
  }[];
}

/** What this server is and what it can run. */
/** Where the server listens and the address the network reaches it by (`GET /admin/info` → listen). */
export type Listen = ListenInfo;

export interface Info {
  version: string;
  hostname: string;
  data_dir: string;
  listen: Listen;
  allow_private_webhooks: boolean;
  /** The limits a key gets where it has none of its own (`--default-key-limits`), by the keys' limit names. */
  default_key_limits?: import("../../src/limits/defaults").KeyLimitDefaultsView;
  /** The command prefix of this server's start (`inferd`, `bun run start --`), for commands the dashboard prints. */
  command: string;
  ollama: { url: string; running: boolean };
  builtin_llama: boolean;
  llama_server?: string | null;
  /** The hosts sharing the store and which one leads (one host in the embedded store). */
  cluster: Cluster;
}

/** What `GET /admin/info` says of the cluster. */
export type Cluster = ClusterView;

/** One try of a delivery. */
export interface Attempt {
  n: number;
  at: string;
  status_code: number | null;
  error: string | null;
  duration_ms: number | null;
}

/** One complete 10 s bucket of a workload's request metrics (the server's own type). */
export type SeriesPoint = ServerSeriesPoint;

/** A workload's request metrics over time. */
export interface WorkloadSeries {
  id: string;
  name: string;
  project_slug: string;
  slug: string;
  points: SeriesPoint[];
}

/** `GET /admin/metrics/series`: complete buckets only, from `from` until `complete_until`. */
export interface SeriesAnswer {
  interval_s: number;
  from: string;
  complete_until: string;
  workloads: WorkloadSeries[];
}

// Limits, audit and usage (the operations pages).
export type { LimitsView, ProjectLimitsView } from "../../src/limits/schema";
export type { AuditEntry } from "../../src/audit/service";
export type { UsageRow } from "../../src/usage/routes";
/** A page of the audit log with the cursor to the next, older one. */
export type AuditPage = { entries: import("../../src/audit/service").AuditEntry[]; next_before: number | null };
/** The usage export's JSON answer. */
export type UsageExport = {
  group_by: "key" | "project" | "workload";
  from: string;
  to: string;
  rows: import("../../src/usage/routes").UsageRow[];
  /** Cloud GPU workers' billed time per pod and day (the admin's view only). */
  cloud?: import("../../src/cloud/service").CloudDay[];
};

// Users and sign-in (issue 26; the shapes of /work/api-26.md).
/** A role: admin (everything), operator (changes in their projects, workers, models), viewer (reads only). */
export type Role = "admin" | "operator" | "viewer";
/** A dashboard user as `GET /admin/users` lists them. */
export interface User {
  id: string;
  email: string;
  name: string;
  role: Role;
  /** Slugs of the projects the user belongs to (admins see all projects whatever this says). */
  projects: string[];
  source: "local" | "oidc";
  created_at: string;
  updated_at: string;
  last_sign_in_at: string | null;
  /** Live dashboard sessions. */
  sessions: number;
}
/** Who the browser is signed in as (`GET /admin/me`). */
export interface Me {
  kind: "admin_token" | "user";
  role: Role;
  user: User | null;
  projects: "all" | { id: string; slug: string; name: string }[];
  session_id: string | null;
}
/** One dashboard session of a user (`GET /admin/users/:id/sessions`). */
export interface UserSession {
  id: string;
  method: string;
  user_agent: string | null;
  created_at: string;
  last_seen_at: string | null;
  expires_at: string;
  /** The session of the browser asking. */
  current: boolean;
}
/** How one may sign in here (`GET /admin/session/methods`). */
export interface SignInMethods {
  password: boolean;
  oidc: null | { label: string; start: string };
}

/** The request inspector: a listed request, one with its timeline, a captured body (src/inspector/service.ts). */
export type { RequestRow, RequestDetail, BodyView } from "../../src/inspector/service";

/** A page of a workload's requests (`GET /admin/workloads/:id/requests`). */
export interface RequestPage {
  requests: import("../../src/inspector/service").RequestRow[];
  next_before: string | null;
}

/** A request's captured bodies (`GET /admin/requests/:id/bodies`). */
export interface RequestBodies {
  request: import("../../src/inspector/service").BodyView | null;
  response: import("../../src/inspector/service").BodyView | null;
  truncated: boolean;
}

/** A batch of a project as `GET /admin/projects/:project/batches` lists it: OpenAI's object with its workloads and files. */
export type BatchListed = Awaited<ReturnType<typeof projectBatches>>[number];
/** One batch with its requests' jobs (`custom_id`, workload, state, error). */
export type BatchDetail = Awaited<ReturnType<typeof projectBatch>>;
