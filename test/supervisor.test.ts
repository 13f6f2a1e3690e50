/**
 * The runtime supervisor, ring and log file, driven with real child processes on a real PTY:
 * small bun and sh scripts written to a temp dir stand in for vLLM or llama-server.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LogFile } from "../agent/logfile.ts";
import { LogRing, renderLines } from "../agent/ring.ts";
import {
  ptySpawn,
  Supervisor,
  type SpawnFn,
  type SupervisorOptions,
  type SupervisorState,
} from "../agent/supervisor.ts";
import { waitFor as pollFor } from "./helpers/proc";

/** A fake runtime: colours, a `\r` progress bar, optional grandchild, then /health on argv port. */
const RUNTIME_TS = `
const [port, label] = process.argv.slice(2);
console.log("\\x1b[32mINFO\\x1b[0m loading weights for " + label + " (tty=" + process.stdout.isTTY + ")");
const steps = Number(process.env.STEPS ?? 0);
for (let i = 0; i <= steps; i++) {
  process.stdout.write("\\rLoading: " + Math.round((i / Math.max(steps, 1)) * 100) + "%");
  if (i < steps) await Bun.sleep(100);
}
process.stdout.write("\\n");
if (process.env.GRANDCHILD) {
  const g = Bun.spawn(["sh", "-c", "trap '' TERM HUP; exec sleep 300"], { stdio: ["ignore", "inherit", "inherit"] });
  console.log("grandchild pid=" + g.pid);
}
let crash = false;
if (process.env.CRASH_FILE) {
  const f = process.env.CRASH_FILE;
  const n = (await Bun.file(f).exists()) ? Number(await Bun.file(f).text()) : 0;
  await Bun.write(f, String(n + 1));
  crash = n < Number(process.env.CRASHES ?? 0);
}
Bun.serve({ port: Number(port), hostname: "127.0.0.1", fetch(req) {
  if (new URL(req.url).pathname !== "/health") return new Response("no", { status: 404 });
  if (crash) setTimeout(() => { console.log("\\x1b[31mfatal: CUDA error: an illegal memory access\\x1b[0m"); process.exit(7); }, 100);
  return new Response("ok");
} });
console.log("\\x1b[1mready\\x1b[0m " + label + " on port " + port);
`;

/** A runtime that prints a little and always exits with code 7. */
const ALWAYS_EXITS_SH = `echo "starting attempt"
i=1; while [ $i -le 25 ]; do echo "trace line $i"; i=$((i+1)); done
printf '\\033[31mERROR\\033[0m CUDA out of memory\\n'
exit 7
`;

const dirs: string[] = [];
const supervisors: Supervisor[] = [];

afterEach(async () => {
  await Promise.all(supervisors.splice(0).map((s) => s.stop()));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A fresh temp dir holding the fixture scripts. */
function fixtures(): { dir: string; runtime: string; alwaysExits: string } {
  const dir = mkdtempSync(join(tmpdir(), "inferd-supervisor-"));
  dirs.push(dir);
  writeFileSync(join(dir, "runtime.ts"), RUNTIME_TS);
  writeFileSync(join(dir, "always-exits.sh"), ALWAYS_EXITS_SH);
  return { dir, runtime: join(dir, "runtime.ts"), alwaysExits: join(dir, "always-exits.sh") };
}

/** A loopback port that was free a moment ago. */
function freePort(): number {
  const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() });
  const port = server.port as number;
  server.stop(true);
  return port;
}

/** The suites' one polling helper, with this file's argument order. */
const waitFor = <T>(what: string, check: () => T, timeoutMs = 15_000) =>
  pollFor(check, { what, timeoutMs, intervalMs: 20 });

/** Whether a pid no longer runs (gone, or a zombie waiting for a reaper). */
function isGone(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return true;
  }
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]?.startsWith("Z") ?? false;
  } catch {
    return true;
  }
}

