import { sqliteTable, text, integer, uniqueIndex, index, blob, primaryKey, customType } from "drizzle-orm/sqlite-core";

/**
 * An integer column read as a JS number from either store: SQLite answers numbers, PostgreSQL's
 * `bigint` answers exact decimal strings (counters and byte sizes here stay below 2^53). The domain
 * code is written once against these tables and runs on both dialects (see src/db/README.md).
 */
const int = customType<{ data: number; driverData: number | string | bigint }>({
  dataType: () => "integer",
  fromDriver: (v) => Number(v),
});

/** A project groups workloads and keys; its slug appears in endpoint paths. */
export const projects = sqliteTable("projects", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  slug: text("slug").notNull().unique(),
  createdAt: text("created_at").notNull(),
  /** Token quotas of the whole project (null: none), per UTC day and calendar month. */
  tokensPerDay: int("tokens_per_day"),
  tokensPerMonth: int("tokens_per_month"),
  /** Caps (null: none): workloads in the project, replicas its workloads' policies may run together, bytes of models pulled for it. */
  maxWorkloads: int("max_workloads"),
  maxReplicas: int("max_replicas"),
  modelBytes: int("model_bytes"),
});

/** A model served by a backend; `config` and `endpoints` hold JSON text. */
export const workloads = sqliteTable(
  "workloads",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    description: text("description").notNull().default(""),
    slug: text("slug").notNull(),
    taskType: text("task_type").notNull(),
    backend: text("backend").notNull(),
    modelName: text("model_name").notNull(),
    config: text("config").notNull().default("{}"),
    workerId: text("worker_id"),
    gpuResourceId: text("gpu_resource_id"),
    executionPolicy: text("execution_policy").notNull().default("fixed"),
    endpoints: text("endpoints").notNull(),
    /** Who last set the command: `admin` (trusted) or `tenant` (a control-plane key: the launch policy applies). */
    configOrigin: text("config_origin", { enum: ["admin", "tenant"] })
      .notNull()
      .default("admin"),
    /** The execution policy's parameters, JSON (shape per policy: src/execution/schema.ts). */
    executionParams: text("execution_params").notNull().default("{}"),
    /** Stopped by the operator (`POST …/stop`): no replica runs until `POST …/start`. */
    paused: integer("paused", { mode: "boolean" }).notNull().default(false),
    /** Machines one replica spans (1–16): a group of that many members, placed all or nothing. */
    nodes: int("nodes").notNull().default(1),
    /** Other names the project base URL routes to this workload (JSON array of strings, unique in the project). */
    aliases: text("aliases").notNull().default("[]"),
    /** Workload slugs tried in order when this one fails before answering (JSON array). */
    fallbacks: text("fallbacks").notNull().default("[]"),
    /** How requests pick a replica: "prefix" (the one likely holding the prompt's prefix in its KV cache) or "least_loaded"; null: by task type (prefix for chat-like ones). */
    routing: text("routing"),
    /** Volatile lines agents put atop a prompt (Claude Code's billing header) removed: conversations share the prefix cache. */
    stablePrompts: integer("stable_prompts", { mode: "boolean" }).notNull().default(true),
    /** Until when (ISO time) the request inspector keeps this workload's request and answer bodies; null: not kept. */
    captureUntil: text("capture_until"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
  },
  (t) => [uniqueIndex("workloads_project_slug").on(t.projectId, t.slug)],
);

