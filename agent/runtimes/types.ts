import type { GpuInfo, ReplicaSpec } from "../protocol";

/** What a launcher may use to build a launch: a free port, where to install, which tools exist. */
export interface LaunchContext {
  spec: ReplicaSpec;
  /** A free loopback port, used when the command sets none. */
  freePort: number;
  /** The replica's GPUs as the agent last probed them (empty when unknown or none). */
  gpus: GpuInfo[];
  /** The agent's data dir (runtime installs go under `<dataDir>/runtimes`). */
  dataDir: string;
  /** The agent's environment (PATH, OLLAMA_HOST…). */
  env: Record<string, string | undefined>;
  /** Full path of an executable on PATH, or null. */
  which(cmd: string): string | null;
  /** How to start the built-in llama.cpp runtime: argv prefix and extra env. */
  builtinLlama(): { argv: string[]; env: Record<string, string> };
}

/** A step that runs a command to completion before the runtime starts (installs, pulls). */
export interface PrepStep {
  /** Shown in the logs and in the state reason while it runs. */
  title: string;
  /** A command to run to completion under a PTY… */
  argv?: string[];
  /** …or a model pull through the Ollama API (when the `ollama` CLI is not installed). */
  ollamaPull?: { baseUrl: string; model: string };
  env?: Record<string, string>;
  /** Skip the step when this returns true (e.g. the version is already installed). */
  done?: () => boolean;
  /** Called before the step runs (e.g. clear an interrupted install). */
  before?: () => void;
  /** Called after the step succeeds (e.g. mark the install complete). */
  after?: () => void;
}

/** How to run one replica: the process (if any), where it listens, how to tell it is ready. */
export interface LaunchPlan {
  /** The runtime process; absent when the replica is served by a shared daemon (Ollama). */
  argv?: string[];
  env: Record<string, string>;
  /** Base URL of the runtime's OpenAI-style API. */
  baseUrl: string;
  /** The loopback port the runtime process listens on (its listener must be the process's own). */
  port?: number;
  /** Ready when any answers 2xx. */
  healthUrls: string[];
  /** Steps before the first start; the replica is `installing` meanwhile. */
  prep: PrepStep[];
  /**
   * A shared daemon to keep running for this replica (Ollama's `ollama serve`); it is started with
   * the GPUs of every replica it serves (`gpus`: this one's).
   */
  daemon?: { key: string; argv: string[]; env: Record<string, string>; gpus: number[]; healthUrl: string };
  /**
   * A model the shared daemon may unload (Ollama's keep_alive): whether it is loaded now, and a
   * request that loads it. The replica is ready only while it is loaded.
   */
  resident?: { loaded(signal: AbortSignal): Promise<boolean>; load(signal: AbortSignal): Promise<void> };
  /** The runtime's API key when its command sets `--api-key`. */
  apiKey?: string;
  /** True when the command ran the built-in llama.cpp runtime instead of llama-server. */
  builtin?: boolean;
  /** Requests the runtime serves at once (its batch capacity: -np, --max-num-seqs, …). */
  slots?: number;
  /**
   * A custom server's routes: inferd's route under `/v1/` → the server's own path (requests on
   * other routes never reach it). Absent: every route is served at its own path.
   */
  paths?: Record<string, string>;
}

/** A backend's launcher: turns a replica spec into a launch plan. Pure apart from `ctx`. */
export type Launcher = (ctx: LaunchContext) => LaunchPlan;
