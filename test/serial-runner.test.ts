/**
 * The one serial runner of the background loops (agent/serial.ts), on a fake clock: passes never
 * overlap, requests made during a pass coalesce into exactly one more, the period counts from the
 * end of the last pass, `stop()` waits for the pass in progress, and a pass that throws is
 * reported while the schedule goes on.
 */
import { describe, expect, test } from "bun:test";
import { SerialRunner } from "../agent/serial";
import { fakeClock, settle, until } from "./helpers/clock";

/** A pass that stays open until the test ends it; counts passes and how many ran at once at most. */
function gatedPass() {
  const state = { passes: 0, running: 0, most: 0, gates: [] as Array<() => void> };
  const pass = () => {
    state.passes++;
    state.running++;
    state.most = Math.max(state.most, state.running);
    return new Promise<void>((resolve) => state.gates.push(() => (state.running--, resolve())));
  };
  /** Ends the pass in progress. */
  const end = () => state.gates.shift()!();
  return { state, pass, end };
}

describe("the serial runner", () => {
  test("requests during a pass coalesce into exactly one more pass after it, and every caller waits for that one", async () => {
    const { state, pass, end } = gatedPass();
    const runner = new SerialRunner(pass, { clock: fakeClock() });
    runner.start();
    const first = runner.run();
    expect(state.passes).toBe(1);
    let followed = 0;
    const followers = [runner.run(), runner.run(), runner.run()].map((p) => p.then(() => followed++));
    runner.wake();
    runner.wake();
    await settle();
    expect(state.passes).toBe(1);
    end();
    await first;
    await until(() => state.passes === 2, "the follow-up pass");
    expect(followed).toBe(0);
    end();
    await Promise.all(followers);
    await settle();
    expect(state.passes).toBe(2);
    expect(state.most).toBe(1);
  });

  test("wakes of one event-loop turn make one pass; passes never overlap however they are asked for", async () => {
    const { state, pass, end } = gatedPass();
    const clock = fakeClock();
    const runner = new SerialRunner(pass, { every: 100, clock });
    runner.start();
    for (let i = 0; i < 5; i++) runner.wake();
    await until(() => state.passes === 1, "the first pass");
    await settle();
    expect(state.passes).toBe(1);
    for (let round = 0; round < 5; round++) {
      runner.wake();
      void runner.run();
      runner.after(0);
      clock.advance(1000);
      end();
      await until(() => state.passes === round + 2, `pass ${round + 2}`);
    }
    expect(state.most).toBe(1);
    end();
    await runner.stop();
  });

  test("the period counts from the end of the last pass, however long the pass took", async () => {
    const { state, pass, end } = gatedPass();
    const clock = fakeClock(10_000);
    const runner = new SerialRunner(pass, { every: 1000, clock });
    runner.start();
    expect(clock.next()).toBe(11_000);
    clock.advance(1000);
    expect(state.passes).toBe(1);
    expect(clock.pending()).toBe(0); // nothing scheduled while a pass runs
    clock.advance(5000); // a slow pass: 5 s
    end();
    await until(() => clock.pending() === 1, "the next pass to be scheduled");
    expect(clock.next()).toBe(17_000);
    clock.advance(999);
    expect(state.passes).toBe(1);
    clock.advance(1);
    expect(state.passes).toBe(2);
    end();
    await runner.stop();
  });

  test("a pass asked for by run() restarts the period from its own end; after() asks for one sooner", async () => {
    const { state, pass, end } = gatedPass();
    const clock = fakeClock();
    const runner = new SerialRunner(pass, { every: 1000, clock });
    runner.start();
    clock.advance(400);
    const done = runner.run();
    end();
    await done;
    expect(clock.next()).toBe(1400);
    runner.after(100);
    expect(clock.next()).toBe(500);
    clock.advance(100);
    expect(state.passes).toBe(2);
    // Asked during a pass: honoured when it ends (sooner than the period).
    runner.after(50);
    end();
    await until(() => clock.pending() === 1, "the next pass to be scheduled");
    expect(clock.next()).toBe(550);
    await runner.stop();
  });

  test("stop() resolves once the pass in progress has ended; nothing runs after it until start()", async () => {
    const { state, pass, end } = gatedPass();
    const clock = fakeClock();
    const runner = new SerialRunner(pass, { every: 1000, clock });
    await runner.run(); // not started: nothing runs
    expect(state.passes).toBe(0);
    runner.start();
    void runner.run();
    const asked = runner.run();
    let stopped = false;
    const stopping = runner.stop().then(() => (stopped = true));
    await settle();
    expect(stopped).toBe(false);
    end();
    await stopping;
    await asked; // the pass asked for meanwhile is dropped, its caller released
    expect(state.passes).toBe(1);
    expect(clock.pending()).toBe(0);
    runner.wake();
    await runner.run();
    clock.advance(10_000);
    await settle();
    expect(state.passes).toBe(1);
    runner.start();
    expect(clock.next()).toBe(11_000);
  });

  test("a pass that throws is reported and the schedule goes on", async () => {
    const clock = fakeClock();
    const errors: unknown[] = [];
    let passes = 0;
    const runner = new SerialRunner(
      async () => {
        passes++;
        throw new Error(`pass ${passes} failed`);
      },
      { every: 1000, clock, onError: (e) => errors.push(e) },
    );
    runner.start();
    await runner.run();
    expect((errors[0] as Error).message).toBe("pass 1 failed");
    expect(clock.next()).toBe(1000);
    clock.advance(1000);
    await until(() => errors.length === 2, "the second failure");
    expect(clock.next()).toBe(2000);
    await runner.stop();
  });
});