/** An API key: only the SHA-256 of the secret is kept, plus a visible prefix. */
export const apiKeys = sqliteTable(
  "api_keys",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    name: text("name").notNull(),
    type: text("type", { enum: ["sdk", "live"] }).notNull(),
    scope: text("scope", { enum: ["project", "endpoints"] }).notNull(),
    endpoints: text("endpoints").notNull().default("[]"),
    prefix: text("prefix").notNull(),
    hash: text("hash").notNull().unique(),
    createdAt: text("created_at").notNull(),
    revokedAt: text("revoked_at"),
    requests: int("requests").notNull().default(0),
    inputTokens: int("input_tokens").notNull().default(0),
    outputTokens: int("output_tokens").notNull().default(0),
    lastUsedAt: text("last_used_at"),
    /** Limits (null: none): requests and tokens per minute, requests at once, token quotas per day and month. */
    rpm: int("rpm"),
    tpm: int("tpm"),
    maxConcurrent: int("max_concurrent"),
    tokensPerDay: int("tokens_per_day"),
    tokensPerMonth: int("tokens_per_month"),
    /** Scheduling class of its requests: "interactive" (null: the default) or "batch" (after interactive ones, as jobs). */
    priority: text("priority"),
    /** Its share of a workload's slots against other keys waiting for it (deficit round-robin); null: 1. */
    weight: int("weight"),
  },
  (t) => [index("api_keys_project").on(t.projectId)],
);

/** Dashboard sessions: the cookie holds the id, only its hash is stored. */
export const sessions = sqliteTable("sessions", {
  hash: text("hash").primaryKey(),
  createdAt: text("created_at").notNull(),
  expiresAt: text("expires_at").notNull(),
  /** SHA-256 of the admin token the session was opened with: a changed token ends it. */
  tokenHash: text("token_hash"),
  /** Last use (updated at most once a minute), for the idle expiry. */
  lastSeenAt: text("last_seen_at"),
  /** The signed-in user (null: a session opened with the admin token); removing the user ends it. */
  userId: text("user_id").references(() => users.id, { onDelete: "cascade" }),
  /** How it began: "admin_token", "login_link", "password" or "oidc". */
  method: text("method"),
  /** The browser's User-Agent when it began, to tell a user's sessions apart. */
  userAgent: text("user_agent"),
});

/**
 * A person who signs in to the dashboard and /admin: `admin` (everything), `operator` (workloads,
 * workers, models, webhooks and keys of their projects) or `viewer` (read-only, their projects).
 * Local users have a password hash (argon2id); single sign-on users their issuer and subject.
 */
export const users = sqliteTable(
  "users",
  {
    id: text("id").primaryKey(),
    /** Lower-cased; unique. */
    email: text("email").notNull(),
    name: text("name").notNull().default(""),
    role: text("role", { enum: ["admin", "operator", "viewer"] }).notNull(),
    passwordHash: text("password_hash"),
    oidcIssuer: text("oidc_issuer"),
    oidcSubject: text("oidc_subject"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
    lastSignInAt: text("last_sign_in_at"),
  },
  (t) => [uniqueIndex("users_email").on(t.email), uniqueIndex("users_oidc").on(t.oidcIssuer, t.oidcSubject)],
);

/** Which projects a user belongs to (operators and viewers see and act on these only). */
export const projectMembers = sqliteTable(
  "project_members",
  {
    userId: text("user_id")
      .notNull()
      .references(() => users.id, { onDelete: "cascade" }),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    createdAt: text("created_at").notNull(),
  },
  (t) => [primaryKey({ columns: [t.userId, t.projectId] }), index("project_members_project").on(t.projectId)],
);

/** A GPU host: the local machine or a remote agent. GPUs and telemetry are JSON text. */
export const workers = sqliteTable("workers", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  kind: text("kind", { enum: ["local", "remote"] }).notNull(),
  hostname: text("hostname"),
  credentialHash: text("credential_hash"),
  joinTokenHash: text("join_token_hash"),
  version: text("version"),
  cpuCores: int("cpu_cores").notNull().default(0),
  ramBytes: int("ram_bytes").notNull().default(0),
  gpus: text("gpus").notNull().default("[]"),
  telemetry: text("telemetry").notNull().default("{}"),
  lastSeenAt: text("last_seen_at"),
  createdAt: text("created_at").notNull(),
  /** Projects whose tenants may pin workloads here (JSON list of project ids, or `"*"` for all). */
  openTo: text("open_to").notNull().default("[]"),
  /** For a host's own machine (`local`): the host it belongs to (cluster mode has one per host). */
  hostId: text("host_id"),
  /** The address other members of a multi-node group reach this machine at (`--cluster-address`). */
  clusterAddress: text("cluster_address"),
});

