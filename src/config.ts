import { homedir } from "node:os";
import { join } from "node:path";
import { DEFAULT_FORBIDDEN_FLAGS, DEFAULT_PROGRAMS, POLICY_SETTINGS as P } from "../agent/launch-policy";
import { LOG_LEVELS } from "./log";
import { scheduleProblem } from "./webhooks/schedule";
import { keyLimitsProblem } from "./limits/defaults";

/** The kinds of value a setting can hold. */
type Kind = "string" | "int" | "bool" | "list";

/** One setting, named once: its flag, its environment variable, its type, default and meaning. */
interface Setting {
  flag: string;
  env: string;
  kind: Kind;
  default: string | number | boolean | string[] | undefined;
  description: string;
  secret?: boolean;
  /** Can change while serving (the Settings page, `PATCH /admin/settings`); others need a restart. */
  runtime?: true;
  /** A further check of the converted value: why it cannot be used, or null. */
  check?: (value: never) => string | null;
}

/** Refuses values outside `allowed`. */
const oneOf = (allowed: readonly string[]) => (v: string) =>
  allowed.includes(v) ? null : `must be one of ${allowed.join(", ")}, got "${v}"`;

/** Refuses text that is not an http(s) URL. */
/** A token sent in an HTTP header: visible ASCII only (no spaces, CR, LF or other control characters). */
const headerToken = (v: string) =>
  /^[\x21-\x7e]+$/.test(v)
    ? null
    : "must be one word of visible ASCII characters (no spaces, line breaks or control characters)";
const httpUrl = (v: string) =>
  /^https?:\/\//i.test(v) && URL.canParse(v) ? null : `must be an http:// or https:// URL, got "${v}"`;

/** The roles a user can have (single sign-on's default role is one of them). */
const ROLES = ["admin", "operator", "viewer"] as const;

