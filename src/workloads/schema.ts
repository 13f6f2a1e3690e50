import { z } from "zod";
import { Slug } from "../projects/schema";
import { CommandSyntaxError, splitCommand } from "../../agent/command";
import { ENGINES } from "../../agent/engines";
import { modelRefs } from "../../agent/model-refs";
import { SourceError } from "../../agent/models/source";
import { CaptureUntil } from "./capture";

/** Workload slugs that would collide with the project base URL (`/endpoint/<project>/v1`, `/api`). */
export const RESERVED_SLUGS = ["v1", "api"];

/** Backends a workload can run on: one per engine (agent/engines). */
export const BACKENDS = Object.keys(ENGINES) as [string, ...string[]];
export type Backend = string;

/**
 * The 12 modalities. The contract names the first eight; inferd adds `image2text` (vision chat),
 * `image2image` (image edits and variations), `text2video` (video generation, e.g. on vLLM-Omni) and
 * `forecast` (time-series forecasting on a custom backend).
 */
export const TASK_TYPES = [
  "text2text",
  "embedding",
  "text2image",
  "text2audio",
  "audio2text",
  "reranker",
  "classification",
  "reward",
  "image2text",
  "image2image",
  "text2video",
  "forecast",
] as const;

/** Modalities served only through async jobs, never on the synchronous routes. */
export const JOB_ONLY_TASK_TYPES = ["reranker", "classification", "reward"] as const;

/** Most machines one multi-node replica may span. */
export const MAX_NODES = 16;

/** Backends whose engines span machines (vLLM: torch or Ray; SGLang; llama.cpp: RPC servers). */
export const MULTINODE_BACKENDS = Object.values(ENGINES)
  .filter((e) => e.multinode)
  .map((e) => e.backend);

/**
 * Flags inferd sets itself on the members of a multi-node group (ranks, rendezvous, Ray, RPC
 * servers): a command that sets one is refused for `nodes > 1`, so the group's wiring is inferd's.
 */
export const GROUP_FLAGS = [
  "--nnodes",
  "--node-rank",
  "--master-addr",
  "--master-port",
  "--headless",
  "--dist-init-addr",
  "--rpc",
  "--data-parallel-address",
];

/** Execution policies a workload may carry. */
export const EXECUTION_POLICIES = ["fixed", "scheduled", "autoscaling"] as const;
export type ExecutionPolicy = (typeof EXECUTION_POLICIES)[number];

/** How a workload's requests are spread over its replicas (see src/dispatch/prefix.ts). */
export const ROUTINGS = ["prefix", "least_loaded"] as const;
export type Routing = (typeof ROUTINGS)[number];

/** Task types whose requests are chats (a long prefix resent every turn): routed by prefix unless set otherwise. */
export const CHAT_TASK_TYPES = ["text2text", "image2text"] as const;

/** The routing a workload of `taskType` gets when none is set: by prefix for chats, else to the least-loaded replica. */
export const defaultRouting = (taskType: string): Routing =>
  (CHAT_TASK_TYPES as readonly string[]).includes(taskType) ? "prefix" : "least_loaded";

/** Endpoint toggles: `jobs` is the async master switch, the rest one per modality. */
export const TOGGLES = ["jobs", "chat", "embeddings", "rerank", "audio", "images", "forecast"] as const;
export type Toggle = (typeof TOGGLES)[number];
export type ToggleMap = Record<Toggle, boolean>;

/**
 * A backend's command: words a shell would split (without running one), and every model it names
 * (`-hf`, `-m hf:`, `-mu`, a hub repo) parseable, so a bad source is refused at save naming the field.
 */
const commandOf = (backend: string) =>
  z
    .string()
    .trim()
    .min(1, "must not be empty")
    .max(8192)
    .superRefine((cmd, ctx) => {
      try {
        modelRefs(backend, splitCommand(cmd));
      } catch (e) {
        if (e instanceof CommandSyntaxError || e instanceof SourceError)
          ctx.addIssue({ code: "custom", message: e.message });
        else throw e;
      }
    });
