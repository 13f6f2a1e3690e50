import { describe, expect, test } from "bun:test";
import { AppError } from "../src/errors";
import { GroupCommit, type BatchTimer } from "../src/jobs/intake";
import { jobsIntakeSuite } from "./suites/jobs-intake";

/** A timer driven by the test: `fire()` runs what is armed. */
function fakeTimer() {
  const armed = new Map<number, { fn: () => void; ms: number }>();
  let next = 0;
  const timer: BatchTimer = {
    set: (fn, ms) => {
      armed.set(++next, { fn, ms });
      return next;
    },
    clear: (h) => void armed.delete(h as number),
  };
  return {
    timer,
    armed: () => [...armed.values()].map((a) => a.ms),
    fire: () => {
      const all = [...armed.values()];
      armed.clear();
      for (const a of all) a.fn();
    },
  };
}

/** Whether a promise has settled (after the microtasks queued so far). */
async function settled(p: Promise<unknown>): Promise<"resolved" | "rejected" | "pending"> {
  let state: "resolved" | "rejected" | "pending" = "pending";
  p.then(
    () => (state = "resolved"),
    () => (state = "rejected"),
  );
  await Promise.resolve();
  await Promise.resolve();
  return state;
}

describe("GroupCommit", () => {
  test("concurrent callers share one write, closed by the timer; each resolves only after the write", async () => {
    const t = fakeTimer();
    const writes: number[][] = [];
    const g = new GroupCommit<number>((rows) => void writes.push(rows), { maxRows: 10, maxWaitMs: 2, timer: t.timer });
    const a = g.submit([1]);
    const b = g.submit([2, 3]);
    expect(t.armed()).toEqual([2]);
    expect(await settled(a)).toBe("pending");
    expect(writes).toEqual([]);
    t.fire();
    expect(writes).toEqual([[1, 2, 3]]);
    expect(await settled(a)).toBe("resolved");
    expect(await settled(b)).toBe("resolved");
    expect(g.stats).toEqual({ batches: 1, rows: 3, failed: 0 });
  });

  test("a batch closes as soon as it holds maxRows rows, without waiting for the timer", async () => {
    const t = fakeTimer();
    const writes: number[][] = [];
    const g = new GroupCommit<number>((rows) => void writes.push(rows), { maxRows: 3, maxWaitMs: 2, timer: t.timer });
    const a = g.submit([1, 2]);
    const b = g.submit([3]);
    expect(writes).toEqual([[1, 2, 3]]);
    expect(t.armed()).toEqual([]);
    await Promise.all([a, b]);
    // A caller larger than a batch is written whole, in one transaction.
    await g.submit([4, 5, 6, 7, 8]);
    expect(writes[1]).toEqual([4, 5, 6, 7, 8]);
  });

  test("a failed write fails every caller in it with the mapped error; the next batch is written", async () => {
    const t = fakeTimer();
    let fail = true;
    const g = new GroupCommit<number>(
      (rows) => {
        if (fail) throw Object.assign(new Error("disk I/O error"), { code: "SQLITE_IOERR" });
        expect(rows).toEqual([9]);
      },
      { maxRows: 10, maxWaitMs: 2, timer: t.timer, callerError: (e) => new AppError(503, "job_not_stored", String(e)) },
    );
    const a = g.submit([1]);
    const b = g.submit([2]);
    t.fire();
    for (const p of [a, b]) {
      const e = await p.catch((x) => x);
      expect(e).toBeInstanceOf(AppError);
      expect(e.code).toBe("job_not_stored");
    }
    fail = false;
    const c = g.submit([9]);
    t.fire();
    await c;
    expect(g.stats).toMatchObject({ batches: 1, failed: 1 });
  });

  test("with retryAlone, one caller's bad row fails only that caller", async () => {
    const t = fakeTimer();
    const committed: number[] = [];
    const g = new GroupCommit<number>(
      (rows) => {
        if (rows.includes(-1)) throw Object.assign(new Error("constraint"), { code: "SQLITE_CONSTRAINT_FOREIGNKEY" });
        committed.push(...rows);
      },
      {
        maxRows: 10,
        maxWaitMs: 0,
        timer: t.timer,
        retryAlone: (e) => (e as { code: string }).code.startsWith("SQLITE_CONSTRAINT"),
      },
    );
    const good = g.submit([1, 2]);
    const bad = g.submit([3, -1]);
    const alsoGood = g.submit([4]);
    expect(t.armed()).toEqual([0]);
    t.fire();
    await good;
    await alsoGood;
    expect(await bad.catch((e) => e.code)).toBe("SQLITE_CONSTRAINT_FOREIGNKEY");
    expect(committed).toEqual([1, 2, 4]); // the bad caller's good row 3 is not half-written
  });
});

jobsIntakeSuite("sqlite");
