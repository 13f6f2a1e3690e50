import { z } from "zod";

const Count = z.number().int().min(1).max(1_000_000_000).nullable();

/** A key's limits; each optional, `null` removes one. */
export const KeyLimits = z.strictObject({
  /** Requests per minute (a token bucket: bursts up to this, refilled evenly). */
  rpm: Count.optional(),
  /** Tokens (input + output) per minute. */
  tpm: Count.optional(),
  /** Requests in flight at once. */
  max_concurrent: Count.optional(),
  /** Tokens per UTC day and per calendar month (UTC), kept across restarts. */
  tokens_per_day: Count.optional(),
  tokens_per_month: Count.optional(),
  /** "batch": its synchronous requests wait behind interactive ones, as jobs do (null: interactive). */
  priority: z.enum(["interactive", "batch"]).nullable().optional(),
  /** Its share against other keys waiting for the same workload (null: 1). */
  weight: z.number().int().min(1).max(1000).nullable().optional(),
});
export type KeyLimits = z.infer<typeof KeyLimits>;

/** A project's token quotas (every key of the project together) and its caps; each optional, `null` removes one. */
export const ProjectLimits = KeyLimits.pick({ tokens_per_day: true, tokens_per_month: true }).extend({
  /** Workloads the project may have. */
  max_workloads: Count.optional(),
  /** Replicas its workloads' policies may run together (fixed `replicas`, autoscaling `max_replicas`, scheduled `replicas`). */
  max_replicas: Count.optional(),
  /** Bytes of models pulled for its workloads (up to 2^53). */
  model_bytes: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER).nullable().optional(),
});
export type ProjectLimits = z.infer<typeof ProjectLimits>;
/** A project's limits as views show them: every field, `null` when unset. */
export type ProjectLimitsView = { [K in keyof ProjectLimits]-?: Exclude<ProjectLimits[K], undefined> };

/** Body of `PATCH /admin/keys/:id`. */
export const KeyPatch = z.strictObject({ limits: KeyLimits });
/** Body of `PATCH /admin/projects/:project`. */
export const ProjectPatch = z.strictObject({ limits: ProjectLimits });

/** The limits of a key as views show them: every field, `null` when unset. */
export interface LimitsView {
  rpm: number | null;
  tpm: number | null;
  max_concurrent: number | null;
  tokens_per_day: number | null;
  tokens_per_month: number | null;
  /** null: interactive. */
  priority: "interactive" | "batch" | null;
  /** null: 1. */
  weight: number | null;
}