/** Every setting of `inferd serve`; `inferd config` prints this table with the values in force. */
export const SETTINGS = {
  host: {
    flag: "--host",
    env: "INFERD_HOST",
    kind: "string",
    default: "127.0.0.1",
    description: "Address to listen on (0.0.0.0 for LAN clients).",
  },
  port: {
    flag: "--port",
    env: "INFERD_PORT",
    kind: "int",
    default: 8420,
    description: "HTTP port (0 picks a free one).",
  },
  dataDir: {
    flag: "--data-dir",
    env: "INFERD_DATA_DIR",
    kind: "string",
    default: join(homedir(), ".inferd"),
    description: "Where the SQLite store, logs, runtimes and the admin token live.",
  },
  databaseUrl: {
    flag: "--database-url",
    env: "INFERD_DATABASE_URL",
    kind: "string",
    default: undefined,
    description:
      "Cluster mode: a postgres:// URL makes that database the store, shared by every inferd host pointed at it (unset: the embedded SQLite store in the data dir).",
    secret: true,
  },
  adminToken: {
    flag: "--admin-token",
    env: "INFERD_ADMIN_TOKEN",
    kind: "string",
    default: undefined,
    description: "Admin token for /admin and the dashboard; generated and saved in the data dir when unset.",
    secret: true,
  },
  tlsPort: {
    flag: "--tls-port",
    env: "INFERD_TLS_PORT",
    kind: "int",
    default: undefined,
    description:
      "HTTPS port, where remote agents join (default: --port + 1, or a free one with --port 0; 0 picks a free one).",
  },
  tlsCert: {
    flag: "--tls-cert",
    env: "INFERD_TLS_CERT",
    kind: "string",
    default: undefined,
    description: "Certificate (PEM) for HTTPS; default: one generated at first start in the data dir.",
  },
  tlsKey: {
    flag: "--tls-key",
    env: "INFERD_TLS_KEY",
    kind: "string",
    default: undefined,
    description: "Private key (PEM) of --tls-cert.",
  },
  advertiseHost: {
    flag: "--advertise-host",
    env: "INFERD_ADVERTISE_HOST",
    kind: "string",
    default: undefined,
    description:
      "Host name or address other machines use to reach this host (join commands, client snippets); default: this machine's LAN IPv4 address (else its name) when listening on 0.0.0.0 or ::, the bound address otherwise.",
  },
  joinUrl: {
    flag: "--join-url",
    env: "INFERD_JOIN_URL",
    kind: "string",
    default: undefined,
    description:
      "inferd agent: the host (https://HOST:PORT) to join at first start, when the data dir has not joined one yet (with --join-token); later starts reconnect as before.",
  },
  joinToken: {
    flag: "--join-token",
    env: "INFERD_JOIN_TOKEN",
    kind: "string",
    default: undefined,
    description:
      "inferd agent: the join token used with --join-url (a reusable pool token lets every agent of a pool join with the same one).",
    secret: true,
  },
  workerTimeoutMs: {
    flag: "--worker-timeout-ms",
    env: "INFERD_WORKER_TIMEOUT_MS",
    kind: "int",
    default: 30_000,
    description: "A remote worker silent this long is offline: its work goes elsewhere.",
  },
  maxBodyBytes: {
    flag: "--max-body-bytes",
    env: "INFERD_MAX_BODY_BYTES",
    kind: "int",
    default: 1 << 20,
    description: "Largest JSON body accepted on /api and /admin.",
  },
  maxDataBodyBytes: {
    flag: "--max-data-body-bytes",
    env: "INFERD_MAX_DATA_BODY_BYTES",
    kind: "int",
    default: 100 << 20,
    description: "Largest request body accepted on the data plane (/endpoint, including uploads and jobs).",
  },
  maxBufferedBytes: {
    flag: "--max-buffered-bytes",
    env: "INFERD_MAX_BUFFERED_BYTES",
    kind: "int",
    default: 256 << 20,
    description:
      "Request-body bytes the data plane holds at once across all requests (503 with Retry-After past it; at least --max-data-body-bytes).",
  },
  maxJobBytesPerProject: {
    flag: "--max-job-bytes-per-project",
    env: "INFERD_MAX_JOB_BYTES_PER_PROJECT",
    kind: "int",
    default: 1 << 30,
    description: "Stored async-job bytes (bodies and results) per project; past it new jobs get 429.",
  },
  localAgent: {
    flag: "--local-agent",
    env: "INFERD_LOCAL_AGENT",
    kind: "bool",
    default: true,
    description: "Run a GPU agent for this machine inside serve (--no-local-agent to disable).",
  },
  queueWaitMs: {
    flag: "--queue-wait-ms",
    env: "INFERD_QUEUE_WAIT_MS",
    kind: "int",
    default: 300_000,
    description: "How long a request may wait for a free slot before 503 (Retry-After).",
  },
  queueMax: {
    flag: "--queue-max",
    env: "INFERD_QUEUE_MAX",
    kind: "int",
    default: 1000,
    description: "How many requests may wait per workload before 429 (Retry-After).",
  },
  telemetryMs: {
    flag: "--telemetry-interval-ms",
    env: "INFERD_TELEMETRY_INTERVAL_MS",
    kind: "int",
    default: 5000,
    description: "How often agents probe GPUs and report telemetry.",
  },
  startTimeoutMs: {
    flag: "--runtime-start-timeout-ms",
    env: "INFERD_RUNTIME_START_TIMEOUT_MS",
    kind: "int",
    default: 1_800_000,
    description: "Longest a runtime may take to become ready.",
  },
  stallTimeoutMs: {
    flag: "--runtime-stall-timeout-ms",
    env: "INFERD_RUNTIME_STALL_TIMEOUT_MS",
    kind: "int",
    default: 300_000,
    description: "A starting runtime silent this long counts as failed.",
  },
  restartBackoffMs: {
    flag: "--restart-backoff-ms",
    env: "INFERD_RESTART_BACKOFF_MS",
    kind: "int",
    default: 1000,
    description: "First delay before restarting a crashed runtime (doubles per crash, up to 60 s).",
  },
  maxCrashes: {
    flag: "--max-crashes",
    env: "INFERD_MAX_CRASHES",
    kind: "int",
    default: 5,
    description: "Crashes within 10 minutes after which a runtime is marked failed.",
  },
  allowPrivateWebhooks: {
    flag: "--allow-private-webhooks",
    env: "INFERD_ALLOW_PRIVATE_WEBHOOKS",
    kind: "bool",
    default: false,
    runtime: true,
    description: "Allow webhook receivers on LAN and loopback addresses (off: public addresses only).",
  },
  allowPrivateProviders: {
    flag: "--allow-private-providers",
    env: "INFERD_ALLOW_PRIVATE_PROVIDERS",
    kind: "bool",
    default: false,
    description:
      "Allow external-provider workloads at LAN and loopback addresses, and over http:// (off: https:// to public addresses only, as webhook receivers).",
  },
  secretsKey: {
    flag: "--secrets-key",
    env: "INFERD_SECRETS_KEY",
    kind: "string",
    default: undefined,
    secret: true,
    description:
      "The key (32 bytes, base64) that encrypts the API keys of external-provider workloads at rest; unset: one made in <data-dir>/secrets.key. Cluster mode needs it, the same on every host.",
  },
  runpodApiKey: {
    flag: "--runpod-api-key",
    env: "INFERD_RUNPOD_API_KEY",
    kind: "string",
    default: undefined,
    secret: true,
    description: "Cloud GPU workers on RunPod: the API key inferd creates and terminates pods with (unset: no RunPod).",
  },
  runpodApiUrl: {
    flag: "--runpod-api-url",
    env: "INFERD_RUNPOD_API_URL",
    kind: "string",
    default: "https://rest.runpod.io/v1",
    description: "RunPod's REST API.",
  },
  kubeApiUrl: {
    flag: "--kube-api-url",
    env: "INFERD_KUBE_API_URL",
    kind: "string",
    default: undefined,
    description:
      "Cloud GPU workers on Kubernetes: the API server (https://…) inferd creates agent pods through (unset: no Kubernetes).",
  },
  kubeToken: {
    flag: "--kube-token",
    env: "INFERD_KUBE_TOKEN",
    kind: "string",
    default: undefined,
    secret: true,
    description: "Kubernetes: a service account's bearer token that may create, read and delete pods in the namespace.",
  },
  kubeNamespace: {
    flag: "--kube-namespace",
    env: "INFERD_KUBE_NAMESPACE",
    kind: "string",
    default: "default",
    description: "Kubernetes: the namespace of the agent pods.",
  },
  kubeGpuHourlyCost: {
    flag: "--kube-gpu-hourly-cost",
    env: "INFERD_KUBE_GPU_HOURLY_COST",
    kind: "string",
    default: undefined,
    description:
      "Kubernetes: what one GPU costs per hour in dollars (e.g. 2.10), for the billed cost; unset: time only.",
  },
  cloudImage: {
    flag: "--cloud-image",
    env: "INFERD_CLOUD_IMAGE",
    kind: "string",
    default: "ghcr.io/inferd/inferd:latest",
    description: "The container image of cloud workers' pods: it runs `inferd agent join <url> --token <token>`.",
  },
  cloudJoinUrl: {
    flag: "--cloud-join-url",
    env: "INFERD_CLOUD_JOIN_URL",
    kind: "string",
    default: undefined,
    description: "The HTTPS URL cloud pods reach this host's agent endpoint at (unset: the join URL agents are shown).",
  },
  cloudConfirmMs: {
    flag: "--cloud-confirm-ms",
    env: "INFERD_CLOUD_CONFIRM_MS",
    kind: "int",
    default: 30_000,
    description:
      "How long deleting a cloud worker waits for the provider to confirm its pod terminated (and the longest one call to a cloud provider may take).",
  },
  cloudRetryMs: {
    flag: "--cloud-retry-ms",
    env: "INFERD_CLOUD_RETRY_MS",
    kind: "int",
    default: 30_000,
    description:
      "The first wait before a termination the provider did not confirm is tried again (doubling, at most 30 min).",
  },
  webhookCaFile: {
    flag: "--webhook-ca-file",
    env: "INFERD_WEBHOOK_CA_FILE",
    kind: "string",
    default: undefined,
    description: "Extra CA certificate(s) (PEM) trusted for webhook receivers, e.g. a self-signed one.",
  },
  webhookRetrySchedule: {
    flag: "--webhook-retry-schedule",
    env: "INFERD_WEBHOOK_RETRY_SCHEDULE",
    kind: "string",
    default: "1m,5m,15m,1h,6h",
    runtime: true,
    check: scheduleProblem,
    description:
      "Delays before webhook delivery attempts 2, 3, … (ms, s, m, h; comma-separated; at most 20, each from 100ms to 7 days); after the last one a delivery is terminal.",
  },
  webhookDnsServers: {
    flag: "--webhook-dns-servers",
    env: "INFERD_WEBHOOK_DNS_SERVERS",
    kind: "list",
    default: [],
    description: "DNS servers (ip[:port], comma-separated) for webhook hosts; default: the system resolver.",
  },
  webhookConcurrency: {
    flag: "--webhook-concurrency",
    env: "INFERD_WEBHOOK_CONCURRENCY",
    kind: "int",
    default: 64,
    description: "Deliveries in flight at once.",
  },
  auditRetentionDays: {
    flag: "--audit-retention-days",
    env: "INFERD_AUDIT_RETENTION_DAYS",
    kind: "int",
    default: 90,
    description: "Audit log entries are deleted after this many days.",
  },
  jobRetentionHours: {
    flag: "--job-retention-hours",
    env: "INFERD_JOB_RETENTION_HOURS",
    kind: "int",
    default: 168,
    description: "Finished jobs (with all deliveries over) are deleted after this long.",
  },
  backupIntervalHours: {
    flag: "--backup-interval-hours",
    env: "INFERD_BACKUP_INTERVAL_HOURS",
    kind: "int",
    default: 24,
    description: "Hours between automatic backups of the store into <data-dir>/backups while serving (0: off).",
  },
  backupKeep: {
    flag: "--backup-keep",
    env: "INFERD_BACKUP_KEEP",
    kind: "int",
    default: 3,
    description: "Backups kept in <data-dir>/backups; older ones are removed (0 keeps all).",
  },
  minFreeDiskMb: {
    flag: "--min-free-disk-mb",
    env: "INFERD_MIN_FREE_DISK_MB",
    kind: "int",
    default: 64,
    description: "Least free space (MiB) on the data dir's file system for serve to start.",
  },
  metricsToken: {
    flag: "--metrics-token",
    env: "INFERD_METRICS_TOKEN",
    kind: "string",
    default: undefined,
    description: "A token that may read GET /metrics only (besides the admin token).",
    secret: true,
  },
  modelGcAfterHours: {
    flag: "--model-gc-after-hours",
    env: "INFERD_MODEL_GC_AFTER_HOURS",
    kind: "int",
    default: 24,
    description:
      "A model pulled for a project's workload (not by the admin by hand) that no workload has used this long is removed (0: never).",
  },
  modelDownloadConcurrency: {
    flag: "--model-download-concurrency",
    env: "INFERD_MODEL_DOWNLOAD_CONCURRENCY",
    kind: "int",
    default: 4,
    description: "Model files downloaded at once across all pulls.",
  },
  clusterAddress: {
    flag: "--cluster-address",
    env: "INFERD_CLUSTER_ADDRESS",
    kind: "string",
    default: undefined,
    description:
      "The address (IP or host name) other members of a multi-node group reach this machine's agent at, for NCCL, Ray and llama.cpp RPC traffic (unencrypted: keep it on a private network). Unset: this machine hosts no multi-node members.",
  },
  runtimeEnv: {
    flag: "--runtime-env",
    env: "INFERD_RUNTIME_ENV",
    kind: "list",
    default: [],
    description:
      "Environment variables runtimes get beyond the allow-list (NAME or PREFIX*, comma-separated); INFERD_* never.",
  },
  policyVllmPrograms: {
    ...P.vllm,
    kind: "list",
    default: DEFAULT_PROGRAMS.vllm,
    description:
      "Launch policy: command prefixes a tenant's (control-plane key's) vLLM / vLLM-Omni workload may start with.",
  },
  policySglangPrograms: {
    ...P.sglang,
    kind: "list",
    default: DEFAULT_PROGRAMS.sglang,
    description: "Launch policy: command prefixes a tenant's SGLang workload may start with.",
  },
  policyLlamacppPrograms: {
    ...P.llamacpp,
    kind: "list",
    default: DEFAULT_PROGRAMS.llamacpp,
    description: "Launch policy: command prefixes a tenant's llama.cpp workload may start with.",
  },
  policyCustomPrograms: {
    ...P.custom,
    kind: "list",
    default: DEFAULT_PROGRAMS.custom,
    description:
      "Launch policy: programs a tenant's custom-server workload may start with (none by default: custom servers are the operator's).",
  },
  policyForbiddenFlags: {
    ...P.forbidden_flags,
    kind: "list",
    default: DEFAULT_FORBIDDEN_FLAGS,
    description: "Launch policy: flags tenants may not pass (`--flag:path`: only with a file path as its value).",
  },
  policyModelPaths: {
    ...P.model_paths,
    kind: "list",
    default: [],
    description: "Launch policy: directories tenants' commands may read model files from (default: <data-dir>/models).",
  },
  policyTenantInstalls: {
    ...P.tenant_installs,
    kind: "bool",
    default: false,
    description: "Launch policy: let tenants set vllm_version / sglang_version (package installs).",
  },
  policyTenantMultinode: {
    ...P.tenant_multinode,
    kind: "bool",
    default: false,
    description:
      "Launch policy: let tenants set nodes > 1 (a workload spanning several machines, whose members talk over the cluster network).",
  },
  allowPrivateModelUrls: {
    ...P.private_model_urls,
    kind: "bool",
    default: false,
    description:
      "Launch policy: let tenants' model URLs (llama.cpp -mu) reach loopback and private addresses, and use http://.",
  },
  hfToken: {
    flag: "--hf-token",
    env: "HF_TOKEN",
    kind: "string",
    default: undefined,
    runtime: true,
    secret: true,
    check: headerToken,
    description:
      "Hugging Face access token for gated and private repos: inferd serve's model pulls and searches send it to HF_ENDPOINT (runtimes that download by themselves, and remote agents, use the HF_TOKEN of their own environment).",
  },
  defaultKeyLimits: {
    flag: "--default-key-limits",
    env: "INFERD_DEFAULT_KEY_LIMITS",
    kind: "list",
    default: [],
    runtime: true,
    check: keyLimitsProblem,
    description:
      "Limits every API key gets where it has none of its own: name=N, comma-separated (rpm, tpm, max_concurrent, tokens_per_day, tokens_per_month).",
  },
  oidcIssuer: {
    flag: "--oidc-issuer",
    env: "INFERD_OIDC_ISSUER",
    kind: "string",
    default: undefined,
    check: httpUrl,
    description:
      "Single sign-on: the OpenID Connect provider's issuer URL (e.g. https://keycloak.example.com/realms/acme); its discovery document is read from <issuer>/.well-known/openid-configuration. Unset: no single sign-on.",
  },
  oidcClientId: {
    flag: "--oidc-client-id",
    env: "INFERD_OIDC_CLIENT_ID",
    kind: "string",
    default: undefined,
    description: "Single sign-on: this server's client id at the provider.",
  },
  oidcClientSecret: {
    flag: "--oidc-client-secret",
    env: "INFERD_OIDC_CLIENT_SECRET",
    kind: "string",
    default: undefined,
    secret: true,
    description: "Single sign-on: the client's secret (a confidential client); unset: a public client (PKCE only).",
  },
  oidcDefaultRole: {
    flag: "--oidc-default-role",
    env: "INFERD_OIDC_DEFAULT_ROLE",
    kind: "string",
    default: "viewer",
    check: oneOf(ROLES),
    description:
      "Single sign-on: the role of a user created at first sign-in when --oidc-role-claim names none (admin, operator or viewer).",
  },
  oidcRoleClaim: {
    flag: "--oidc-role-claim",
    env: "INFERD_OIDC_ROLE_CLAIM",
    kind: "string",
    default: undefined,
    description:
      "Single sign-on: a claim (e.g. groups; a dotted path such as realm_access.roles works too) whose values inferd-admin, inferd-operator or inferd-viewer set the user's role at every sign-in (the highest wins; none: --oidc-default-role).",
  },
  oidcRedirectUrl: {
    flag: "--oidc-redirect-url",
    env: "INFERD_OIDC_REDIRECT_URL",
    kind: "string",
    default: undefined,
    check: httpUrl,
    description:
      "Single sign-on: the callback URL registered at the provider, when it is not <the dashboard's own URL>/auth/oidc/callback (e.g. behind a proxy that rewrites the host).",
  },
  logLevel: {
    flag: "--log-level",
    env: "INFERD_LOG_LEVEL",
    kind: "string",
    default: "info",
    runtime: true,
    check: oneOf(LOG_LEVELS),
    description: "What the server log writes: error, warn, info or debug (each includes the ones before it).",
  },
} satisfies Record<string, Setting>;

