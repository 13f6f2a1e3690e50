/**
 * What inferd knows of one engine (vLLM, vLLM-Omni, SGLang, llama.cpp, Ollama), written once in the
 * engine's own file (`agent/engines/<name>.ts`, with its launcher): how a pinned version is installed,
 * which flags mean what, when it is ready, how many requests it serves at once, the keys and
 * environment it reads, the routes it serves itself, and the fake that stands for it in tests. Every
 * place that used to ask "which backend is this?" asks the descriptor instead.
 */
import type { z } from "zod";
import type { PolicyFamily } from "../launch-flags";
import type { Launcher } from "../runtimes/types";

/** How a pinned version of an engine is installed into its own venv. */
export interface PinnedInstall {
  /** The requirement to install (`vllm-omni==0.11.0`, `sglang[all]==0.5.2`). */
  requirement: string;
  /** Further requirements the same install needs (Ray for a multi-node vLLM ≥ 0.18). */
  extra: string[];
  /** Whether pre-releases must be allowed (`--prerelease=allow` / `--pre`). */
  prerelease: boolean;
}

/** What the engine serves itself, for a version; a route left undefined is learnt by asking (a 404 says no). */
export interface NativeRoutes {
  /** Anthropic's `POST /v1/messages`. */
  messages?: boolean;
  /** OpenAI's `POST /v1/responses`. */
  responses?: boolean;
  /** How it counts a chat prompt's tokens: chat-aware `/tokenize` (vLLM), `/apply-template` + `/tokenize` (llama.cpp), or a one-token generation. */
  tokenize: "vllm" | "llamacpp" | "generate";
}

/** How many requests a runtime serves at once, and why inferd assumes that number (in words). */
export interface Capacity {
  slots: number;
  why: string;
}

/** What the descriptor reads to work out a runtime's capacity. */
export interface CapacityInput {
  /** The command's words (after inferd's additions). */
  args: string[];
  /** The GPUs the replica has, as the agent probed them (empty when unknown or none). */
  gpus: { name: string; memory_total_mib: number }[];
  /** The agent's environment (Ollama's OLLAMA_NUM_PARALLEL). */
  env: Record<string, string | undefined>;
  /** The engine's version when the workload pins one (undefined: whatever is installed, taken as current). */
  version?: string;
}

/** One HTTP call inferd makes to a runtime (relative to its base URL). */
export interface RuntimeCall {
  method: "GET" | "POST";
  /** Path and query (`/sleep?level=1`). */
  path: string;
  /** A JSON body (absent: none). */
  body?: unknown;
}

/** A sleep level: 1 holds the weights in host RAM, 2 drops them and keeps the process. */
export type SleepLevel = 1 | 2;

/**
 * How a runtime sleeps (frees its GPU memory, keeping its process) and wakes, as the engine serves
 * it. Absent on an engine that cannot: its replicas stop instead.
 */
export interface EngineSleep {
  /** The levels it has. */
  levels: SleepLevel[];
  /** The command words and environment a runtime needs so it can sleep (nothing added when already there). */
  enable(args: string[], env: Record<string, string>): { args: string[]; env: Record<string, string> };
  /** The calls that put it to sleep at `level`, in order (each must answer 2xx). */
  sleep(level: SleepLevel): RuntimeCall[];
  /** The calls that wake it from `level`, in order (level 2 reads the weights again). */
  wake(level: SleepLevel): RuntimeCall[];
  /** How to ask whether it sleeps, when it can say. */
  isSleeping?: { call: RuntimeCall; read(body: unknown): boolean };
}

/** An adapter a replica serves: its name (what clients call) and its path on the replica's machine. */
export interface AdapterPath {
  name: string;
  path: string;
}

/**
 * How a runtime serves LoRA adapters on its base model, as the engine does it. `runtime`: adapters
 * are loaded and unloaded while it runs (`load`/`unload`, vLLM and SGLang); otherwise they are given at
 * launch (`enable` lists them: llama.cpp), and a changed set restarts the replica.
 */