/**
 * Join tokens made with `POST /admin/workers/join-tokens`: reusable ones let a pool of agents (a
 * Kubernetes DaemonSet) join, each as a new worker; one-time ones let one agent join. They expire;
 * only the secret's hash is kept. (The one-time token of `POST /admin/workers` lives on its worker.)
 */
export const joinTokens = sqliteTable("join_tokens", {
  id: text("id").primaryKey(),
  secretHash: text("secret_hash").notNull(),
  reusable: integer("reusable", { mode: "boolean" }).notNull().default(false),
  expiresAt: text("expires_at").notNull(),
  createdAt: text("created_at").notNull(),
  revokedAt: text("revoked_at"),
  /** Agents that joined with it. */
  uses: int("uses").notNull().default(0),
  lastUsedAt: text("last_used_at"),
});

/** A workload placed on a worker with its slot count and GPUs; `state` is what the agent reports. */
export const assignments = sqliteTable(
  "assignments",
  {
    id: text("id").primaryKey(),
    workloadId: text("workload_id")
      .notNull()
      .references(() => workloads.id, { onDelete: "cascade" }),
    workerId: text("worker_id")
      .notNull()
      .references(() => workers.id, { onDelete: "cascade" }),
    concurrency: int("concurrency").notNull().default(20),
    gpus: int("gpus").notNull().default(1),
    gpuIndices: text("gpu_indices").notNull().default("[]"),
    auto: integer("auto", { mode: "boolean" }).notNull().default(false),
    state: text("state").notNull().default("pending"),
    reason: text("reason"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
    /**
     * `run`: the agent keeps the runtime up; `idle`: stopped by the scaler (scale to zero, swapped out);
     * `sleep` / `deep_sleep`: the runtime kept but asleep at level 1 (weights in host RAM) or 2 (weights dropped).
     */
    desired: text("desired", { enum: ["run", "idle", "sleep", "deep_sleep"] })
      .notNull()
      .default("run"),
    /** True when `concurrency` was set by hand; otherwise the runtime's own batch capacity is used. */
    concurrencySet: integer("concurrency_set", { mode: "boolean" }).notNull().default(true),
    /** Bumped by a restart or a retry: part of the replica's revision, so the agent starts it anew. */
    generation: int("generation").notNull().default(0),
    /** A multi-node group this member belongs to (null: a single-node replica). */
    groupId: text("group_id"),
    /** The member's rank in its group; rank 0 leads and alone receives requests. */
    nodeRank: int("node_rank").notNull().default(0),
    /** `address:port` the member reported for its group's traffic (rendezvous, Ray head, RPC server). */
    endpoint: text("endpoint"),
  },
  (t) => [index("assignments_workload").on(t.workloadId), index("assignments_worker").on(t.workerId)],
);

/**
 * The secret an external provider's workload calls it with (its API key), encrypted with the
 * operator's key (src/providers/secrets.ts); removed with the workload.
 */
export const workloadSecrets = sqliteTable("workload_secrets", {
  workloadId: text("workload_id")
    .primaryKey()
    .references(() => workloads.id, { onDelete: "cascade" }),
  /** `v1.<iv>.<tag>.<ciphertext>` (base64url, AES-256-GCM). */
  sealed: text("sealed").notNull(),
  /** The last four characters, to tell keys apart. */
  hint: text("hint").notNull(),
  createdAt: text("created_at").notNull(),
});

/**
 * A cloud GPU worker's pod at its provider (src/cloud): what was asked, what it costs, and where its
 * life stands. Kept after the worker is removed: its billed time stays in the usage.
 */
export const cloudPods = sqliteTable("cloud_pods", {
  workerId: text("worker_id").primaryKey(),
  workerName: text("worker_name").notNull(),
  provider: text("provider", { enum: ["runpod", "kubernetes"] }).notNull(),
  podId: text("pod_id").notNull(),
  gpuType: text("gpu_type").notNull(),
  gpus: int("gpus").notNull(),
  /** The provider's price, in millionths of a dollar per hour (null: it did not say). */
  costMicrosPerHour: int("cost_micros_per_hour"),
  state: text("state", { enum: ["running", "terminating", "termination_pending", "terminated"] }).notNull(),
  reason: text("reason"),
  attempts: int("attempts").notNull().default(0),
  nextAttemptAt: text("next_attempt_at"),
  createdAt: text("created_at").notNull(),
  /** When the provider confirmed the pod's end: its billing closed. */
  endedAt: text("ended_at"),
});

/** Usage counted per workload (requests and tokens), written in batches like key usage. */
export const workloadUsage = sqliteTable("workload_usage", {
  workloadId: text("workload_id")
    .primaryKey()
    .references(() => workloads.id, { onDelete: "cascade" }),
  requests: int("requests").notNull().default(0),
  errors: int("errors").notNull().default(0),
  inputTokens: int("input_tokens").notNull().default(0),
  outputTokens: int("output_tokens").notNull().default(0),
  lastUsedAt: text("last_used_at"),
});

/** An async job: the request as submitted (`body` holds JSON text or the decoded bytes), its result and run state. */
export const jobs = sqliteTable(
  "jobs",
  {
    id: text("id").primaryKey(),
    workloadId: text("workload_id")
      .notNull()
      .references(() => workloads.id, { onDelete: "cascade" }),
    /** The `x-request-id` of the request that made this row, when one did (data plane, admin API). */
    requestId: text("request_id"),
    /** The submitter's W3C `traceparent` when it sent one: the job's runs join that trace. */
    traceparent: text("traceparent"),
    keyId: text("key_id"),
    kind: text("kind").notNull(),
    body: blob("body", { mode: "buffer" }).notNull(),
    contentType: text("content_type").notNull(),
    context: text("context"),
    status: text("status", { enum: ["queued", "running", "completed", "failed"] }).notNull(),
    data: text("data"),
    runs: int("runs").notNull().default(0),
    createdAt: text("created_at").notNull(),
    startedAt: text("started_at"),
    finishedAt: text("finished_at"),
    /** The host running it (set when claimed): a host that dies has its running jobs put back in the queue. */
    claimedBy: text("claimed_by"),
    /** The OpenAI batch this job is a request of (its webhook goes out for the batch, not the job), else null. */
    batchId: text("batch_id"),
    /** The request's `custom_id` in its batch's input file. */
    customId: text("custom_id"),
  },
  (t) => [
    index("jobs_batch").on(t.batchId),
    index("jobs_status").on(t.status, t.createdAt),
    index("jobs_workload").on(t.workloadId, t.createdAt),
    index("jobs_workload_status").on(t.workloadId, t.status, t.createdAt),
  ],
);

/** A webhook destination of a workload; the secret signs every delivery. */
export const webhooks = sqliteTable(
  "webhooks",
  {
    id: text("id").primaryKey(),
    workloadId: text("workload_id")
      .notNull()
      .references(() => workloads.id, { onDelete: "cascade" }),
    url: text("url").notNull(),
    secret: text("secret").notNull(),
    secretPrefix: text("secret_prefix").notNull(),
    createdAt: text("created_at").notNull(),
    /** Set when the destination is deleted: kept (secret wiped) so its deliveries show `cancelled`. */
    deletedAt: text("deleted_at"),
  },
  (t) => [index("webhooks_workload").on(t.workloadId)],
);

/** One job result to one destination, with its retry schedule. */
export const deliveries = sqliteTable(
  "deliveries",
  {
    id: text("id").primaryKey(),
    jobId: text("job_id")
      .notNull()
      .references(() => jobs.id, { onDelete: "cascade" }),
    webhookId: text("webhook_id")
      .notNull()
      .references(() => webhooks.id, { onDelete: "cascade" }),
    event: text("event").notNull(),
    state: text("state", { enum: ["pending", "delivered", "terminal", "cancelled"] }).notNull(),
    attempts: int("attempts").notNull().default(0),
    nextAttemptAt: int("next_attempt_at"),
    lastStatusCode: int("last_status_code"),
    lastError: text("last_error"),
    deliveredAt: text("delivered_at"),
    createdAt: text("created_at").notNull(),
  },
  (t) => [index("deliveries_due").on(t.state, t.nextAttemptAt), index("deliveries_job").on(t.jobId)],
);

/** Every delivery attempt, for the dashboard's history. */
export const deliveryAttempts = sqliteTable(
  "delivery_attempts",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    deliveryId: text("delivery_id")
      .notNull()
      .references(() => deliveries.id, { onDelete: "cascade" }),
    n: int("n").notNull(),
    at: text("at").notNull(),
    statusCode: int("status_code"),
    error: text("error"),
    durationMs: int("duration_ms").notNull(),
  },
  (t) => [index("delivery_attempts_delivery").on(t.deliveryId)],
);