/** The value type of each kind of setting. */
type KindValue = { string: string; int: number; bool: boolean; list: string[] };

/** A setting's resolved value: its kind's type, or undefined when it has no default. */
type ValueOf<S> = S extends { kind: infer K extends Kind; default: infer D }
  ? KindValue[K] | (undefined extends D ? undefined : never)
  : never;

/** The resolved value of every setting: derived from SETTINGS, so each setting is named once. */
export type Config = { -readonly [K in keyof typeof SETTINGS]: ValueOf<(typeof SETTINGS)[K]> };

/** A command-line or environment value that cannot be used; the CLI prints its message and exits 2. */
export class ConfigError extends Error {}

/** A value of `kind` from text, as flags and environment variables give it; throws `ConfigError` naming `name`. */
function convertKind(name: string, kind: Kind, raw: string): string | number | boolean | string[] {
  switch (kind) {
    case "int": {
      const n = Number(raw);
      if (!Number.isInteger(n) || n < 0) throw new ConfigError(`${name} must be a whole number, got "${raw}"`);
      return n;
    }
    case "bool":
      if (/^(1|true|yes|on)$/i.test(raw)) return true;
      if (/^(0|false|no|off)$/i.test(raw)) return false;
      throw new ConfigError(`${name} must be true or false, got "${raw}"`);
    case "list":
      return raw
        .split(",")
        .map((s) => s.trim())
        .filter(Boolean);
    default:
      return raw;
  }
}

