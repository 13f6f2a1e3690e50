/**
 * Issue 32 item 0: periodic jobs that spawn a process (the agent's GPU probe) never overlap
 * themselves, and a stalled probe command is killed. On the landing before, `setInterval` started a
 * new `nvidia-smi` every interval whether or not the last had ended, and a busy machine piled them up.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, type HostLink } from "../agent/agent";
import { timedExec, type Exec } from "../agent/gpu";
import { SerialRunner, type Clock } from "../agent/serial";
import { LogRing } from "../agent/ring";
import { waitFor } from "./helpers/proc";

const dirs: string[] = [];
const agents: Agent[] = [];
afterEach(async () => {
  await Promise.all(agents.splice(0).map((a) => a.stop()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A host that accepts everything and wants no replicas; counts heartbeats. */
function quietHost(): HostLink & { heartbeats: number } {
  const host = {
    heartbeats: 0,
    register: async () => "wrk_probe",
    heartbeat: async () => {
      host.heartbeats++;
    },
    desired: async () => [],
    report: () => {},
    ringFor: () => new LogRing(),
    subscribe: () => () => {},
  };
  return host;
}

/** An Exec whose nvidia-smi takes `ms` to answer; records how many ran at once at most. */
function slowProbe(ms: number): Exec & { started: number; running: number; most: number } {
  const exec = Object.assign(
    async (argv: string[]) => {
      if (argv[0] !== "nvidia-smi") return null;
      exec.started++;
      exec.running++;
      exec.most = Math.max(exec.most, exec.running);
      await Bun.sleep(ms);
      exec.running--;
      return "0, GPU-aaaa, NVIDIA H200, 143771, 1024, 3, 40\n";
    },
    { started: 0, running: 0, most: 0 },
  );
  return exec;
}

describe("the agent's GPU probe", () => {
  test("a probe slower than the telemetry interval is never run beside itself", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "inferd-probe-"));
    dirs.push(dataDir);
    const exec = slowProbe(150);
    const host = quietHost();
    const agent = new Agent({
      host,
      dataDir,
      exec,
      telemetryMs: 10,
      env: { PATH: process.env.PATH },
      builtinLlama: () => ({ argv: [], env: {} }),
    });
    agents.push(agent);
    await agent.start();
    // Several intervals' worth of probes: each takes 15 intervals, so overlapping ones would pile up.
    await waitFor(() => exec.started >= 6, { what: "six probes", timeoutMs: 20_000 });
    expect(exec.most).toBe(1);
    expect(host.heartbeats).toBeGreaterThanOrEqual(4);
  });

  test("a stalled probe command is killed at its timeout and reads as no answer", async () => {
    const dir = mkdtempSync(join(tmpdir(), "inferd-probe-"));
    dirs.push(dir);
    const pidFile = join(dir, "pid");
    const script = join(dir, "nvidia-smi");
    // Stands in for nvidia-smi hung on a busy driver: prints nothing and never exits by itself.
    writeFileSync(script, `#!/bin/sh\necho $$ > ${pidFile}\nexec sleep 300\n`);
    chmodSync(script, 0o755);
    const started = Date.now();
    expect(await timedExec(300)([script])).toBeNull();
    expect(Date.now() - started).toBeLessThan(30_000);
    const pid = Number(await Bun.file(pidFile).text());
    const alive = () => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    await waitFor(() => !alive(), { what: "the stalled command to be gone", timeoutMs: 10_000 });
  });
});

/** Timers driven by hand: `fire()` runs what is due. */
function manualTimers(): Clock & { pending: number; fire: () => void } {
  let next: (() => void) | undefined;
  return {
    now: () => 0,
    setTimeout: (fn) => {
      next = fn;
      return fn;
    },
    clearTimeout: (h) => {
      if (h === next) next = undefined;
    },
    get pending() {
      return next ? 1 : 0;
    },
    fire() {
      const fn = next;
      next = undefined;
      fn?.();
    },
  };
}

describe("SerialRunner as a periodic job", () => {
  test("the next run is scheduled only when the last has ended", async () => {
    const timers = manualTimers();
    let release: () => void = () => {};
    let runs = 0;
    const job = new SerialRunner(
      () => {
        runs++;
        return new Promise<void>((r) => (release = r));
      },
      { every: 1000, clock: timers, onError: () => {} },
    );
    job.start();
    expect(timers.pending).toBe(1);
    timers.fire();
    expect(runs).toBe(1);
    expect(timers.pending).toBe(0);
    release();
    await Bun.sleep(0);
    expect(timers.pending).toBe(1);
    await job.stop();
    expect(timers.pending).toBe(0);
  });

  test("run() during a run waits for it and then runs once more, however often it is asked", async () => {
    const timers = manualTimers();
    const releases: Array<() => void> = [];
    let running = 0;
    let most = 0;
    const job = new SerialRunner(
      () => {
        running++;
        most = Math.max(most, running);
        return new Promise<void>((r) => releases.push(() => (running--, r())));
      },
      { every: 1000, clock: timers, onError: () => {} },
    );
    job.start();
    const first = job.run();
    const followers = [job.run(), job.run(), job.run()];
    expect(releases.length).toBe(1);
    releases[0]();
    await first;
    await waitFor(() => releases.length === 2, { what: "the follow-up run", timeoutMs: 1000 });
    releases[1]();
    await Promise.all(followers);
    expect(releases.length).toBe(2);
    expect(most).toBe(1);
    await job.stop();
  });

  test("a run that throws does not end the schedule", async () => {
    const timers = manualTimers();
    let runs = 0;
    const job = new SerialRunner(
      async () => {
        runs++;
        throw new Error("probe failed");
      },
      { every: 1000, clock: timers, onError: () => {} },
    );
    job.start();
    timers.fire();
    await Bun.sleep(0);
    await Bun.sleep(0);
    expect(timers.pending).toBe(1);
    timers.fire();
    await Bun.sleep(0);
    expect(runs).toBe(2);
    await job.stop();
  });
});
