/**
 * A replica's output on disk: an append-only file capped in size. When it passes the cap it is
 * renamed to `<name>.1` (replacing the previous old generation) and a new file is started, so the
 * disk holds at most about twice the cap per replica. I/O errors never reach the caller.
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

/**
 * A size-capped, rotating, append-only log file. Writes are synchronous so chunks land in order.
 * @example const log = new LogFile("/var/lib/inferd/logs/w1-0.log"); log.write(chunk); log.close();
 */
export class LogFile implements LogSink {
  private fd: number | null = null;
  private size = 0;
  private failing = false;
  private readonly maxBytes: number;

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

  /** Appends a chunk, rotating first when the file has reached its cap. Never throws. */
  write(chunk: Uint8Array | string): void {
    try {
      if (this.fd === null) this.open();
      if (this.size >= this.maxBytes) this.rotate();
      const fd = this.fd as number;
      const data = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      let done = 0;
      while (done < data.length) done += writeSync(fd, data, done, data.length - done);
      this.size += data.length;
      this.failing = false;
    } catch (e) {
      this.fail(e);
    }
  }

  /** Closes the file; a later `write` opens it again. Never throws. */
  close(): void {
    if (this.fd === null) return;
    try {
      closeSync(this.fd);
    } catch (e) {
      this.fail(e);
    }
    this.fd = null;
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
