/**
 * Supervises one runtime process (vLLM, llama-server, …): spawns it on a PTY, sends its output to
 * a ring and a log file, polls health until it is ready, restarts it with backoff when it crashes,
 * gives up after too many crashes, and stops it by signalling its whole process group.
 * Every failure reason names the exit code or signal and ends with the last lines of output.
 */
import { groupCpuMs } from "./proc-cpu";
import { existsSync } from "node:fs";
import { connect } from "node:net";
import type { LogSink } from "./logfile.ts";
import type { LogRing } from "./ring.ts";
import { reasonWithOutput } from "./reason";

/** Where a supervised runtime is in its life. */
export type SupervisorState = "installing" | "starting" | "ready" | "restarting" | "failed" | "stopped";

/** How a process ended: an exit code, or the signal that killed it. */
export interface ExitInfo {
  code: number | null;
  signal: string | null;
}

/**
 * A spawned process as the supervisor sees it: `exited` when the process itself ends, `outputClosed`
 * when every process holding its terminal has closed it, `kill` signals the whole process group
 * (a group already gone is no error), `close` releases the terminal once it has exited.
 */
export interface SpawnedProcess {
  pid: number;
  exited: Promise<ExitInfo>;
  outputClosed: Promise<void>;
  kill(signal: NodeJS.Signals): void;
  close(): void;
}

/** What `spawn` is given. It throws (with `code` ENOENT, EACCES, …) when the process cannot start. */
export interface SpawnRequest {
  argv: string[];
  env: Record<string, string>;
  cwd?: string;
  onData: (chunk: Uint8Array) => void;
}

/** Starts a process; `ptySpawn` is the real one. */
export type SpawnFn = (req: SpawnRequest) => SpawnedProcess;

/** Restart backoff: `baseMs · 2^(n-1)` up to `maxMs`; more than `maxCrashes` crashes within `windowMs` → failed. */
export interface RestartPolicy {
  baseMs: number;
  maxMs: number;
  maxCrashes: number;
  windowMs: number;
}

/** Options of a `Supervisor`; timings default to `SUPERVISOR_DEFAULTS`, side effects to the real ones. */
export interface SupervisorOptions {
  argv: string[];
  env: Record<string, string>;
  cwd?: string;
  /**
   * Ready once any answers 2xx (a `tcp://host:port` URL: once it accepts a connection); with none,
   * ready as soon as the process is spawned.
   */
  healthUrls: string[];
  /**
   * Whether the listener the health URLs reach belongs to process `pid` (or its descendants): an
   * answer from anyone else does not make the runtime ready. `null` means it cannot be told here.
   */
  ownsListener?: (pid: number) => Promise<boolean | null>;
  ring: LogRing;
  logFile?: LogSink;
  /** Limit from spawn to ready. */
  startTimeoutMs?: number;
  /**
   * No output and not ready for this long → failed; any output resets it, and so does a runtime that
   * kept a CPU busy meanwhile (at least a tenth of one over the window: loading a large model from
   * disk prints nothing for minutes but works).
   */
  stallTimeoutMs?: number;
  /** CPU time (ms) used so far by the runtime's process group, null when it cannot be told; default /proc's. */
  cpuMs?: (pgid: number) => number | null;
  restart?: RestartPolicy;
  /**
   * False: a crash ends in `failed` at once instead of a restart (a multi-node group member, which
   * the host restarts with its whole group).
   */
  restartOnCrash?: boolean;
  /** Time between SIGTERM and SIGKILL of the process group. */
  graceMs?: number;
  healthIntervalMs?: number;
  probeTimeoutMs?: number;
  /**
   * Runs (state `installing`) before the first spawn of each `start()`/`restartNow()`, not before
   * crash restarts; `signal` aborts when a stop or restart makes it moot. Its failure → `failed`.
   */
  beforeStart?: (signal: AbortSignal) => Promise<void>;
  /** Told of every state change, with the reason for `restarting` and `failed`; must not throw. */
  onState?: (state: SupervisorState, reason?: string) => void;
  spawn?: SpawnFn;
  fetch?: (url: string, init?: RequestInit) => Promise<Response>;
  now?: () => number;
  setTimeout?: (fn: () => void, ms: number) => unknown;
  clearTimeout?: (handle: unknown) => void;
}