/**
 * A file of the OpenAI Files API: a `batch` upload (JSONL requests) or a `batch_output` file a batch
 * wrote (its output or error file). The bytes live in the store, so a file is there exactly when its
 * row is (kill -9 and restart included) and every host of a cluster reads the same file.
 */
export const files = sqliteTable(
  "files",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    /** The batch that wrote it (output and error files), else null (an upload). */
    batchId: text("batch_id"),
    keyId: text("key_id"),
    filename: text("filename").notNull(),
    purpose: text("purpose").notNull(),
    bytes: int("bytes").notNull(),
    /** The bytes of a file stored before files were kept in chunks (see `file_chunks`); empty since. */
    content: blob("content", { mode: "buffer" }).notNull(),
    createdAt: text("created_at").notNull(),
  },
  (t) => [index("files_project").on(t.projectId, t.createdAt)],
);

/**
 * A file's bytes in chunks of at most 1 MiB, in order (`idx` from 0), so a file of any size is
 * written, read and sent a chunk at a time. Rows with no `files` row are a write a crash cut short
 * (or a file whose project was deleted) and are swept away.
 */
export const fileChunks = sqliteTable(
  "file_chunks",
  {
    fileId: text("file_id").notNull(),
    idx: int("idx").notNull(),
    data: blob("data", { mode: "buffer" }).notNull(),
  },
  (t) => [primaryKey({ columns: [t.fileId, t.idx] })],
);

