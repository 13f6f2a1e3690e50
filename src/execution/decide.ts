/**
 * How many replicas a workload wants now: pure functions of its policy, its load, the clock and
 * what the scaler remembered from its last look. The scaler (src/scaling/scaler.ts) makes the answer real.
 */
import { Cron } from "croner";
import { DAYS, DEFAULTS, type AutoscalingParams, type ScheduledParams, type Window } from "./schema";
import { plural } from "../words";

/** A workload's load as the queue sees it. */
export interface Load {
  /** Requests (and jobs) waiting for a slot. */
  queued: number;
  /** Requests running on its replicas. */
  inFlight: number;
  /** Last time it had a request queued or in flight (ms), or when it was created/started. */
  lastBusyAt: number;
  /** Slots per running replica (the runtime's batch capacity or the set concurrency). */
  slots: number;
}

/** What the scaler remembers of a workload between looks. */
export interface Memory {
  /** Since when the queue has stood above the target (ms), or null. */
  pressureSince: number | null;
}

/** A decision: how many replicas should run, and why. */
export interface Decision {
  desired: number;
  reason: string;
  /** Whether a replica may start on demand (a request arriving at zero replicas). */
  onDemand: boolean;
}

/** The minute a date falls in, as a cron pattern sees it (seconds cut). */
const minuteOf = (now: number) => new Date(Math.floor(now / 60_000) * 60_000);

/** The parts of a date in a time zone: weekday (mon…sun) and minutes since midnight. */
function localParts(now: number, timeZone: string): { day: string; minutes: number } {
  const f = new Intl.DateTimeFormat("en-US", {
    timeZone,
    weekday: "short",
    hour: "2-digit",
    minute: "2-digit",
    hourCycle: "h23",
  });
  const parts = Object.fromEntries(f.formatToParts(new Date(now)).map((p) => [p.type, p.value]));
  return { day: parts.weekday.toLowerCase().slice(0, 3), minutes: Number(parts.hour) * 60 + Number(parts.minute) };
}

const hm = (s: string) => Number(s.slice(0, 2)) * 60 + Number(s.slice(3, 5));

/**
 * Whether a window is open at `now`: a cron window during each minute its pattern matches; a days
 * window from `start` to `end` on its days (an end before the start runs past midnight, into the next day).
 * @example windowOpen({ days: ["mon"], start: "09:00", end: "17:00", timezone: "UTC" }, Date.parse("2026-11-23T10:00:00Z")) // → true
 */
export function windowOpen(w: Window, now: number): boolean {
  const tz = w.timezone ?? "UTC";
  if ("cron" in w) return new Cron(w.cron, { timezone: tz, paused: true }).match(minuteOf(now));
  const { day, minutes } = localParts(now, tz);
  const [start, end] = [hm(w.start), hm(w.end)];
  if (start <= end) return w.days.includes(day as (typeof DAYS)[number]) && minutes >= start && minutes < end;
  // Overnight: the evening part on a listed day, the morning part on the day after one.
  const yesterday = DAYS[(DAYS.indexOf(day as (typeof DAYS)[number]) + 6) % 7];
  return (
    (w.days.includes(day as (typeof DAYS)[number]) && minutes >= start) || (w.days.includes(yesterday) && minutes < end)
  );
}

/**
 * `scheduled`: `replicas` inside any window, `min_replicas_outside` outside; with `warm_before_s`,
 * `replicas` from that long before a window opens (preloaded, so the window starts warm).
 */
export function decideScheduled(p: ScheduledParams, now: number): Decision {
  const open = p.windows.findIndex((w) => windowOpen(w, now));
  const inside = p.replicas ?? DEFAULTS.scheduled.replicas;
  const outside = p.min_replicas_outside ?? DEFAULTS.scheduled.min_replicas_outside;
  if (open >= 0) return { desired: inside, reason: `schedule window ${open + 1} is open`, onDemand: false };
  const lead = (p.warm_before_s ?? 0) * 1000;
  const soon = lead > 0 ? p.windows.findIndex((w) => windowOpen(w, now + lead)) : -1;
  if (soon >= 0)
    return {
      desired: inside,
      reason: `preloading: schedule window ${soon + 1} opens within ${p.warm_before_s} s`,
      onDemand: false,
    };
  return { desired: outside, reason: "outside every schedule window", onDemand: false };
}