/** The options `restartNow` may change (an edited command, a new install step). */
export type SupervisorUpdate = Partial<Pick<SupervisorOptions, "argv" | "env" | "cwd" | "healthUrls" | "beforeStart">>;

/** Defaults of the optional timings: start 30 min, stall 5 min, grace 10 s, probe every 0.5 s for at most 2 s. */
export const SUPERVISOR_DEFAULTS = {
  startTimeoutMs: 30 * 60_000,
  stallTimeoutMs: 5 * 60_000,
  restart: { baseMs: 1_000, maxMs: 60_000, maxCrashes: 5, windowMs: 10 * 60_000 } as RestartPolicy,
  graceMs: 10_000,
  healthIntervalMs: 500,
  probeTimeoutMs: 2_000,
};

/** PTY size runtimes see: wide enough that progress bars do not wrap. */
export const PTY_SIZE = { cols: 160, rows: 50 };

/** How many output lines a failure reason carries. */
const REASON_LINES = 20;
/** How long to wait for remaining output after a process group is gone. */
const OUTPUT_DRAIN_MS = 1_000;

/**
 * The real `spawn`: `Bun.spawn` with a PTY (`terminal` option), so progress bars and colours survive.
 * The child is a session leader, so its pid is also its process group id.
 */
export const ptySpawn: SpawnFn = ({ argv, env, cwd, onData }) => {
  let closed: () => void = () => {};
  const outputClosed = new Promise<void>((resolve) => (closed = resolve));
  const terminal = { ...PTY_SIZE, data: (_t: Bun.Terminal, data: Uint8Array) => onData(data), exit: () => closed() };
  const proc = Bun.spawn(argv, { env: { TERM: "xterm-256color", ...env }, cwd, terminal });
  return {
    pid: proc.pid,
    exited: proc.exited.then(() => ({
      code: proc.exitCode,
      signal: proc.signalCode === null ? null : String(proc.signalCode),
    })),
    outputClosed,
    kill(signal) {
      try {
        process.kill(-proc.pid, signal); // negative pid: the whole process group
      } catch {
        // ESRCH: every process of the group is gone already
      }
    },
    close: () => proc.terminal?.close(),
  };
};

/** Whether `tcp://host:port` accepts a connection (closed at once). */
function tcpOpen(url: string, signal: AbortSignal): Promise<boolean> {
  const u = new URL(url.replace(/^tcp:/, "http:"));
  return new Promise((resolve) => {
    const socket = connect({ host: u.hostname.replace(/^\[(.*)\]$/, "$1"), port: Number(u.port) });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
    signal.addEventListener("abort", () => done(false), { once: true });
  });
}

/** "exited with code 7" / "was killed by SIGSEGV". */
export function describeExit(e: ExitInfo): string {
  return e.signal ? `was killed by ${e.signal}` : `exited with code ${e.code}`;
}

/** A spawn error as a user would want it: which command or directory was missing or not executable. */
function spawnErrorMessage(e: unknown, argv: string[]): string {
  const code = (e as { code?: string }).code;
  if (code === "ENOENT") return `command not found: ${argv[0]}`;
  if (code === "EACCES") return `command is not executable (permission denied): ${argv[0]}`;
  return `could not start ${argv[0]}: ${e instanceof Error ? e.message : String(e)}`;
}

/**
 * One spawned process: `outputFrom` is the ring offset where its output begins (failure reasons
 * quote only this run); `ending` is set when the supervisor itself ends it, so its exit is no crash.
 */
interface Run {
  proc: SpawnedProcess;
  spawnedAt: number;
  lastOutputAt: number;
  outputFrom: number;
  probes: AbortController;
  exited: boolean;
  ending: boolean;
  reaped?: Promise<void>;
  /** A health probe is under way. */
  checking?: boolean;
  /** A foreign listener on the port was noted in the log already. */
  notedForeign?: boolean;
  /** Output arrived during the probe: probe again soon rather than after the interval. */
  outputSinceCheck?: boolean;
  /** The process group's CPU time when the current stall window began (0 at spawn). */
  cpuAtWindow: number;
}

/** How soon after new output a starting runtime is probed (runtimes print as they become ready). */
const PROBE_AFTER_OUTPUT_MS = 10;