/** A supervisor with quick test timings, recording every state it enters. */
function supervise(opts: Partial<SupervisorOptions> & Pick<SupervisorOptions, "argv">) {
  const states: { state: SupervisorState; reason?: string }[] = [];
  const ring = opts.ring ?? new LogRing();
  const sup = new Supervisor({
    env: { ...(process.env as Record<string, string>) },
    healthUrls: [],
    startTimeoutMs: 20_000,
    stallTimeoutMs: 10_000,
    restart: { baseMs: 50, maxMs: 1_000, maxCrashes: 3, windowMs: 60_000 },
    graceMs: 500,
    healthIntervalMs: 50,
    onState: (state, reason) => states.push({ state, reason }),
    ...opts,
    ring,
  });
  supervisors.push(sup);
  return { sup, ring, states, names: () => states.map((s) => s.state) };
}

describe("Supervisor", () => {
  test("becomes ready once health answers, keeping colours and progress bars in the ring and the log file", async () => {
    const { dir, runtime } = fixtures();
    const port = freePort();
    const logFile = new LogFile(join(dir, "logs", "w1-0.log"));
    let installed = false;
    const { sup, ring, names } = supervise({
      argv: [process.execPath, runtime, String(port), "w1"],
      env: { ...(process.env as Record<string, string>), STEPS: "12" },
      healthUrls: [`http://127.0.0.1:${port + 1}/nothing-here`, `http://127.0.0.1:${port}/health`],
      stallTimeoutMs: 800, // shorter than the 1.2 s progress bar: output must keep resetting it
      logFile,
      beforeStart: async () => void (installed = true),
    });
    sup.start();
    await waitFor("ready", () => sup.state === "ready" || sup.state === "failed");
    expect(sup.reason ?? "").toBe("");
    expect(names()).toEqual(["installing", "starting", "ready"]);
    expect(installed).toBe(true);
    const text = ring.text();
    expect(text).toContain("\x1b[32mINFO\x1b[0m loading weights for w1 (tty=true)");
    expect(text).toContain("\rLoading: 50%");
    expect(ring.lastLines(3).split("\n")).toEqual([
      "INFO loading weights for w1 (tty=true)",
      "Loading: 100%",
      "ready w1 on port " + port,
    ]);
    logFile.close();
    expect(readFileSync(logFile.path, "utf8")).toBe(text);
    expect(await (await fetch(`http://127.0.0.1:${port}/health`)).text()).toBe("ok");
  });

  test("a runtime that exits with code 7 while ready is restarted with backoff and becomes ready again", async () => {
    const { dir, runtime } = fixtures();
    const port = freePort();
    const { sup, states, names } = supervise({
      argv: [process.execPath, runtime, String(port), "w2"],
      env: { ...(process.env as Record<string, string>), CRASH_FILE: join(dir, "crashes"), CRASHES: "1" },
      healthUrls: [`http://127.0.0.1:${port}/health`],
    });
    sup.start();
    await waitFor("ready", () => sup.state === "ready");
    const firstPid = sup.pid;
    await waitFor(
      "a crash and a second ready",
      () => names().filter((s) => s === "ready").length === 2 || sup.state === "failed",
    );
    expect(names()).toEqual(["starting", "ready", "restarting", "starting", "ready"]);
    expect(sup.restarts).toBe(1);
    expect(sup.pid).not.toBe(firstPid);
    const restarting = states.find((s) => s.state === "restarting")?.reason ?? "";
    expect(restarting).toContain("exited with code 7; restarting in 50 ms");
    expect(restarting).toContain("fatal: CUDA error: an illegal memory access");
  });

  test("a runtime that always exits fails after maxCrashes, naming the exit code and its last lines", async () => {
    const { alwaysExits } = fixtures();
    const { sup, states, names } = supervise({
      argv: ["sh", alwaysExits],
      healthUrls: [`http://127.0.0.1:${freePort()}/health`],
      restart: { baseMs: 20, maxMs: 1_000, maxCrashes: 2, windowMs: 60_000 },
    });
    sup.start();
    await waitFor("failed", () => sup.state === "failed");
    expect(names()).toEqual(["starting", "restarting", "starting", "restarting", "starting", "failed"]);
    const delays = states
      .filter((s) => s.state === "restarting")
      .map((s) => /restarting in (\d+) ms/.exec(s.reason ?? "")?.[1]);
    expect(delays).toEqual(["20", "40"]);
    const reason = sup.reason ?? "";
    expect(reason).toStartWith(
      "sh exited with code 7; it crashed 3 times within 60 s, giving up\n--- last output ---\n",
    );
    expect(reason).toContain("trace line 25\nERROR CUDA out of memory");
    expect(reason).not.toContain("\x1b");
    expect(reason.split("\n").length).toBe(2 + 20);
    expect(sup.restarts).toBe(2);
  });

  test("a silent runtime that never answers health fails on the stall timeout and is killed", async () => {
    const { sup, names } = supervise({
      argv: ["sh", "-c", 'echo "loading the model"; exec sleep 300'],
      healthUrls: [`http://127.0.0.1:${freePort()}/health`],
      stallTimeoutMs: 300,
    });
    sup.start();
    const pid = (await waitFor("a pid", () => sup.pid)) as number;
    await waitFor("failed", () => sup.state === "failed");
    expect(names()).toEqual(["starting", "failed"]);
    expect(sup.reason).toBe(
      "sh no output for 0.3 s and not ready (stall timeout)\n--- last output ---\nloading the model",
    );
    expect(isGone(pid)).toBe(true);
  });

  test("a silent runtime that keeps a CPU busy (loading a large model) is not ended by the stall timeout", async () => {
    const { sup, ring } = supervise({
      argv: ["sh", "-c", 'echo "loading the model"; while :; do :; done'],
      healthUrls: [`http://127.0.0.1:${freePort()}/health`],
      startTimeoutMs: 2_000,
      stallTimeoutMs: 300,
    });
    sup.start();
    await waitFor("failed", () => sup.state === "failed");
    expect(sup.reason).toStartWith("sh not ready within 2 s (start timeout)");
    expect(ring.text()).toContain("but the runtime is busy");
  });

  test("a runtime that keeps printing but never becomes ready fails on the start timeout", async () => {
    const { sup } = supervise({
      argv: ["sh", "-c", 'i=0; while :; do i=$((i+1)); echo "still loading $i"; sleep 0.05; done'],
      healthUrls: [`http://127.0.0.1:${freePort()}/health`],
      startTimeoutMs: 700,
      stallTimeoutMs: 300,
    });
    sup.start();
    await waitFor("failed", () => sup.state === "failed");
    expect(sup.reason).toMatch(
      /^sh not ready within 0\.7 s \(start timeout\)\n--- last output ---\n(still loading \d+\n?)+$/,
    );
  });

  test("stop() ends the whole process group, a grandchild that ignores SIGTERM included", async () => {
    const { runtime } = fixtures();
    const port = freePort();
    const { sup, ring, names } = supervise({
      argv: [process.execPath, runtime, String(port), "w3"],
      env: { ...(process.env as Record<string, string>), GRANDCHILD: "1" },
      healthUrls: [`http://127.0.0.1:${port}/health`],
      graceMs: 300,
    });
    sup.start();
    await waitFor("ready", () => sup.state === "ready");
    const pid = sup.pid as number;
    const grandchild = Number(/grandchild pid=(\d+)/.exec(ring.text())?.[1]);
    expect(isGone(grandchild)).toBe(false);
    await sup.stop();
    expect(isGone(pid)).toBe(true);
    await waitFor("the grandchild to be gone", () => isGone(grandchild), 5_000);
    expect(names()).toEqual(["starting", "ready", "stopped"]);
    expect(sup.pid).toBeUndefined();
    await sup.stop(); // a second stop is harmless
    expect(
      await fetch(`http://127.0.0.1:${port}/health`).then(
        () => "answered",
        () => "refused",
      ),
    ).toBe("refused");
  });

  test("restartNow() replaces the process with the edited command and resets the crash count", async () => {
    const { dir, runtime } = fixtures();
    const port = freePort();
    const { sup, ring, names } = supervise({
      argv: [process.execPath, runtime, String(port), "v1"],
      env: { ...(process.env as Record<string, string>), CRASH_FILE: join(dir, "crashes"), CRASHES: "1" },
      healthUrls: [`http://127.0.0.1:${port}/health`],
    });
    sup.start();
    await waitFor("ready after one crash", () => sup.restarts === 1 && sup.state === "ready");
    const oldPid = sup.pid as number;
    await sup.restartNow({ argv: [process.execPath, runtime, String(port), "v2"] });
    await waitFor("ready with v2", () => sup.state === "ready" && ring.text().includes("ready\x1b[0m v2"));
    expect(isGone(oldPid)).toBe(true);
    expect(sup.restarts).toBe(0);
    expect(names().slice(-4)).toEqual(["ready", "restarting", "starting", "ready"]);
  });

  test("a failing beforeStart ends in failed with its message, and nothing is spawned", async () => {
    const spawned: string[][] = [];
    const spy: SpawnFn = (req) => (spawned.push(req.argv), ptySpawn(req));
    const { sup, names } = supervise({
      argv: ["sh", "-c", "echo should not run"],
      spawn: spy,
      beforeStart: async () => {
        throw new Error("pip install vllm==0.99 failed: no matching distribution");
      },
    });
    sup.start();
    await waitFor("failed", () => sup.state === "failed");
    expect(names()).toEqual(["installing", "failed"]);
    expect(sup.reason).toBe("preparing the runtime failed: pip install vllm==0.99 failed: no matching distribution");
    expect(spawned).toEqual([]);
  });

  test("stop() while installing aborts beforeStart, and nothing is spawned", async () => {
    const spawned: string[][] = [];
    let installing = false;
    let aborted = false;
    const { sup, names } = supervise({
      argv: ["sh", "-c", "echo should not run"],
      spawn: (req) => (spawned.push(req.argv), ptySpawn(req)),
      beforeStart: (signal) =>
        new Promise((_, reject) => {
          installing = true;
          signal.addEventListener("abort", () => ((aborted = true), reject(signal.reason)));
        }),
    });
    sup.start();
    expect(sup.state).toBe("installing");
    await waitFor("beforeStart to run", () => installing);
    await sup.stop();
    expect(names()).toEqual(["installing", "stopped"]);
    expect(aborted).toBe(true);
    expect(spawned).toEqual([]);
  });

  test("a command that does not exist fails at once with 'command not found'", async () => {
    const { sup, names } = supervise({ argv: ["inferd-no-such-runtime-xyz", "serve"] });
    sup.start();
    expect(sup.state).toBe("failed");
    expect(sup.reason).toBe("command not found: inferd-no-such-runtime-xyz");
    expect(names()).toEqual(["starting", "failed"]);
  });
});