/** An OpenAI batch: its requests are jobs (`jobs.batch_id`); counts and files are set when it ends. */
export const batches = sqliteTable(
  "batches",
  {
    id: text("id").primaryKey(),
    projectId: text("project_id")
      .notNull()
      .references(() => projects.id, { onDelete: "cascade" }),
    /** The workload of the per-workload base it was made on; null on the project's base. */
    workloadId: text("workload_id").references(() => workloads.id, { onDelete: "cascade" }),
    /** The slugs of the workloads its requests run on, as a JSON array (who may see it). */
    workloads: text("workloads").notNull(),
    keyId: text("key_id"),
    endpoint: text("endpoint").notNull(),
    inputFileId: text("input_file_id").notNull(),
    completionWindow: text("completion_window").notNull(),
    status: text("status", {
      enum: ["validating", "in_progress", "finalizing", "completed", "failed", "expired", "cancelling", "cancelled"],
    }).notNull(),
    metadata: text("metadata"),
    errors: text("errors"),
    outputFileId: text("output_file_id"),
    errorFileId: text("error_file_id"),
    total: int("total").notNull().default(0),
    completed: int("completed").notNull().default(0),
    failed: int("failed").notNull().default(0),
    createdAt: text("created_at").notNull(),
    inProgressAt: text("in_progress_at"),
    expiresAt: text("expires_at").notNull(),
    finalizingAt: text("finalizing_at"),
    completedAt: text("completed_at"),
    failedAt: text("failed_at"),
    expiredAt: text("expired_at"),
    cancellingAt: text("cancelling_at"),
    cancelledAt: text("cancelled_at"),
  },
  (t) => [index("batches_project").on(t.projectId, t.createdAt), index("batches_status").on(t.status)],
);