/** A setting's value from text, converted and checked; throws `ConfigError` naming `name`. */
function convert(name: string, s: Setting, raw: string): string | number | boolean | string[] {
  const value = convertKind(name, s.kind, raw);
  const problem = s.check?.(value as never);
  if (problem) throw new ConfigError(problem.startsWith("must") ? `${name} ${problem}` : `${name}: ${problem}`);
  return value;
}

/** Where a setting's value in force came from. */
export type SettingSource = "flag" | "env" | "default" | "dashboard";

/** The source of each value of a config `loadConfig` made (a config made otherwise has none). */
const sources = new WeakMap<Config, Record<string, SettingSource>>();

/** Where each value of `config` came from: flag, environment or default (all "default" when unknown). */
export function settingSources(config: Config): Record<keyof Config, SettingSource> {
  const known = sources.get(config) ?? {};
  return Object.fromEntries(Object.keys(SETTINGS).map((k) => [k, known[k] ?? "default"])) as Record<
    keyof Config,
    SettingSource
  >;
}

/** A setting's key by name, or undefined. */
export const settingOf = (key: string): (Setting & { key: keyof Config }) | undefined =>
  Object.hasOwn(SETTINGS, key)
    ? { ...(SETTINGS[key as keyof Config] as Setting), key: key as keyof Config }
    : undefined;

