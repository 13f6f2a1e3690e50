/**
 * A workload's execution policy as the form edits it (text fields), to and from the server's
 * `execution_policy` + `execution_params`, and in words. The server checks and fills in defaults.
 */
import type {
  AutoscalingParams,
  DAYS as ServerDays,
  FixedParams,
  ScheduledParams,
  Window,
} from "../../src/execution/schema";
import type { ExecutionPolicy } from "../../src/workloads/schema";
import { duration, plural } from "./format";

/** The policies, in the order the form offers them. */
export const POLICIES: { id: ExecutionPolicy; label: string; hint: string }[] = [
  { id: "fixed", label: "Always on", hint: "A fixed number of replicas, always running." },
  {
    id: "autoscaling",
    label: "Autoscaling",
    hint: "Between a minimum and a maximum by demand; a replica without requests sleeps (vLLM, SGLang: it wakes in a moment) or stops after a while (down to zero), and the next request wakes or starts one.",
  },
  {
    id: "scheduled",
    label: "Scheduled",
    hint: "Runs during time windows (days and hours, or a cron pattern), with fewer or none outside them.",
  },
];

/** Weekdays as the server names them. */
export const DAYS: typeof ServerDays = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];

/** One schedule window being edited: days and hours, or a cron pattern. */
export interface WindowDraft {
  mode: "days" | "cron";
  days: string[];
  start: string;
  end: string;
  cron: string;
  timezone: string;
}

/** The policy part of the workload form; numbers as typed (empty: the server's default). */
export interface PolicyDraft {
  policy: ExecutionPolicy;
  replicas: string;
  min_replicas: string;
  max_replicas: string;
  idle_timeout_s: string;
  scale_up_after_s: string;
  target_in_flight: string;
  min_replicas_outside: string;
  windows: WindowDraft[];
  /** An idled replica sleeps rather than stops, where its engine can (the server's default: on). */
  sleep: boolean;
  /** Never swapped out for another workload, nor stopped asleep to free host RAM. */
  keep_warm: boolean;
  /** -100…100 as typed (empty: 0). */
  priority: string;
  /** Autoscaling: the slugs whose use warms this one, comma-separated as typed. */
  warm_with: string;
  /** Scheduled: seconds before a window opens to start or wake the replicas. */
  warm_before_s: string;
}

/** The browser's time zone (what a schedule means unless another is chosen). */
export const localZone = () => Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC";

/** A new window: weekdays, 09:00 to 18:00, here. */
export const newWindow = (): WindowDraft => ({
  mode: "days",
  days: ["mon", "tue", "wed", "thu", "fri"],
  start: "09:00",
  end: "18:00",
  cron: "* 9-17 * * 1-5",
  timezone: localZone(),
});

/** The form's starting point: always one replica (the server's defaults for the others). */
export const emptyPolicy = (): PolicyDraft => ({
  policy: "fixed",
  replicas: "1",
  min_replicas: "0",
  max_replicas: "1",
  idle_timeout_s: "300",
  scale_up_after_s: "10",
  target_in_flight: "",
  min_replicas_outside: "0",
  windows: [newWindow()],
  sleep: true,
  keep_warm: false,
  priority: "",
  warm_with: "",
  warm_before_s: "",
});

/** A typed number, or nothing when empty (NaN goes to the server, which names the field). */
const num = (s: string) => (s.trim() === "" ? undefined : Number(s));
const txt = (v: unknown) => (v === undefined || v === null ? "" : String(v));

/**
 * The slugs of a comma-separated list, or nothing when there is none.
 * @example slugsOf(" chat, ,embed ") // → ["chat", "embed"]
 */
export const slugsOf = (s: string) => {
  const slugs = s
    .split(",")
    .map((x) => x.trim())
    .filter(Boolean);
  return slugs.length ? slugs : undefined;
};

/** What autoscaling and scheduled share: sleeping, pinning and priority, each left out at its default. */
const giveWayOf = (d: PolicyDraft) => ({
  sleep: d.sleep === false ? false : undefined,
  keep_warm: d.keep_warm || undefined,
  priority: num(d.priority),
});

/** A window as the server takes it. */
function windowOf(w: WindowDraft): Window {
  const tz = w.timezone.trim() ? { timezone: w.timezone.trim() } : {};
  return w.mode === "cron"
    ? { cron: w.cron.trim(), ...tz }
    : { days: w.days as (typeof DAYS)[number][], start: w.start, end: w.end, ...tz };
}

