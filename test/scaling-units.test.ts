import { describe, expect, test } from "bun:test";
import { decideAutoscaling, decideScheduled, initialDesired, windowOpen, type Load } from "../src/execution/decide";
import { AutoscalingParams, ScheduledParams } from "../src/execution/schema";

/**
 * The scaler's decisions as pure functions of policy, load and an injected clock: no sleeping, the
 * clock is just a number.
 */
const T0 = Date.parse("2026-11-23T08:00:00Z"); // a Monday, 09:00 in Berlin
const min = 60_000;

describe("schedule windows", () => {
  test("a cron window is open during each minute its pattern matches, in its time zone", () => {
    const w = { cron: "* 9-17 * * 1-5", timezone: "Europe/Berlin" };
    expect(windowOpen(w, T0)).toBe(true);
    expect(windowOpen(w, T0 + 30_000)).toBe(true); // seconds do not matter
    expect(windowOpen(w, T0 - 1)).toBe(false); // 08:59:59 Berlin
    expect(windowOpen(w, T0 + 9 * 60 * min)).toBe(false); // 18:00 Berlin
    expect(windowOpen(w, T0 + 5 * 24 * 60 * min)).toBe(false); // Saturday
  });
  test("a days window runs from start to end, past midnight when the end is earlier", () => {
    const office = { days: ["mon" as const], start: "09:00", end: "17:30", timezone: "Europe/Berlin" };
    expect(windowOpen(office, T0)).toBe(true);
    expect(windowOpen(office, T0 + 8.5 * 60 * min)).toBe(false);
    const night = { days: ["mon" as const], start: "22:00", end: "06:00", timezone: "UTC" };
    expect(windowOpen(night, Date.parse("2026-11-23T23:00:00Z"))).toBe(true); // Monday night
    expect(windowOpen(night, Date.parse("2026-11-24T05:59:00Z"))).toBe(true); // Tuesday morning
    expect(windowOpen(night, Date.parse("2026-11-24T06:00:00Z"))).toBe(false);
    expect(windowOpen(night, Date.parse("2026-11-23T05:00:00Z"))).toBe(false); // Monday morning belongs to Sunday
  });
  test("scheduled: replicas inside a window, the minimum outside", () => {
    const p = ScheduledParams.parse({ windows: [{ cron: "* 9-17 * * 1-5", timezone: "Europe/Berlin" }], replicas: 2 });
    expect(decideScheduled(p, T0)).toMatchObject({ desired: 2, reason: "schedule window 1 is open" });
    expect(decideScheduled(p, T0 - min)).toMatchObject({ desired: 0, reason: "outside every schedule window" });
    expect(decideScheduled({ ...p, min_replicas_outside: 1 }, T0 - min).desired).toBe(1);
  });
  test("warm_before_s preloads: the replicas start that long before a window opens, not earlier", () => {
    const p = ScheduledParams.parse({
      windows: [{ days: ["mon"], start: "09:00", end: "17:00", timezone: "Europe/Berlin" }],
      replicas: 2,
      warm_before_s: 120,
    });
    expect(decideScheduled(p, T0 - 2 * min)).toMatchObject({
      desired: 2,
      reason: "preloading: schedule window 1 opens within 120 s",
    });
    expect(decideScheduled(p, T0 - 3 * min).desired).toBe(0);
    // At the window's end it closes as before (the lead is only before it opens).
    expect(decideScheduled(p, T0 + 8 * 60 * min).desired).toBe(0);
    expect(() => ScheduledParams.parse({ ...p, warm_before_s: -1 })).toThrow();
  });
});

