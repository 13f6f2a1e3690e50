/**
 * A replica's output on disk: an append-only file capped in size. When it passes the cap it is
 * renamed to `<name>.1` (replacing the previous old generation) and a new file is started, so the
 * disk holds at most about twice the cap per replica. I/O errors never reach the caller.
 * Output is written in batches: a runtime that logs a line per request (vLLM's access log) costs
 * one write per batch, not one blocking write per line on the server's event loop.
 */
import { closeSync, mkdirSync, openSync, renameSync, fstatSync, writeSync } from "node:fs";
import { dirname } from "node:path";

/** Default size at which a log file is rotated: 10 MiB. */
export const DEFAULT_LOG_FILE_BYTES = 10 * 1024 * 1024;

/** Where output goes besides the ring; `LogFile` is the real one. */
export interface LogSink {
  write(chunk: Uint8Array | string): void;
}

/** Options of a `LogFile`. */
export interface LogFileOptions {
  /** Rotate once the file reaches this many bytes (default 10 MiB). */
  maxBytes?: number;
  /** Told about an I/O error once per run of failures (again only after a write has succeeded). */
  onError?: (error: Error) => void;
}

/** How long output may wait before it is written (ms): one write carries what came meanwhile. */
const FLUSH_AFTER_MS = 20;
/** Output held past this is written at once. */
const FLUSH_BYTES = 256 * 1024;

/**
 * A size-capped, rotating, append-only log file. Chunks are kept in order and written together
 * within FLUSH_AFTER_MS (at once past FLUSH_BYTES, and on `close`/`flush`).
 * @example const log = new LogFile("/var/lib/inferd/logs/w1-0.log"); log.write(chunk); log.close();
 */
export class LogFile implements LogSink {
  private fd: number | null = null;
  private size = 0;
  private failing = false;
  private readonly maxBytes: number;
  private pending: Uint8Array[] = [];
  private pendingBytes = 0;
  private timer: ReturnType<typeof setTimeout> | undefined;

  /** A log file at `path` (parent directories are made on first write); nothing is opened yet. */
  constructor(
    readonly path: string,
    private readonly opts: LogFileOptions = {},
  ) {
    this.maxBytes = Math.max(1, opts.maxBytes ?? DEFAULT_LOG_FILE_BYTES);
  }

  /** The path of the previous generation. */
  get oldPath(): string {
    return `${this.path}.1`;
  }

  /** Appends a chunk (written within FLUSH_AFTER_MS), rotating first when the file has reached its cap. Never throws. */
  write(chunk: Uint8Array | string): void {
    // The file is opened at once, so a path that cannot be written is reported on the first write.
    if (this.fd === null && !this.tryOpen()) return;
    const data = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
    if (data.length === 0) return;
    this.pending.push(data);
    this.pendingBytes += data.length;
    if (this.pendingBytes >= FLUSH_BYTES) this.flush();
    else if (!this.timer) {
      this.timer = setTimeout(() => this.flush(), FLUSH_AFTER_MS);
      this.timer.unref?.();
    }
  }

  /** Writes what is held now: the runs of chunks between rotations, one write each. Never throws. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const chunks = this.pending;
    this.pending = [];
    this.pendingBytes = 0;
    let run: Uint8Array[] = [];
    let runBytes = 0;
    try {
      if (this.fd === null) this.open();
      for (const data of chunks) {
        if (this.size + runBytes >= this.maxBytes) {
          this.writeRun(run, runBytes);
          run = [];
          runBytes = 0;
          this.rotate();
        }
        run.push(data);
        runBytes += data.length;
      }
      this.writeRun(run, runBytes);
      this.failing = false;
    } catch (e) {
      this.fail(e);
    }
  }

  /** Closes the file after writing what is held; a later `write` opens it again. Never throws. */
  close(): void {
    if (this.pending.length) this.flush();
    if (this.fd === null) return;
    try {
      closeSync(this.fd);
    } catch (e) {
      this.fail(e);
    }
    this.fd = null;
  }

  /** Appends one run of chunks with as few writes as the kernel allows. */
  private writeRun(run: Uint8Array[], bytes: number): void {
    if (bytes === 0) return;
    const data = run.length === 1 ? run[0] : Buffer.concat(run, bytes);
    let done = 0;
    while (done < data.length) done += writeSync(this.fd as number, data, done, data.length - done);
    this.size += data.length;
  }

  /** Opens the file when it can; false (reported once) when it cannot. */
  private tryOpen(): boolean {
    try {
      this.open();
      return true;
    } catch (e) {
      this.fail(e);
      return false;
    }
  }

  /** Opens (appending) the current file, making its directory, and learns its size. */
  private open(): void {
    mkdirSync(dirname(this.path), { recursive: true });
    const fd = openSync(this.path, "a");
    this.fd = fd;
    this.size = fstatSync(fd).size;
  }

  /** Moves the current file to `<path>.1` and starts an empty one. */
  private rotate(): void {
    this.close();
    renameSync(this.path, this.oldPath);
    this.open();
  }

  /** Closes a possibly broken descriptor and reports the error unless this run of failures was reported. */
  private fail(e: unknown): void {
    if (this.fd !== null) {
      try {
        closeSync(this.fd);
      } catch {
        // already reporting a failure on this file
      }
      this.fd = null;
    }
    if (this.failing) return;
    this.failing = true;
    const err = e instanceof Error ? e : new Error(String(e));
    try {
      this.opts.onError?.(err);
    } catch {
      // the caller's handler must not turn a log failure into a crash either
    }
  }
}