/** `execution_params` of a draft for its policy (empty fields left to the server's defaults). */
export function paramsOf(d: PolicyDraft): FixedParams | AutoscalingParams | ScheduledParams {
  const pick = <T extends object>(o: T) =>
    Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
  if (d.policy === "fixed") return pick({ replicas: num(d.replicas) });
  if (d.policy === "autoscaling") {
    return pick({
      min_replicas: num(d.min_replicas),
      max_replicas: num(d.max_replicas),
      idle_timeout_s: num(d.idle_timeout_s),
      scale_up_after_s: num(d.scale_up_after_s),
      target_in_flight: num(d.target_in_flight),
      warm_with: slugsOf(d.warm_with),
      ...giveWayOf(d),
    });
  }
  return pick({
    windows: d.windows.map(windowOf),
    replicas: num(d.replicas),
    min_replicas_outside: num(d.min_replicas_outside),
    warm_before_s: num(d.warm_before_s),
    ...giveWayOf(d),
  });
}

/** The draft of a saved policy. */
export function policyDraftOf(policy: string, params: Record<string, unknown>): PolicyDraft {
  const base = emptyPolicy();
  const p = params as Partial<Record<keyof PolicyDraft, unknown>> & { windows?: Window[]; warm_with?: string[] };
  const windows = (p.windows ?? []).map(
    (w): WindowDraft =>
      "cron" in w
        ? { ...newWindow(), mode: "cron", cron: w.cron, timezone: w.timezone ?? "UTC" }
        : { ...newWindow(), days: [...w.days], start: w.start, end: w.end, timezone: w.timezone ?? "UTC" },
  );
  const keep = (k: keyof PolicyDraft) => (p[k] === undefined ? (base[k] as string) : txt(p[k]));
  return {
    policy: (POLICIES.some((x) => x.id === policy) ? policy : "fixed") as ExecutionPolicy,
    replicas: keep("replicas"),
    min_replicas: keep("min_replicas"),
    max_replicas: keep("max_replicas"),
    idle_timeout_s: keep("idle_timeout_s"),
    scale_up_after_s: keep("scale_up_after_s"),
    target_in_flight: txt(p.target_in_flight),
    min_replicas_outside: keep("min_replicas_outside"),
    windows: windows.length ? windows : base.windows,
    sleep: p.sleep !== false,
    keep_warm: p.keep_warm === true,
    priority: txt(p.priority),
    warm_with: (p.warm_with ?? []).join(", "),
    warm_before_s: txt(p.warm_before_s),
  };
}

/** A window in words, e.g. "mon–fri 09:00–18:00 (Europe/Berlin)". */
export function windowText(w: Window): string {
  const tz = ` (${w.timezone ?? "UTC"})`;
  return "cron" in w ? `cron "${w.cron}"${tz}` : `${w.days.join(", ")} ${w.start}–${w.end}${tz}`;
}

/** Pinning and priority in words, e.g. "; kept warm; priority 5" (nothing at the defaults). */
function giveWayText(p: { keep_warm?: boolean; priority?: number }): string {
  return `${p.keep_warm ? "; kept warm" : ""}${p.priority ? `; priority ${p.priority}` : ""}`;
}

/**
 * A saved policy in words.
 * @example policyText("autoscaling", { min_replicas: 0, max_replicas: 2, idle_timeout_s: 300 }) // → "0 to 2 replicas by demand; …"
 */
export function policyText(policy: string, params: Record<string, unknown>): string {
  if (policy === "autoscaling") {
    const p = params as AutoscalingParams;
    const rest = p.sleep === false ? "stops" : "sleeps (vLLM, SGLang) or stops";
    const warm = p.warm_with?.length ? `; warmed with ${p.warm_with.join(", ")}` : "";
    return `${p.min_replicas ?? 0} to ${plural(p.max_replicas ?? 1, "replica")} by demand; a replica without requests ${rest} after ${duration(p.idle_timeout_s ?? 300)}${warm}${giveWayText(p)}`;
  }
  if (policy === "scheduled") {
    const p = params as ScheduledParams;
    const before = p.warm_before_s ? `; starts ${duration(p.warm_before_s)} before a window` : "";
    return `${plural(p.replicas ?? 1, "replica")} during ${(p.windows ?? []).map(windowText).join("; ")}, ${p.min_replicas_outside ?? 0} outside${before}${giveWayText(p)}`;
  }
  return `always ${plural((params as FixedParams).replicas ?? 1, "replica")}`;
}