describe("autoscaling", () => {
  const p = AutoscalingParams.parse({ min_replicas: 0, max_replicas: 3, idle_timeout_s: 300, scale_up_after_s: 10 });
  const load = (over: Partial<Load>): Load => ({ queued: 0, inFlight: 0, lastBusyAt: T0, slots: 4, ...over });
  const none = { pressureSince: null };

  test("a request at zero replicas starts one at once", () => {
    expect(decideAutoscaling(p, load({ queued: 1 }), 0, none, T0).decision).toMatchObject({
      desired: 1,
      onDemand: true,
      reason: "cold start: 1 request waiting",
    });
  });
  test("idle for the timeout goes to the minimum; not a moment before", () => {
    expect(decideAutoscaling(p, load({ lastBusyAt: T0 }), 1, none, T0 + 299_000).decision.desired).toBe(1);
    const d = decideAutoscaling(p, load({ lastBusyAt: T0 }), 1, none, T0 + 300_000).decision;
    expect(d).toMatchObject({ desired: 0, reason: "no request for 300 s (idle timeout 300 s)" });
    expect(
      decideAutoscaling({ ...p, min_replicas: 1 }, load({ lastBusyAt: T0 }), 1, none, T0 + 900_000).decision.desired,
    ).toBe(1);
  });
  test("a queue above target adds replicas only after it has stood for scale_up_after_s, up to the max", () => {
    const busy = load({ queued: 20, inFlight: 4 });
    const first = decideAutoscaling(p, busy, 1, none, T0);
    expect(first.decision.desired).toBe(1);
    expect(first.memory.pressureSince).toBe(T0);
    const later = decideAutoscaling(p, busy, 1, first.memory, T0 + 10_000);
    expect(later.decision.desired).toBe(3); // 24 requests / 4 slots = 6, capped at 3
    expect(later.decision.reason).toContain("24 requests for 1 replica of");
  });
  test("target_in_flight overrides the slots; pressure that passes resets the wait", () => {
    const q = { ...p, target_in_flight: 10 };
    expect(decideAutoscaling(q, load({ inFlight: 8 }), 1, none, T0).memory.pressureSince).toBeNull();
    const up = decideAutoscaling(q, load({ queued: 5, inFlight: 10 }), 1, none, T0);
    expect(up.memory.pressureSince).toBe(T0);
    expect(decideAutoscaling(q, load({ inFlight: 3 }), 1, up.memory, T0 + 5000).memory.pressureSince).toBeNull();
  });
  test("parameters are checked: max at least min, idle timeout positive, unknown fields refused", () => {
    expect(AutoscalingParams.safeParse({ min_replicas: 2, max_replicas: 1 }).success).toBe(false);
    expect(AutoscalingParams.safeParse({ idle_timeout_s: 0 }).success).toBe(false);
    expect(AutoscalingParams.safeParse({ idle_timeout: 30 }).success).toBe(false);
    expect(ScheduledParams.safeParse({ windows: [{ cron: "bogus" }] }).success).toBe(false);
    expect(ScheduledParams.safeParse({ windows: [{ days: ["mon"], start: "9:00", end: "17:00" }] }).success).toBe(
      false,
    );
    expect(
      ScheduledParams.safeParse({
        windows: [{ days: ["mon"], start: "09:00", end: "17:00", timezone: "Mars/Olympus" }],
      }).success,
    ).toBe(false);
  });
});

test("a new workload's first replica waits when it may be at zero", () => {
  const w = (execution_policy: string, execution_params: Record<string, unknown>, paused = false) => ({
    execution_policy,
    execution_params,
    paused,
  });
  expect(initialDesired(w("fixed", {}), T0).desired).toBe("run");
  expect(initialDesired(w("fixed", {}, true), T0).desired).toBe("idle");
  expect(initialDesired(w("autoscaling", { min_replicas: 0 }), T0)).toEqual({
    desired: "idle",
    reason: "scaled to zero: the first request starts it",
  });
  expect(initialDesired(w("autoscaling", { min_replicas: 1 }), T0).desired).toBe("run");
  expect(
    initialDesired(w("scheduled", { windows: [{ cron: "* 9-17 * * 1-5", timezone: "Europe/Berlin" }] }), T0).desired,
  ).toBe("run");
  expect(
    initialDesired(w("scheduled", { windows: [{ cron: "* 9-17 * * 1-5", timezone: "Europe/Berlin" }] }), T0 - min)
      .desired,
  ).toBe("idle");
});