/**
 * `autoscaling`: starts a replica when work arrives at zero; adds replicas (up to the max) while the
 * queue stays above target for `scale_up_after_s`; goes down to `min_replicas` after
 * `idle_timeout_s` without a request. Returns the decision and what to remember.
 */
export function decideAutoscaling(
  p: AutoscalingParams,
  load: Load,
  running: number,
  mem: Memory,
  now: number,
): { decision: Decision; memory: Memory } {
  const min = p.min_replicas ?? DEFAULTS.autoscaling.min_replicas;
  const max = p.max_replicas ?? DEFAULTS.autoscaling.max_replicas;
  const idleMs = (p.idle_timeout_s ?? DEFAULTS.autoscaling.idle_timeout_s) * 1000;
  const upAfterMs = (p.scale_up_after_s ?? DEFAULTS.autoscaling.scale_up_after_s) * 1000;
  const target = Math.max(1, p.target_in_flight ?? load.slots);
  const demand = load.queued + load.inFlight;
  const keep = (reason: string, memory: Memory = { pressureSince: null }) => ({
    decision: { desired: Math.min(max, Math.max(min, running)), reason, onDemand: true },
    memory,
  });
  if (demand === 0) {
    const idleFor = now - load.lastBusyAt;
    if (idleFor >= idleMs && running > min)
      return {
        decision: {
          desired: min,
          reason: `no request for ${Math.round(idleFor / 1000)} s (idle timeout ${idleMs / 1000} s)`,
          onDemand: true,
        },
        memory: { pressureSince: null },
      };
    return keep(running > min ? `idle for ${Math.round(idleFor / 1000)} s of ${idleMs / 1000} s` : "at the minimum");
  }
  if (running === 0)
    return {
      decision: {
        desired: Math.max(1, min),
        reason: `cold start: ${plural(demand, "request")} waiting`,
        onDemand: true,
      },
      memory: { pressureSince: null },
    };
  const wanted = Math.min(max, Math.ceil(demand / target));
  if (wanted > running) {
    const since = mem.pressureSince ?? now;
    if (now - since >= upAfterMs)
      return {
        decision: {
          desired: wanted,
          reason: `${plural(demand, "request")} for ${plural(running, "replica")} of ${target} (target) for ${Math.round((now - since) / 1000)} s`,
          onDemand: true,
        },
        memory: { pressureSince: null },
      };
    return keep(`queue above target for ${Math.round((now - since) / 1000)} s of ${upAfterMs / 1000} s`, {
      pressureSince: since,
    });
  }
  return keep(`${plural(demand, "request")} within ${plural(running, "replica")}`);
}

/**
 * Whether a newly placed workload's first replica should start at once or wait (idle): stopped by
 * the operator, autoscaling from zero, or a schedule whose windows are closed.
 */
export function initialDesired(
  w: { paused: boolean; execution_policy: string; execution_params: Record<string, unknown> },
  now: number,
): { desired: "run" | "idle"; reason: string } {
  if (w.paused) return { desired: "idle", reason: "stopped by the operator" };
  if (w.execution_policy === "autoscaling" && ((w.execution_params as AutoscalingParams).min_replicas ?? 0) === 0)
    return { desired: "idle", reason: "scaled to zero: the first request starts it" };
  if (w.execution_policy === "scheduled" && decideScheduled(w.execution_params as ScheduledParams, now).desired === 0)
    return { desired: "idle", reason: "outside every schedule window" };
  return { desired: "run", reason: "" };
}