const Version = z.string().regex(/^[0-9A-Za-z][0-9A-Za-z.+\-_]{0,63}$/, "must be a version such as 0.11.0");

/** `config` shape of each backend: its command (none for Ollama's daemon) and the field pinning its version. */
export const CONFIG_BY_BACKEND: Record<Backend, z.ZodType<Record<string, unknown>>> = Object.fromEntries(
  Object.values(ENGINES).map((e) => [
    e.backend,
    e.family === null
      ? z.strictObject({ ...e.config })
      : z
          .strictObject({
            command: commandOf(e.backend),
            ...(e.pinned ? { [e.pinned.field]: Version.optional() } : {}),
            ...e.config,
          })
          .superRefine((config, ctx) => {
            const problem = e.configProblem?.(config);
            if (problem) ctx.addIssue({ code: "custom", path: [problem.field], message: problem.message });
          }),
  ]),
);

const fields = {
  name: z.string().trim().min(1).max(200),
  description: z.string().max(10_000),
  slug: Slug.refine((s) => !RESERVED_SLUGS.includes(s), '"v1" and "api" are the project base URL\'s own paths'),
  task_type: z.enum(TASK_TYPES),
  backend: z.enum(BACKENDS),
  model_name: z.string().trim().min(1).max(500),
  config: z.record(z.string(), z.unknown()),
  worker_id: z.string().min(1).max(128).nullable(),
  gpu_resource_id: z.string().min(1).max(128).nullable(),
  nodes: z.number().int().min(1).max(MAX_NODES),
  // A `*` in an alias is a pattern (`claude-*`), matched when no exact name is (src/dataplane/target.ts).
  aliases: z
    .array(
      z
        .string()
        .trim()
        .min(1)
        .max(200)
        .refine((s) => s !== "default", '"default" is reserved'),
    )
    .max(32),
  fallbacks: z.array(Slug).max(8),
  execution_policy: z.enum(EXECUTION_POLICIES),
  execution_params: z.record(z.string(), z.unknown()),
  routing: z.enum(ROUTINGS).nullable(),
  stable_prompts: z.boolean(),
};

/** Body of workload create: name, backend and model_name required; `config` checked per backend. */
export const WorkloadCreate = z.strictObject({
  name: fields.name,
  description: fields.description.optional(),
  slug: fields.slug.optional(),
  task_type: fields.task_type.optional(),
  backend: fields.backend,
  model_name: fields.model_name,
  config: fields.config.optional(),
  worker_id: fields.worker_id.optional(),
  gpu_resource_id: fields.gpu_resource_id.optional(),
  /** Machines one replica spans: a group of that many workers, each with the assignment's GPUs (default 1). */
  nodes: fields.nodes.optional(),
  /** Other names the project base URL routes to this workload (unique in the project). */
  aliases: fields.aliases.optional(),
  /** Other workloads' slugs, tried in order when this one fails before answering (project base URL). */
  fallbacks: fields.fallbacks.optional(),
  execution_policy: fields.execution_policy.optional(),
  /** The policy's parameters (checked per policy; see src/execution/schema.ts). */
  execution_params: fields.execution_params.optional(),
  /** Between replicas: "prefix" (a conversation stays on one replica) or "least_loaded"; null: by task type. */
  routing: fields.routing.optional(),
  stable_prompts: fields.stable_prompts.optional(),
});
export type WorkloadCreate = z.infer<typeof WorkloadCreate>;

/** Body of workload update: any subset of the create fields; only the sent ones change. */
export const WorkloadUpdate = WorkloadCreate.partial();
export type WorkloadUpdate = z.infer<typeof WorkloadUpdate>;

/** Body of the admin workload update: the update's fields, plus `capture_until` (the request inspector's bodies; operators only). */
export const AdminWorkloadUpdate = WorkloadUpdate.extend({ capture_until: CaptureUntil.optional() });

/** Body of `PATCH /admin/workloads/:id/endpoints`: any of the toggles. */
export const TogglePatch = z.strictObject(
  Object.fromEntries(TOGGLES.map((t) => [t, z.boolean().optional()])) as Record<Toggle, z.ZodOptional<z.ZodBoolean>>,
);