/**
 * A value for a setting as the dashboard sends it (JSON: text as a flag takes it, or a number,
 * boolean or list), converted and checked exactly as the flag's value; throws `ConfigError`.
 * @example convertSetting("webhookRetrySchedule", "1s,2s") // → "1s,2s"
 */
export function convertSetting(key: keyof Config, value: unknown): string | number | boolean | string[] {
  const s = SETTINGS[key] as Setting;
  const raw =
    Array.isArray(value) && value.every((v) => typeof v === "string")
      ? value.join(",")
      : ["string", "number", "boolean"].includes(typeof value)
        ? String(value)
        : undefined;
  if (raw === undefined)
    throw new ConfigError(
      `${s.flag} takes ${s.kind === "list" ? "a list of text" : s.kind === "int" ? "a whole number" : s.kind === "bool" ? "true or false" : "text"}`,
    );
  return convert(s.flag, s, raw);
}

/**
 * Resolves settings: flag beats environment beats default. Returns the config and the arguments
 * that were not settings (the subcommand's own).
 * @example loadConfig(["--port", "0", "serve"], {}) // → { config: {port: 0, …}, rest: ["serve"] }
 */
export function loadConfig(
  argv: string[],
  env: Record<string, string | undefined>,
): { config: Config; rest: string[] } {
  const values: Record<string, unknown> = {};
  const from: Record<string, SettingSource> = {};
  for (const [key, s] of Object.entries(SETTINGS) as [string, Setting][]) {
    const fromEnv = env[s.env];
    const set = fromEnv !== undefined && fromEnv !== "";
    values[key] = set ? convert(s.env, s, fromEnv) : s.default;
    from[key] = set ? "env" : "default";
  }
  const rest: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    const [flag, inline] =
      arg.startsWith("--") && arg.includes("=")
        ? [arg.slice(0, arg.indexOf("=")), arg.slice(arg.indexOf("=") + 1)]
        : [arg, undefined];
    const entry = (Object.entries(SETTINGS) as [string, Setting][]).find(
      ([, s]) => s.flag === flag || (s.kind === "bool" && flag === `--no-${s.flag.slice(2)}`),
    );
    if (!entry) {
      rest.push(arg);
      continue;
    }
    const [key, s] = entry;
    from[key] = "flag";
    if (s.kind === "bool") {
      values[key] = flag.startsWith("--no-") ? false : inline === undefined ? true : convert(s.flag, s, inline);
      continue;
    }
    const raw = inline ?? argv[++i];
    if (raw === undefined) throw new ConfigError(`${s.flag} needs a value`);
    values[key] = convert(s.flag, s, raw);
  }
  const config = values as Config;
  sources.set(config, from);
  return { config, rest };
}

/** The settings table with the values in force, secrets hidden, for `inferd config`. */
export function describeConfig(config: Config): string {
  const rows = (Object.entries(SETTINGS) as [keyof Config, Setting][]).map(([key, s]) => {
    const v = config[key];
    const shown = s.secret ? (v ? "(set)" : "(unset)") : JSON.stringify(v);
    return `${s.flag.padEnd(22)} ${s.env.padEnd(28)} ${String(shown).padEnd(24)} ${s.description}`;
  });
  return ["flag                   env                          value                    meaning", ...rows].join("\n");
}