/**
 * A model in the store: pulled from a hub or a URL into `<data-dir>/models`, or a local file or
 * folder registered in place. Progress columns are written while it downloads (about once a second).
 */
export const models = sqliteTable(
  "models",
  {
    id: text("id").primaryKey(),
    /** What the user asked for, as they wrote it (`hf:owner/repo:Q4_K_M`, a URL, a path). */
    source: text("source").notNull(),
    /** The source normalised (one row per model: concurrent pulls of it meet here). */
    sourceKey: text("source_key").notNull(),
    kind: text("kind", { enum: ["hf-repo", "hf-file", "hf-quant", "url", "local"] }).notNull(),
    repo: text("repo"),
    revision: text("revision"),
    state: text("state", { enum: ["downloading", "ready", "failed", "cancelled"] }).notNull(),
    reason: text("reason"),
    /** The path a runtime is given (GGUF file, first part of a split one, or the snapshot folder). */
    entry: text("entry"),
    /** The folder the files are in (snapshot, URL download folder, or the local path's). */
    dir: text("dir"),
    /** The files, JSON: [{path, size, sha256}]. */
    files: text("files").notNull().default("[]"),
    bytesTotal: int("bytes_total").notNull().default(0),
    bytesDone: int("bytes_done").notNull().default(0),
    /** What the model is, JSON (architecture, parameters, quantisation, context, layers, heads, KV size). */
    metadata: text("metadata"),
    createdAt: text("created_at").notNull(),
    updatedAt: text("updated_at").notNull(),
    lastUsedAt: text("last_used_at"),
  },
  (t) => [uniqueIndex("models_source_key").on(t.sourceKey)],
);

/**
 * A LoRA adapter served on a base workload (issue 39): its name (what clients call, unique in the
 * project), the model store row its files were pulled into, and what its config says (the base model
 * it was trained on, its rank, its format). `state`: `pulling` until its files are in the store and
 * checked, then `ready`, or `failed` with the reason (a wrong base, a rank the engine cannot take).
 */
export const adapters = sqliteTable(
  "adapters",
  {
    id: text("id").primaryKey(),
    workloadId: text("workload_id")
      .notNull()
      .references(() => workloads.id, { onDelete: "cascade" }),
    projectId: text("project_id").notNull(),
    name: text("name").notNull(),
    /** As the user wrote it (`hf:owner/repo`, a URL, a path). */
    source: text("source").notNull(),
    modelId: text("model_id"),
    state: text("state", { enum: ["pulling", "ready", "failed"] }).notNull(),
    reason: text("reason"),
    /** `peft` (adapter_config.json + safetensors: vLLM, SGLang) or `gguf` (llama.cpp). */
    format: text("format"),
    baseModel: text("base_model"),
    rank: int("rank"),
    bytes: int("bytes").notNull().default(0),
    createdAt: text("created_at").notNull(),
    createdBy: text("created_by"),
  },
  (t) => [uniqueIndex("adapters_project_name").on(t.projectId, t.name), index("adapters_workload").on(t.workloadId)],
);

/**
 * A model pulled because a project's workload named it (not by the admin by hand): the project it
 * counts against (`model_bytes`) and since when no workload uses it, for the collection of unused
 * ones. No foreign key to the project: a deleted project's models are still collected.
 */
export const tenantModels = sqliteTable("tenant_models", {
  modelId: text("model_id")
    .primaryKey()
    .references(() => models.id, { onDelete: "cascade" }),
  projectId: text("project_id").notNull(),
  pulledAt: text("pulled_at").notNull(),
  /** When the collector first saw no workload using it (null: in use, or not looked at yet). */
  unusedSince: text("unused_since"),
});

/**
 * Usage per UTC day, key and workload (inference requests and jobs as they end): what the usage
 * export sums and the daily/monthly token quotas read. Not tied to the key or workload rows, so
 * history stays when they are deleted (`key_id` is "" for the dashboard's playground).
 */
