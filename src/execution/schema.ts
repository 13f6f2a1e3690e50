import { z } from "zod";
import { Cron } from "croner";

/** A time zone name the runtime knows (IANA, e.g. `Europe/Berlin`). */
const TimeZone = z
  .string()
  .min(1)
  .max(64)
  .refine((tz) => {
    try {
      new Intl.DateTimeFormat("en", { timeZone: tz });
      return true;
    } catch {
      return false;
    }
  }, "must be an IANA time zone such as Europe/Berlin or UTC");

const Clock = z.string().regex(/^([01]\d|2[0-3]):[0-5]\d$/, "must be a time as HH:MM (24 h)");
export const DAYS = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"] as const;

/** A cron window: open during every minute the pattern matches (`* 9-17 * * 1-5`: weekdays 9:00–17:59). */
const CronWindow = z.strictObject({
  cron: z
    .string()
    .min(1)
    .max(200)
    .refine((p) => {
      try {
        new Cron(p, { paused: true });
        return true;
      } catch {
        return false;
      }
    }, 'must be a cron pattern with five to seven fields, e.g. "* 9-17 * * 1-5"'),
  timezone: TimeZone.optional(),
});

/** A weekly window: on these days from `start` to `end` (an `end` before `start` runs past midnight). */
const DaysWindow = z.strictObject({
  days: z.array(z.enum(DAYS)).min(1).max(7),
  start: Clock,
  end: Clock,
  timezone: TimeZone.optional(),
});

/** One window of a schedule. */
export const Window = z.union([CronWindow, DaysWindow]);
export type Window = z.infer<typeof Window>;

/** Who gives way first when models share GPUs and host RAM (see src/placement/snapshot.ts `mayGiveWay`). */
const GiveWay = {
  /** Its replicas are never swapped out for another's, nor stopped asleep to free host RAM (default false). */
  keep_warm: z.boolean().optional(),
  /** -100…100 (default 0): lower ones give way first, and never for a lower one. */
  priority: z.number().int().min(-100).max(100).optional(),
};

/** `fixed`: always this many replicas (today's behaviour). */
export const FixedParams = z.strictObject({ replicas: z.number().int().min(1).max(64).optional() });
/** `autoscaling`: between min and max replicas by queue pressure; idle ones stop after `idle_timeout_s`. */
export const AutoscalingParams = z
  .strictObject({
    min_replicas: z.number().int().min(0).max(64).optional(),
    max_replicas: z.number().int().min(1).max(64).optional(),
    /** Requests in flight per replica above which more replicas are wanted (default: the replica's slots). */
    target_in_flight: z.number().int().min(1).max(10_000).optional(),
    /** How long the queue must stay above target before a replica is added. */
    scale_up_after_s: z.number().min(0).max(86_400).optional(),
    /** No request in flight or queued for this long: the replica stops (state `idle`). */
    idle_timeout_s: z
      .number()
      .min(1)
      .max(7 * 86_400)
      .optional(),
    /** An idled replica sleeps (runtime kept, GPU memory freed) rather than stops, when its engine can (default true). */
    sleep: z.boolean().optional(),
    /**
     * Preload: workloads of the same project (slugs) whose use warms this one too — a request for one of
     * them starts or wakes a replica of this one, and keeps it from idling while they are used.
     */
    warm_with: z.array(z.string().min(1).max(64)).max(20).optional(),
    ...GiveWay,
  })
  .refine((p) => (p.max_replicas ?? 1) >= (p.min_replicas ?? 0), {
    message: "max_replicas must be at least min_replicas",
    path: ["max_replicas"],
  });
/** `scheduled`: `replicas` while a window is open, `min_replicas_outside` otherwise. */
export const ScheduledParams = z.strictObject({
  windows: z.array(Window).min(1).max(50),
  replicas: z.number().int().min(1).max(64).optional(),
  min_replicas_outside: z.number().int().min(0).max(64).optional(),
  /** A replica idled outside the windows sleeps rather than stops, when its engine can (default true). */
  sleep: z.boolean().optional(),
  /** Preload: the replicas start (or wake) this many seconds before a window opens (default 0). */
  warm_before_s: z.number().int().min(0).max(86_400).optional(),
  ...GiveWay,
});

export type FixedParams = z.infer<typeof FixedParams>;
export type AutoscalingParams = z.infer<typeof AutoscalingParams>;
export type ScheduledParams = z.infer<typeof ScheduledParams>;

/** The parameter schema of each execution policy. */
export const PARAMS_BY_POLICY = {
  fixed: FixedParams,
  autoscaling: AutoscalingParams,
  scheduled: ScheduledParams,
} as const;

/** Defaults filled in, so every reader sees the same numbers. */
export const DEFAULTS = {
  autoscaling: { min_replicas: 0, max_replicas: 1, scale_up_after_s: 10, idle_timeout_s: 300 },
  scheduled: { replicas: 1, min_replicas_outside: 0 },
  fixed: { replicas: 1 },
} as const;

/** What the workload view shows of its scaling. */
export interface ScalingView {
  policy: string;
  desired: number;
  /** Replicas ready now. */
  current: number;
  /** Replicas the agents are running or starting. */
  running: number;
  last_decision: { at: string; action: string; reason: string } | null;
  reason: string;
}