export interface EngineLora {
  runtime: boolean;
  /**
   * The command words and environment a runtime with adapters needs: the engine's LoRA switch, the
   * largest rank it must take, how many it holds (`slots`), and, for launch-time engines, the adapters.
   */
  enable(
    args: string[],
    env: Record<string, string>,
    opts: { maxRank: number; slots: number; adapters: AdapterPath[] },
  ): { args: string[]; env: Record<string, string> };
  /** How many adapters a runtime holds at once, from its command (past it inferd unloads the least recently used). */
  slots(args: string[]): number;
  /** The calls that load an adapter into a running runtime (runtime engines). */
  load?(a: AdapterPath): RuntimeCall[];
  /** The calls that unload it. */
  unload?(name: string): RuntimeCall[];
  /**
   * The request body that asks for adapter `name` (`index`: its place in the launch list), given the
   * body as it goes to the runtime (its `model` already the served name).
   */
  select(body: Record<string, unknown>, name: string, index: number): Record<string, unknown>;
}

/** One engine, as inferd drives it. */
export interface Engine {
  /** The workload `backend` value. */
  backend: string;
  /** Its name in words ("vLLM"). */
  label: string;
  /**
   * How the dashboard's workload form offers it: a line on what it serves, and the command a new
   * workload starts from (`{model}`: the model name as typed; `{gguf}`: llama.cpp's model flags;
   * "" when it runs no command). The dashboard's bundle reads this (src/ui/bundle.ts). Absent: the
   * form does not offer it (its workloads are made through the API).
   */
  form?: { hint: string; command: string };
  /** How `inferd doctor --engines` finds its version on this machine: a command and how to read its output (stdout and stderr). */
  probe: { argv: string[]; version: (out: string) => string | undefined };
  /** How to install it, in words a user can act on. */
  install: string;
  /** Whose flag tables the launch policy applies to its command (null: it runs no command). */
  family: PolicyFamily | null;
  /**
   * An external provider the host calls itself (nothing launched, no worker placed): which API it
   * speaks. Absent for engines inferd runs.
   */
  external?: "openai" | "anthropic";
  /** Whether placement must give it a GPU (it cannot run on CPU). */
  needsGpu: boolean;
  /** The share of each GPU's memory it takes up front whatever the model, from its command (none: it takes what the model needs). */
  gpuShare?(args: string[]): number;
  /** How one replica spans machines (nodes > 1), in words; absent when it cannot. */
  multinode?: string;
  /** Whether its tensor-parallel size counts the whole group's GPUs (SGLang) rather than one machine's (vLLM). */
  tensorParallelSpansGroup?: boolean;
  /** The programs (first word of a command, or module after `python -m`) the engine is started by. */
  programs: string[];
  /** The workload config field that pins a version (`vllm_version`) and how that version is installed. */
  pinned?: { field: string; install: (version: string, launch: { args: string[]; nodes: number }) => PinnedInstall };
  /** Config fields of its workloads beyond `command` and the pinned version (a field here replaces the default `command` rule). */
  config?: Record<string, z.ZodType>;
  /** What is wrong with a workload's config beyond its fields' own rules (the field, and why), or undefined. */
  configProblem?(config: Record<string, unknown>): { field: string; message: string } | undefined;
  flags: {
    /** Tensor-parallel size (none: the engine has no such flag). */
    tensorParallel: string[];
    /** The name the runtime serves its model under. */
    servedName: string[];
    /** The model the command loads. */
    model: string[];
    /** API keys the runtime checks (a comma list or a file for some). */
    apiKey: string[];
  };
  /**
   * The runtime's API key as it will check it, from its command, its environment and the files it
   * reads (inferd sends it with every request and probe); undefined when it checks none.
   */
  apiKeyOf(args: string[], env: Record<string, string | undefined>): string | undefined;
  /** URLs whose 2xx means the model is loaded and requests will be answered (not merely that the port is open). */
  readiness(baseUrl: string): string[];
  /** Requests a runtime serves at once, as the engine itself works it out. */
  capacity(input: CapacityInput): Capacity;
  /** What the engine serves itself, for its version (undefined when not known: inferd probes). */
  routes(version: string | undefined): NativeRoutes;
  /** Whether the command as given lets the runtime call tools. */
  toolsOn(args: string[]): boolean;
  /**
   * How its runtimes sleep and wake (undefined: they cannot; they stop instead). vLLM and SGLang
   * have it; llama.cpp does not (llama-server has no route that frees GPU memory and keeps the
   * process: its router mode loads and unloads whole models), nor Ollama (it unloads a model itself
   * after `keep_alive`, and a request loads it again).
   */
  sleep?: EngineSleep;
  /** How its runtimes serve LoRA adapters (undefined: they cannot; Ollama makes an adapter a model of its own). */
  lora?: EngineLora;
  /** Turns a replica spec into a launch plan. */
  launch: Launcher;
  /** The test double that stands for it (`test/fixtures/…`), for the README and doctor. */
  fake: string;
}