export const usageDaily = sqliteTable(
  "usage_daily",
  {
    day: text("day").notNull(),
    keyId: text("key_id").notNull(),
    workloadId: text("workload_id").notNull(),
    projectId: text("project_id").notNull(),
    requests: int("requests").notNull().default(0),
    errors: int("errors").notNull().default(0),
    inputTokens: int("input_tokens").notNull().default(0),
    outputTokens: int("output_tokens").notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.day, t.keyId, t.workloadId] }), index("usage_daily_project").on(t.projectId, t.day)],
);

/** Who changed what: every admin and control-plane change, with a diff of the changed fields (never secrets). */
export const auditLog = sqliteTable(
  "audit_log",
  {
    id: integer("id").primaryKey({ autoIncrement: true }),
    at: text("at").notNull(),
    /** The `x-request-id` of the request that made this row, when one did (data plane, admin API). */
    requestId: text("request_id"),
    /** `admin` (the token), `session` (a dashboard session opened with the token), `user`, `key` (a control-plane key), `cli`, `system`. */
    actorType: text("actor_type").notNull(),
    actorId: text("actor_id"),
    /** How a person recognises the actor: "admin token", "dashboard session", a key's name and prefix. */
    actorLabel: text("actor_label").notNull(),
    action: text("action").notNull(),
    targetType: text("target_type").notNull(),
    targetId: text("target_id"),
    targetLabel: text("target_label"),
    /** The project the target belongs to, when it does (a project member's audit view shows these). */
    projectId: text("project_id"),
    /** JSON: {field: {from, to}} for updates, the new fields for creations. */
    diff: text("diff").notNull().default("{}"),
  },
  (t) => [
    index("audit_at").on(t.at),
    index("audit_actor").on(t.actorId, t.at),
    index("audit_target").on(t.targetId, t.at),
    index("audit_project").on(t.projectId, t.at),
  ],
);

/**
 * The hosts of a cluster (one row in the embedded store): where each is reached, its certificate
 * for agents to pin, and its last heartbeat. Which one leads is an advisory lock, not a column.
 */
export const hosts = sqliteTable("hosts", {
  id: text("id").primaryKey(),
  name: text("name").notNull(),
  /** The HTTP base URL clients and the dashboard use. */
  url: text("url").notNull(),
  /** The HTTPS base URL agents join and pull work from. */
  agentUrl: text("agent_url").notNull(),
  /** SHA-256 of the host's TLS certificate (agents pin it). */
  fingerprint: text("fingerprint").notNull(),
  version: text("version").notNull(),
  startedAt: text("started_at").notNull(),
  lastSeenAt: text("last_seen_at").notNull(),
  /** Since when this host leads (null: it does not); the advisory lock decides, this only shows it. */
  leadingSince: text("leading_since"),
});

/**
 * Per-key request and token counts of one second, summed over every host of a cluster: each host
 * takes request budget from here in leases, never past a key's rpm over the last minute of rows
 * (a sliding window), and adds the tokens its requests used, so a key's rpm and tpm hold cluster-wide.
 */
export const rateWindows = sqliteTable(
  "rate_windows",
  {
    keyId: text("key_id").notNull(),
    /** The second, as Unix seconds (of the host's clock). */
    second: int("second").notNull(),
    requests: int("requests").notNull().default(0),
    tokens: int("tokens").notNull().default(0),
  },
  (t) => [primaryKey({ columns: [t.keyId, t.second] })],
);

/**
 * The cluster's TLS identity (one row, id `host`): every host of a cluster serves this certificate
 * on its agent port, so one join token (which pins its fingerprint) works against any host, and
 * behind a load balancer. The first host to start with a shared store puts its own there. The
 * embedded store's one host keeps its certificate in its data dir instead.
 */
export const clusterCerts = sqliteTable("cluster_certs", {
  id: text("id").primaryKey(),
  certPem: text("cert_pem").notNull(),
  keyPem: text("key_pem").notNull(),
  createdAt: text("created_at").notNull(),
});

