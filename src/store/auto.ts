import { join } from "node:path";
import { log } from "../log";
import { listBackups, type BackupKind } from "./backup";

/** Takes one backup; resolves with what to log, rejects with why it failed. Stops early when `signal` aborts. */
export type RunBackup = (signal: AbortSignal) => Promise<string>;

/** The longest delay a timer takes (about 24.8 days); longer waits are re-checked when it fires. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** How to run this inferd again: the binary itself, or Bun on `src/main.ts` from source. */
export const selfCommand = (): string[] =>
  Bun.isStandaloneExecutable ? [process.execPath] : [process.execPath, join(import.meta.dir, "..", "main.ts")];

/**
 * The real RunBackup: `inferd backup` in a child process, so the copy and its integrity check of a
 * large store never block the server's event loop. Its last output line is what gets logged.
 */
export function childBackup(dataDir: string, keep: number): RunBackup {
  return async (signal) => {
    const proc = Bun.spawn([...selfCommand(), "backup", "--data-dir", dataDir, "--backup-keep", String(keep)], {
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const kill = () => proc.kill();
    signal.addEventListener("abort", kill);
    try {
      const [out, err, code] = await Promise.all([
        new Response(proc.stdout).text(),
        new Response(proc.stderr).text(),
        proc.exited,
      ]);
      if (code !== 0) throw new Error((err || out).trim() || `inferd backup exited with code ${code}`);
      return out.trim().split("\n").pop() ?? "backup taken";
    } finally {
      signal.removeEventListener("abort", kill);
    }
  };
}

/** Settings and side effects of AutoBackups (`run` and `now` are injected in tests). */
export interface AutoBackupOptions {
  dataDir: string;
  /** Time between backups; 0 turns them off. */
  intervalMs: number;
  /** Backups kept in `<data-dir>/backups/` (0 keeps all). */
  keep: number;
  /** The earliest a backup runs after start, so a start (or a crash loop) is not slowed by one. */
  firstDelayMs?: number;
  run?: RunBackup;
  now?: () => number;
  /** Which archives count as backups: SQLite copies (default) or `pg_dump` archives. */
  kind?: BackupKind;
  /** Backups run only while this says so (in a cluster: while this host leads); checked again every minute. */
  when?: () => boolean;
}

/** How often a host that may not take backups now (it does not lead) looks again (at most: the interval, when shorter). */
const RECHECK_MS = 60_000;

/**
 * Automatic backups while serving: one when the newest in `<data-dir>/backups/` is `intervalMs` old
 * (a store without one gets its first `firstDelayMs` after start), each verified before it counts,
 * the oldest beyond `keep` removed. A failure is logged and tried again an hour (at most an interval) later.
 */
export class AutoBackups {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private readonly abort = new AbortController();
  private readonly earliest: number;
  private readonly run: RunBackup;
  private readonly now: () => number;
  private notBefore = 0;

  constructor(private readonly opts: AutoBackupOptions) {
    this.now = opts.now ?? Date.now;
    this.earliest = this.now() + (opts.firstDelayMs ?? 10 * 60_000);
    this.run = opts.run ?? childBackup(opts.dataDir, opts.keep);
  }

  /** When the next backup is due (ms since the epoch). */
  dueAt(): number {
    const newest = listBackups(this.opts.dataDir, this.opts.kind)[0];
    return Math.max(this.earliest, this.notBefore, newest ? newest.takenAt.getTime() + this.opts.intervalMs : 0);
  }

  /** Schedules the backups (nothing when the interval is 0). */
  start(): void {
    if (this.opts.intervalMs > 0) this.schedule();
  }

  /** Stops the schedule and a backup in progress. */
  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.abort.abort();
  }

  private schedule(): void {
    if (this.abort.signal.aborted) return;
    const wait = Math.min(Math.max(0, this.dueAt() - this.now()), MAX_TIMER_MS);
    this.timer = setTimeout(() => void this.tick(), wait);
  }

  private async tick(): Promise<void> {
    if (this.opts.when && !this.opts.when()) {
      this.timer = setTimeout(() => void this.tick(), Math.min(RECHECK_MS, this.opts.intervalMs));
      return;
    }
    if (this.now() >= this.dueAt()) {
      try {
        const done = await this.run(this.abort.signal);
        this.notBefore = this.now() + this.opts.intervalMs;
        log.info(`automatic backup: ${done}`);
      } catch (e) {
        if (this.abort.signal.aborted) return;
        this.notBefore = this.now() + Math.min(3_600_000, this.opts.intervalMs);
        log.warn(
          `automatic backup failed (next try in ${Math.round((this.notBefore - this.now()) / 60_000)} min): ${(e as Error).message}`,
        );
      }
    }
    this.schedule();
  }
}