describe("LogFile", () => {
  test("rotates to <name>.1 at the cap, keeping one old generation, and makes parent dirs", () => {
    const { dir } = fixtures();
    const log = new LogFile(join(dir, "a", "b", "r.log"), { maxBytes: 1000 });
    for (let i = 0; i < 35; i++) log.write(`line ${String(i).padStart(3, "0")} ${"x".repeat(90)}\n`); // 100 bytes each
    log.close();
    const current = readFileSync(log.path, "utf8");
    const old = readFileSync(log.oldPath, "utf8");
    expect(statSync(log.path).size).toBe(500);
    expect(statSync(log.oldPath).size).toBe(1000);
    expect(current.startsWith("line 030")).toBe(true);
    expect(old.startsWith("line 020") && old.includes("line 029")).toBe(true);
    expect(existsSync(`${log.path}.2`)).toBe(false);
    log.write("after reopen\n");
    log.flush();
    expect(readFileSync(log.path, "utf8").endsWith("line 034 " + "x".repeat(90) + "\nafter reopen\n")).toBe(true);
  });

  test("output written meanwhile reaches the file in order on its own, within moments", async () => {
    const { dir } = fixtures();
    const log = new LogFile(join(dir, "r.log"));
    const lines = Array.from(
      { length: 200 },
      (_, i) => `INFO: 127.0.0.1 - "POST /v1/chat/completions HTTP/1.1" 200 OK #${i}\n`,
    );
    for (const line of lines) log.write(line);
    await waitFor(
      "the lines in the file",
      () => existsSync(log.path) && readFileSync(log.path, "utf8") === lines.join(""),
    );
    log.close();
  });

  test("an I/O error never throws into the caller and is reported once", () => {
    const { dir } = fixtures();
    writeFileSync(join(dir, "not-a-dir"), "");
    const errors: Error[] = [];
    const log = new LogFile(join(dir, "not-a-dir", "r.log"), { onError: (e) => errors.push(e) });
    for (let i = 0; i < 5; i++) log.write("hello\n");
    expect(errors.length).toBe(1);
    expect(errors[0].message).toContain("not-a-dir");
  });
});

