// Small parts of the request path: the event-loop stall probe behind /metrics' inferd_event_loop_stall_seconds (on a fake clock), and the cached UTC day.
import { describe, expect, test } from "bun:test";
import type { Clock } from "../agent/serial";
import { HEAP_EVERY, LoopLag, WINDOW_S } from "../src/usage/lag";

/** A clock whose timers fire only when the test says, as late as it says. */
function fakeClock() {
  let now = 0;
  let due: { fn: () => void; at: number } | undefined;
  const clock: Clock = {
    now: () => now,
    setTimeout: (fn, ms) => (due = { fn, at: now + ms }),
    clearTimeout: () => (due = undefined),
  };
  /** Runs the pending probe `lateMs` after it was due. */
  const fire = (lateMs: number) => {
    const d = due!;
    due = undefined;
    now = d.at + lateMs;
    d.fn();
  };
  return { clock, fire, advance: (ms: number) => (now += ms), pending: () => due !== undefined };
}

describe("the event-loop stall probe", () => {
  test("reports the longest stall of the last window and forgets older ones", () => {
    const c = fakeClock();
    const lag = new LoopLag(c.clock);
    lag.start();
    c.fire(0);
    expect(lag.longestMs()).toBe(0);
    c.fire(37);
    c.fire(3);
    expect(lag.longestMs()).toBe(37);
    // Probes on time for longer than the window: the stall has aged out.
    for (let i = 0; i < (WINDOW_S + 1) * 50; i++) c.fire(0);
    expect(lag.longestMs()).toBe(0);
  });

  test("a stall while the thread waited for a CPU counts whole, and apart without that wait", () => {
    const c = fakeClock();
    let waited = 0;
    const lag = new LoopLag(c.clock, () => waited);
    lag.start();
    // 12 ms late, 9 of them waiting for a CPU (other processes ran): inferd's own part is 3 ms.
    waited += 9;
    c.fire(12);
    expect(lag.longestMs()).toBe(12);
    expect(lag.longestOwnMs()).toBe(3);
    // 6 ms late with no wait: all of it inferd's own.
    c.fire(6);
    expect(lag.longestMs()).toBe(12);
    expect(lag.longestOwnMs()).toBe(6);
    // Without a way to read the wait, the own figure is the whole stall.
    const bare = fakeClock();
    const plain = new LoopLag(bare.clock);
    plain.start();
    bare.fire(8);
    expect(plain.longestOwnMs()).toBe(8);
  });

  test("Linux's run-queue wait of this thread is read and only grows", async () => {
    const read = (await import("../src/usage/lag")).threadCpuWait();
    if (process.platform !== "linux") return expect(read).toBeUndefined();
    const first = read!();
    expect(Number.isFinite(first)).toBe(true);
    const deadline = performance.now() + 30;
    while (performance.now() < deadline) Math.sqrt(Math.random());
    expect(read!()).toBeGreaterThanOrEqual(first);
  });

  test("allocation: the heap's growth between readings is summed, a collection's drop is not subtracted", () => {
    const c = fakeClock();
    const sizes = [10, 15, 12, 20, 20];
    let reads = 0;
    const lag = new LoopLag(c.clock, undefined, () => sizes[Math.min(reads++, sizes.length - 1)]);
    lag.start(); // reads 10
    // The heap is read every HEAP_EVERY-th probe (500 ms), not at each.
    const reading = () => {
      for (let k = 0; k < HEAP_EVERY; k++) c.fire(0);
    };
    reading(); // 15: +5
    expect(reads).toBe(2);
    reading(); // 12: a collection
    reading(); // 20: +8
    expect(lag.allocatedBytes()).toBe(13);
    reading(); // 20: nothing new
    expect(lag.allocatedBytes()).toBe(13);
  });

  test("stops probing when stopped", () => {
    const c = fakeClock();
    const lag = new LoopLag(c.clock);
    lag.start();
    expect(c.pending()).toBe(true);
    lag.stop();
    expect(c.pending()).toBe(false);
  });
});

describe("utcDay (the day of usage rows and quotas, made once per day)", () => {
  test("rolls over at UTC midnight, forwards and back", async () => {
    const { utcDay } = await import("../src/ids");
    const midnight = Date.UTC(2026, 10, 29);
    expect(utcDay(midnight - 1)).toBe("2026-11-28");
    expect(utcDay(midnight)).toBe("2026-11-29");
    expect(utcDay(midnight - 1)).toBe("2026-11-28");
    expect(utcDay(Date.UTC(2027, 0, 1, 12))).toBe("2027-01-01");
  });
});

describe("safeEqual (token hashes compared on every request)", () => {
  test("equal only when every character is, whatever the length or alphabet", async () => {
    const { safeEqual, sha256 } = await import("../src/ids");
    const h = sha256("ik_live_abc");
    expect(safeEqual(h, sha256("ik_live_abc"))).toBe(true);
    expect(safeEqual(h, `${h.slice(0, -1)}${h.endsWith("0") ? "1" : "0"}`)).toBe(false);
    expect(safeEqual(h, `x${h.slice(1)}`)).toBe(false);
    expect(safeEqual(h, h.slice(0, -1))).toBe(false);
    expect(safeEqual("", "")).toBe(true);
    expect(safeEqual("état", "état")).toBe(true);
    expect(safeEqual("état", "etat")).toBe(false);
  });
});