/**
 * Supervises ONE runtime process. Call `start()`, follow `onState`, `stop()` to end it.
 * @example const s = new Supervisor({ argv, env, healthUrls: [`http://127.0.0.1:${port}/health`], ring }); s.start();
 */
export class Supervisor {
  private _state: SupervisorState = "stopped";
  private _reason: string | undefined;
  private _restarts = 0;
  private gen = 0;
  private run: Run | undefined;
  private timer: unknown;
  private crashes: number[] = [];
  private stopping: Promise<void> | undefined;
  private install: { job: Promise<void>; abort: AbortController } | undefined;
  private readonly o: SupervisorOptions & typeof SUPERVISOR_DEFAULTS;
  private readonly now: () => number;
  private readonly setTimer: (fn: () => void, ms: number) => unknown;
  private readonly clearTimer: (handle: unknown) => void;

  /** A supervisor in state `stopped`; nothing runs until `start()`. Unset (or undefined) timings take the defaults. */
  constructor(opts: SupervisorOptions) {
    const given = Object.fromEntries(Object.entries(opts).filter(([, v]) => v !== undefined));
    this.o = { ...SUPERVISOR_DEFAULTS, ...given } as SupervisorOptions & typeof SUPERVISOR_DEFAULTS;
    this.now = opts.now ?? Date.now;
    this.setTimer = opts.setTimeout ?? ((fn, ms) => setTimeout(fn, ms));
    this.clearTimer = opts.clearTimeout ?? ((h) => clearTimeout(h as ReturnType<typeof setTimeout>));
  }

  /** The current state. */
  get state(): SupervisorState {
    return this._state;
  }
  /** Why the state was entered (failures, restarts), if there is a reason. */
  get reason(): string | undefined {
    return this._reason;
  }
  /** Automatic restarts after crashes since the last `start()`/`restartNow()`. */
  get restarts(): number {
    return this._restarts;
  }
  /** The pid (and process group id) of the running process, if one runs. */
  get pid(): number | undefined {
    return this.run?.proc.pid;
  }

  /** Starts from `stopped` or `failed` (crash count reset); does nothing while already running. */
  start(): void {
    if (this.stopping) return void this.stopping.then(() => this.start());
    if (this._state !== "stopped" && this._state !== "failed") return;
    this.crashes = [];
    this._restarts = 0;
    void this.boot(++this.gen);
  }

  /** Stops the process group (SIGTERM, `graceMs`, SIGKILL); resolves once it has exited. Ends in `stopped`. */
  stop(): Promise<void> {
    this.stopping ??= this.halt().then(() => {
      this.stopping = undefined;
      this.setState("stopped");
    });
    return this.stopping;
  }

  /** Stops the process and starts afresh with `update` applied (crash count reset), e.g. after the command was edited; starts it even if it was stopped. */
  async restartNow(update: SupervisorUpdate = {}): Promise<void> {
    Object.assign(this.o, update);
    if (this._state !== "stopped" && this._state !== "failed") this.setState("restarting", "restart requested");
    const halted = this.halt();
    const gen = this.gen;
    await halted;
    if (gen !== this.gen) return; // a stop() or another restart came in meanwhile: the later call wins
    this._state = "stopped";
    this.start();
  }

  /** Invalidates pending work, then ends the current run (if any) and waits for it. */
  private async halt(): Promise<void> {
    this.gen++;
    this.clearTimer(this.timer);
    this.install?.abort.abort(new Error("stopped"));
    const run = this.run;
    if (!run) return;
    run.ending = true;
    await this.reap(run);
    if (this.run === run) this.run = undefined;
  }

  /**
   * Runs `beforeStart` (if any; after an aborted earlier one has settled, so two never overlap),
   * then spawns — unless a stop or restart came in between.
   */
  private async boot(gen: number): Promise<void> {
    const beforeStart = this.o.beforeStart;
    if (beforeStart) {
      this.setState("installing");
      const previous = this.install?.job;
      const abort = new AbortController();
      const job = (async () => {
        await previous?.catch(() => {});
        if (gen === this.gen) await beforeStart(abort.signal);
      })();
      this.install = { job, abort };
      try {
        await job;
      } catch (e) {
        if (gen === this.gen)
          this.setState("failed", `preparing the runtime failed: ${e instanceof Error ? e.message : String(e)}`);
        return;
      } finally {
        if (this.install?.job === job) this.install = undefined;
      }
    }
    if (gen === this.gen) this.spawnRun(gen);
  }