/**
 * Settings changed at run time from the dashboard or `/admin/settings` (one row per setting key of
 * src/config.ts SETTINGS that may change while serving): the value as JSON, who changed it and when.
 * A stored value beats the flag, environment and default; deleting the row returns to them.
 */
export const settings = sqliteTable("settings", {
  key: text("key").primaryKey(),
  value: text("value").notNull(),
  updatedAt: text("updated_at").notNull(),
  updatedBy: text("updated_by"),
});

/**
 * Completed chart buckets kept across restarts: one row per series (`kind`: "workload" or "gpu";
 * `subject`: the workload id, or worker id and GPU index), bucket start (unix ms) and host that
 * recorded it; `data` holds the bucket's figures as JSON. A restart leaves a gap, never zeros.
 */
export const seriesBuckets = sqliteTable(
  "series_buckets",
  {
    kind: text("kind").notNull(),
    subject: text("subject").notNull(),
    t: int("t").notNull(),
    hostId: text("host_id").notNull(),
    data: text("data").notNull(),
  },
  (t) => [primaryKey({ columns: [t.kind, t.subject, t.t, t.hostId] }), index("series_buckets_t").on(t.t)],
);

/**
 * The request inspector: one row per data-plane request and job run (what a workload's page lists),
 * written in batches off the request path; `spans` is the request's timeline as JSON
 * ([{name, start_ms, end_ms, attrs}], times from the request's arrival). Kept as long as jobs are.
 */
export const requestLog = sqliteTable(
  "request_log",
  {
    id: text("id").primaryKey(),
    /** The id the client's answer carried (`x-request-id`: its own when it sent one, else `id`); null for job runs. */
    requestId: text("request_id"),
    at: text("at").notNull(),
    /** The workload that answered; "" for a request refused before one was chosen (a key's limit, a quota). */
    workloadId: text("workload_id").notNull(),
    projectId: text("project_id").notNull(),
    keyId: text("key_id"),
    /** `request` (synchronous) or `job`. */
    kind: text("kind").notNull(),
    route: text("route").notNull(),
    model: text("model"),
    status: int("status").notNull(),
    errorCode: text("error_code"),
    /** Why it failed, in words: inferd's message or the runtime's own (cut to 500 characters); null when it did not. */
    errorMessage: text("error_message"),
    /** Where it came from: null for a client of the API, `playground` for the dashboard's playground. */
    source: text("source"),
    /**
     * The workloads tried before the one that answered (a fallback route), as JSON
     * [{workload_id, status, error_code}]; null when the first one answered.
     */
    fellBackFrom: text("fell_back_from"),
    tokensIn: int("tokens_in"),
    tokensOut: int("tokens_out"),
    queueMs: int("queue_ms"),
    ttftMs: int("ttft_ms"),
    totalMs: int("total_ms").notNull(),
    assignmentId: text("assignment_id"),
    workerId: text("worker_id"),
    hostId: text("host_id"),
    traceId: text("trace_id"),
    spans: text("spans").notNull().default("[]"),
    /** Whether the bodies were captured (request_bodies holds them). */
    captured: integer("captured", { mode: "boolean" }).notNull().default(false),
  },
  (t) => [
    index("request_log_workload").on(t.workloadId, t.at),
    index("request_log_at").on(t.at),
    index("request_log_project").on(t.projectId, t.at),
    index("request_log_key").on(t.keyId, t.at),
  ],
);

/** Request and answer bodies of a workload with capture on (`workloads.capture_until`); kept as long as jobs are. */
export const requestBodies = sqliteTable("request_bodies", {
  requestId: text("request_id").primaryKey(),
  workloadId: text("workload_id").notNull(),
  at: text("at").notNull(),
  requestType: text("request_type"),
  request: blob("request", { mode: "buffer" }),
  responseType: text("response_type"),
  response: blob("response", { mode: "buffer" }),
  /** True when a body was longer than the capture limit and was cut. */
  truncated: integer("truncated", { mode: "boolean" }).notNull().default(false),
});