describe("LogRing", () => {
  test("since(offset) follows live output and reports what was dropped", () => {
    const ring = new LogRing(10);
    const seen: string[] = [];
    const unsubscribe = ring.subscribe((chunk, offset) => seen.push(`${offset}:${new TextDecoder().decode(chunk)}`));
    ring.push("abcd");
    ring.push(new TextEncoder().encode("efgh"));
    const first = ring.since(0);
    expect(new TextDecoder().decode(first.data)).toBe("abcdefgh");
    expect([first.start, first.end, first.truncated]).toEqual([0, 8, false]);
    ring.push("ijklmn");
    unsubscribe();
    ring.push("op");
    expect(seen).toEqual(["0:abcd", "4:efgh", "8:ijklmn"]);
    const next = ring.since(first.end);
    expect(new TextDecoder().decode(next.data)).toBe("ijklmnop");
    expect([next.start, next.end, next.truncated]).toEqual([8, 16, false]);
    const behind = ring.since(2);
    expect(new TextDecoder().decode(behind.data)).toBe("ghijklmnop");
    expect([behind.start, behind.truncated]).toEqual([6, true]);
    expect(new TextDecoder().decode(ring.since(12).data)).toBe("mnop");
    expect(new TextDecoder().decode(ring.tail(3))).toBe("nop");
    expect(ring.size).toBe(10);
    ring.push("0123456789ABCDEF");
    expect(ring.text()).toBe("6789ABCDEF");
    expect([ring.start, ring.end]).toEqual([22, 32]);
  });

  test("lastLines strips escapes and collapses \\r-redrawn progress lines to their final state", () => {
    const ring = new LogRing();
    ring.push("\x1b[32mINFO\x1b[0m start\r\n");
    ring.push("Downloading:  10%|█         |\rDownloading:  55%|█████     |");
    ring.push("\rDownloading: 100%|██████████|\r\n");
    ring.push("\x1b]0;title\x07abcdef\rXY\r\n");
    ring.push("old text\r\x1b[2Knew\r\n\r\n");
    expect(ring.lastLines(4)).toBe("INFO start\nDownloading: 100%|██████████|\nXYcdef\nnew");
    expect(ring.lastLines(2)).toBe("XYcdef\nnew");
    expect(renderLines("a\x1b[?25lb\x1b[5Gc")).toEqual(["ab  c"]);
  });
});