  /** Spawns one process, wires its output and exit, and begins polling health. */
  private spawnRun(gen: number): void {
    this.setState("starting");
    const { argv, env, cwd } = this.o;
    if (cwd !== undefined && !existsSync(cwd)) return this.setState("failed", `working directory not found: ${cwd}`);
    let run: Run | undefined;
    const outputFrom = this.o.ring.end;
    const onData = (chunk: Uint8Array) => {
      if (run) {
        run.lastOutputAt = this.now();
        // "Application startup complete", "server is listening": look now, not at the next interval.
        if (run.checking) run.outputSinceCheck = true;
        else if (this.live(gen, run)) {
          this.clearTimer(this.timer);
          const current = run;
          this.timer = this.setTimer(() => void this.check(gen, current), PROBE_AFTER_OUTPUT_MS);
        }
      }
      this.o.ring.push(chunk);
      this.o.logFile?.write(chunk);
    };
    let proc: SpawnedProcess;
    try {
      proc = (this.o.spawn ?? ptySpawn)({ argv, env, cwd, onData });
    } catch (e) {
      return this.setState("failed", spawnErrorMessage(e, argv));
    }
    const t = this.now();
    const r: Run = {
      proc,
      spawnedAt: t,
      lastOutputAt: t,
      outputFrom,
      probes: new AbortController(),
      exited: false,
      ending: false,
      cpuAtWindow: 0,
    };
    this.run = run = r;
    void proc.exited.then((info) => this.onExit(gen, r, info));
    if (this.o.healthUrls.length === 0) this.setState("ready");
    else this.timer = this.setTimer(() => void this.check(gen, r), 0);
  }

  /** One readiness check: start timeout, stall timeout, then a health probe; schedules the next. */
  private async check(gen: number, run: Run): Promise<void> {
    if (!this.live(gen, run)) return;
    const t = this.now();
    const secs = (ms: number) => `${Math.round(ms / 100) / 10} s`;
    if (t - run.spawnedAt >= this.o.startTimeoutMs)
      return this.giveUp(gen, run, `not ready within ${secs(this.o.startTimeoutMs)} (start timeout)`);
    if (t - run.lastOutputAt >= this.o.stallTimeoutMs && !this.busy(run, t))
      return this.giveUp(gen, run, `no output for ${secs(this.o.stallTimeoutMs)} and not ready (stall timeout)`);
    run.checking = true;
    run.outputSinceCheck = false;
    const healthy = await this.probe(run);
    run.checking = false;
    if (!this.live(gen, run)) return;
    if (healthy) return this.setState("ready");
    this.timer = this.setTimer(
      () => void this.check(gen, run),
      run.outputSinceCheck ? PROBE_AFTER_OUTPUT_MS : this.o.healthIntervalMs,
    );
  }

  /**
   * Whether a silent run kept at least a tenth of a CPU busy over its stall window (it is loading,
   * not hung): then the window starts again, noted once per window in the log.
   */
  private busy(run: Run, t: number): boolean {
    const cpu = (this.o.cpuMs ?? groupCpuMs)(run.proc.pid);
    if (cpu === null || cpu - run.cpuAtWindow < this.o.stallTimeoutMs / 10) return false;
    run.cpuAtWindow = cpu;
    run.lastOutputAt = t;
    const line = `\x1b[1;33m[inferd] no output for ${Math.round(this.o.stallTimeoutMs / 1000)} s, but the runtime is busy (${Math.round(cpu / 1000)} s of CPU so far): still waiting for it\x1b[0m\r\n`;
    this.o.ring.push(line);
    this.o.logFile?.write(line);
    return true;
  }

  /** Whether `run` is still the current, starting, unexited run of generation `gen`. */
  private live(gen: number, run: Run): boolean {
    return gen === this.gen && this.run === run && !run.exited && !run.ending && this._state === "starting";
  }

  /**
   * Whether any health URL answers 2xx within the probe timeout, from a listener of this run's own
   * process tree (another program on the port is noted once in the log and never makes it ready).
   */
  private async probe(run: Run): Promise<boolean> {
    const signal = AbortSignal.any([run.probes.signal, AbortSignal.timeout(this.o.probeTimeoutMs)]);
    const ok = (res: Response) => (void res.body?.cancel().catch(() => {}), res.ok);
    const answers = await Promise.all(
      this.o.healthUrls.map((url) =>
        url.startsWith("tcp://")
          ? tcpOpen(url, signal)
          : (this.o.fetch ?? fetch)(url, { signal }).then(ok, () => false),
      ),
    );
    if (!answers.some(Boolean)) return false;
    if (!this.o.ownsListener || (await this.o.ownsListener(run.proc.pid)) !== false) return true;
    if (!run.notedForeign) {
      run.notedForeign = true;
      const line = `\x1b[1;33m[inferd] ${this.o.healthUrls[0]} answers, but from a process this runtime did not start; waiting for the runtime's own listener\x1b[0m\r\n`;
      this.o.ring.push(line);
      this.o.logFile?.write(line);
    }
    return false;
  }

  /** Ends a run that did not become ready in time: kills it, then `failed`. */
  private async giveUp(gen: number, run: Run, why: string): Promise<void> {
    run.ending = true;
    await this.reap(run);
    if (gen !== this.gen) return;
    this.run = undefined;
    this.setState("failed", this.withOutput(run, `${this.o.argv[0]} ${why}`));
  }

  /** A process exited on its own: a crash. Restart with backoff, or `failed` after too many. */
  private async onExit(gen: number, run: Run, info: ExitInfo): Promise<void> {
    run.exited = true;
    if (run.ending) return;
    await this.reap(run);
    if (gen !== this.gen || run.ending) return;
    this.run = undefined;
    const { baseMs, maxMs, maxCrashes, windowMs } = this.o.restart;
    const t = this.now();
    this.crashes = [...this.crashes.filter((at) => t - at < windowMs), t];
    const n = this.crashes.length;
    const what = `${this.o.argv[0]} ${describeExit(info)}`;
    if (this.o.restartOnCrash === false) return this.setState("failed", this.withOutput(run, what));
    if (n > maxCrashes) {
      return this.setState(
        "failed",
        this.withOutput(run, `${what}; it crashed ${n} times within ${Math.round(windowMs / 1000)} s, giving up`),
      );
    }
    const delay = Math.min(maxMs, baseMs * 2 ** (n - 1));
    this.setState("restarting", this.withOutput(run, `${what}; restarting in ${delay} ms`));
    this.timer = this.setTimer(() => {
      if (gen !== this.gen) return;
      this._restarts++;
      this.spawnRun(gen);
    }, delay);
  }

  /**
   * Ends a run's whole process group: SIGTERM, wait up to `graceMs` for the process to exit and its
   * output to close, then SIGKILL whatever is left (grandchildren included). Idempotent.
   */
  private reap(run: Run): Promise<void> {
    run.reaped ??= (async () => {
      run.probes.abort();
      const { proc } = run;
      proc.kill("SIGTERM");
      await this.within(Promise.all([proc.exited, proc.outputClosed]), this.o.graceMs);
      proc.kill("SIGKILL");
      await proc.exited;
      await this.within(proc.outputClosed, OUTPUT_DRAIN_MS);
      proc.close();
    })();
    return run.reaped;
  }

  /** Waits for `p` or `ms`, whichever comes first. */
  private within(p: Promise<unknown>, ms: number): Promise<void> {
    let handle: unknown;
    const timeout = new Promise<void>((resolve) => (handle = this.setTimer(resolve, ms)));
    return Promise.race([p.then(() => this.clearTimer(handle)), timeout]);
  }

  /** `message` followed by the run's last lines of output, or a note that there were none. */
  private withOutput(run: Run, message: string): string {
    const lines = this.o.ring.lastLines(REASON_LINES, run.outputFrom);
    return lines ? reasonWithOutput(message, lines) : `${message} (it printed nothing)`;
  }

  /** Records a state and tells `onState`. */
  private setState(state: SupervisorState, reason?: string): void {
    this._state = state;
    this._reason = reason;
    this.o.onState?.(state, reason);
  }
}
