/**
 * One file from a URL to disk: resumable (`<dest>.part`, continued with `Range`), verified (size,
 * sha256, and the git blob id for small hub files) before an atomic rename to `dest`, retried with
 * backoff when the connection drops, cancellable with an AbortSignal. Bad bytes never land at
 * `dest`: they are moved to `<dest>.corrupt`.
 */
import { closeSync, ftruncateSync, mkdirSync, openSync, renameSync, statSync, writeSync } from "node:fs";
import { dirname } from "node:path";
import { hasherFor, type Hasher } from "./hasher";
import { fetchFollowing, startFromContentRange, totalFromContentRange } from "./http";

/** The limiter and progress meter live in progress.ts (no I/O); re-exported for callers of downloads. */
export { DownloadLimiter, Progress, type ProgressOptions, type ProgressSnapshot } from "./progress";

/** What `downloadFile` needs; `fetch`, the retry delay and the sleep are injectable for tests. */
export interface DownloadOptions {
  url: string;
  dest: string;
  /** The expected size (bytes); unknown when absent or negative. */
  size?: number;
  /** The expected sha256 (hex); checked before the file is put at `dest`. */
  sha256?: string | null;
  /** The expected git blob id (sha1 of `blob <size>\0<bytes>`), as the hub lists small files; needs `size`. */
  gitOid?: string | null;
  /** Sent to the origin of `url` only, never to a host a redirect leads to (e.g. `Authorization`). */
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Called with the bytes on disk so far (including bytes resumed from an earlier `.part`). */
  onProgress?(bytesDone: number): void;
  fetch?: typeof fetch;
  /** Failed attempts in a row (no byte gained) before giving up; default 5. */
  retries?: number;
  /** The delay before retry number `n` (1-based), ms; default 500 ms doubling to 30 s. */
  retryDelayMs?: (n: number) => number;
  /** Files of at least this many bytes are hashed in a worker thread; default `DEFAULT_HASH_WORKER_MIN_BYTES`. */
  hashWorkerMinBytes?: number;
}

/** What was downloaded: its size, its sha256 and how many bytes were already on disk. */
export interface DownloadResult {
  bytes: number;
  sha256: string;
  resumedFrom: number;
}

/** A download that failed: an HTTP status (`status`), a write error (`code`, e.g. ENOSPC) or too many drops. */
export class DownloadError extends Error {
  override name = "DownloadError";
  constructor(
    message: string,
    readonly url: string,
    readonly status?: number,
    readonly code?: string,
  ) {
    super(message);
  }
}

/** The bytes did not match the expected checksum; they were moved to `corruptPath`. */
export class ChecksumError extends Error {
  override name = "ChecksumError";
  constructor(
    readonly file: string,
    readonly expected: string,
    readonly got: string,
    readonly corruptPath: string,
    kind = "sha256",
  ) {
    super(
      `checksum mismatch for ${file}: expected ${kind} ${expected}, got ${got} (the bytes were moved to ${corruptPath})`,
    );
  }
}

/** The `.part` being written: its descriptor, bytes so far and running hashes. */
interface Part {
  path: string;
  fd: number;
  done: number;
  sha256: Hasher;
  sha1: Bun.CryptoHasher | null;
}

/**
 * From what size a download is hashed in a worker thread by default (below it, a worker's start-up
 * costs more than it saves). bench/models.ts measured a 256 MiB pull at 0.76–0.91× curl with the
 * worker and 0.63–0.80× with hashing inline, on 2 shared CPUs.
 */
export const DEFAULT_HASH_WORKER_MIN_BYTES = 64 << 20;

/** What one attempt ended with. */
type Attempt = { complete: true } | { complete: false; gained: number; error: string };

const defaultDelay = (n: number) => Math.min(30_000, 500 * 2 ** (n - 1));

/**
 * Downloads `url` to `dest` (see the module comment). Resolves once `dest` holds verified bytes;
 * rejects with `ChecksumError`, `DownloadError` or the signal's reason (the `.part` is kept for a
 * later resume, except after a checksum mismatch).
 * @example await downloadFile({ url, dest: "/models/x.gguf", size, sha256, onProgress: (n) => bar(n) });
 */
export async function downloadFile(opts: DownloadOptions): Promise<DownloadResult> {
  const size = opts.size !== undefined && opts.size >= 0 ? opts.size : undefined;
  const part = await openPart(opts, size);
  const resumedFrom = part.done;
  const retries = opts.retries ?? 5;
  let failures = 0;
  try {
    try {
      opts.onProgress?.(part.done);
      for (;;) {
        opts.signal?.throwIfAborted();
        const outcome = await attempt(opts, part, size);
        if (outcome.complete) break;
        failures = outcome.gained > 0 ? 1 : failures + 1;
        if (failures > retries)
          throw new DownloadError(
            `download of ${opts.url} failed ${failures} times in a row: ${outcome.error}`,
            opts.url,
          );
        await sleep((opts.retryDelayMs ?? defaultDelay)(failures), opts.signal);
      }
    } finally {
      closeSync(part.fd);
    }
    return await finish(opts, part, size, resumedFrom);
  } finally {
    part.sha256.close();
  }
}

/** A readable message for a failed write (ENOSPC, EACCES, EROFS…). */
function writeError(e: unknown, path: string, url: string): DownloadError {
  const err = e as NodeJS.ErrnoException;
  const what: Record<string, string> = {
    ENOSPC: "no space left on the device",
    EDQUOT: "disk quota exceeded",
    EACCES: "permission denied",
    EPERM: "operation not permitted",
    EROFS: "read-only file system",
    EIO: "I/O error",
  };
  return new DownloadError(
    `cannot write ${path}: ${what[err.code ?? ""] ?? err.message} (${err.code ?? "error"})`,
    url,
    undefined,
    err.code ?? "EIO",
  );
}

/** Opens `<dest>.part`, hashing what an earlier attempt left there (dropped when longer than `size`). */
async function openPart(opts: DownloadOptions, size: number | undefined): Promise<Part> {
  const path = `${opts.dest}.part`;
  let st;
  try {
    mkdirSync(dirname(opts.dest), { recursive: true });
    st = statSync(path, { throwIfNoEntry: false });
  } catch (e) {
    throw writeError(e, path, opts.url);
  }
  const resumable = !!st?.isFile() && (size === undefined || st.size <= size);
  const part: Part = { path, fd: -1, done: 0, ...newHashers(opts, size) };
  try {
    if (resumable && st!.size > 0) {
      for await (const chunk of Bun.file(path).stream()) await hashChunk(part, chunk);
    }
    part.fd = openSync(path, resumable ? "a" : "w");
  } catch (e) {
    part.sha256.close();
    throw writeError(e, path, opts.url);
  }
  return part;
}

/** Fresh hashers for a file of `size` bytes (a git blob id too when one is expected). */
function newHashers(opts: DownloadOptions, size: number | undefined): Pick<Part, "sha256" | "sha1"> {
  return {
    sha256: hasherFor(size, opts.hashWorkerMinBytes ?? DEFAULT_HASH_WORKER_MIN_BYTES),
    sha1: opts.gitOid && size !== undefined ? new Bun.CryptoHasher("sha1").update(`blob ${size}\0`) : null,
  };
}

/** Counts and hashes one chunk already on disk (the sha256 hasher may take the chunk's buffer). */
async function hashChunk(part: Part, chunk: Uint8Array): Promise<void> {
  part.done += chunk.length;
  part.sha1?.update(chunk);
  const wait = part.sha256.update(chunk);
  if (wait) await wait;
}

/** Empties the part (the server ignored `Range`, or sent another start). */
function resetPart(part: Part, opts: DownloadOptions, size: number | undefined): void {
  try {
    ftruncateSync(part.fd, 0);
  } catch {
    // not a regular file (e.g. a device): nothing to truncate
  }
  part.done = 0;
  part.sha256.close();
  Object.assign(part, newHashers(opts, size));
}

/** Sends one request (ranged when bytes are on disk) and appends its body. */
async function attempt(opts: DownloadOptions, part: Part, size: number | undefined): Promise<Attempt> {
  if (size !== undefined && part.done === size) return { complete: true };
  // identity: a compressed answer would make byte offsets (and Range) meaningless.
  const headers: Record<string, string> = {
    "accept-encoding": "identity",
    ...(part.done > 0 ? { range: `bytes=${part.done}-` } : {}),
  };
  let res: Response;
  try {
    ({ res } = await fetchFollowing(opts.url, {
      fetch: opts.fetch,
      headers,
      credentials: { origin: new URL(opts.url).origin, headers: opts.headers ?? {} },
      signal: opts.signal,
    }));
  } catch (e) {
    if (opts.signal?.aborted) throw opts.signal.reason;
    return { complete: false, gained: 0, error: (e as Error).message };
  }
  const drop = async (error: string): Promise<Attempt> => {
    await res.body?.cancel().catch(() => {});
    return { complete: false, gained: 0, error };
  };
  if (res.status === 416) {
    const total = size ?? totalFromContentRange(res.headers.get("content-range"));
    if (part.done > 0 && part.done === total) return drop("").then(() => ({ complete: true }));
    resetPart(part, opts, size);
    return drop(`the server refused the range (416)`);
  }
  if (res.status === 429 || res.status >= 500) return drop(`the server answered ${res.status}`);
  if (!res.ok) {
    await res.body?.cancel().catch(() => {});
    throw new DownloadError(`GET ${opts.url} answered ${res.status} ${res.statusText}`.trim(), opts.url, res.status);
  }
  const total =
    res.status === 206
      ? totalFromContentRange(res.headers.get("content-range"))
      : Number(res.headers.get("content-length") ?? NaN);
  if (size !== undefined && Number.isFinite(total) && total !== size) {
    await res.body?.cancel().catch(() => {});
    throw new DownloadError(`${opts.url} has ${total} bytes, but ${size} were expected`, opts.url, res.status);
  }
  if (res.status === 206 && startFromContentRange(res.headers.get("content-range")) !== part.done) {
    resetPart(part, opts, size);
    return drop("the server answered another range than asked");
  }
  if (res.status !== 206 && part.done > 0) resetPart(part, opts, size); // 200: the server ignored Range
  return appendBody(opts, part, size, res);
}

/** Streams a response body into the part; a body cut short is an attempt to retry. */
async function appendBody(
  opts: DownloadOptions,
  part: Part,
  size: number | undefined,
  res: Response,
): Promise<Attempt> {
  const start = part.done;
  const length = res.headers.get("content-length");
  const expected = length === null ? undefined : start + Number(length);
  const reader = res.body!.getReader();
  for (;;) {
    let chunk: Awaited<ReturnType<typeof reader.read>>;
    try {
      chunk = await reader.read();
    } catch (e) {
      if (opts.signal?.aborted) throw opts.signal.reason;
      return {
        complete: false,
        gained: part.done - start,
        error: `the connection dropped after ${part.done} bytes (${(e as Error).message})`,
      };
    }
    if (chunk.done) break;
    try {
      for (let off = 0; off < chunk.value.length; ) off += writeSync(part.fd, chunk.value, off);
    } catch (e) {
      await reader.cancel().catch(() => {});
      throw writeError(e, part.path, opts.url);
    }
    await hashChunk(part, chunk.value);
    opts.onProgress?.(part.done);
  }
  const want = size ?? expected;
  if (want !== undefined && part.done < want)
    return { complete: false, gained: part.done - start, error: `the body ended after ${part.done} of ${want} bytes` };
  if (want !== undefined && part.done > want) {
    resetPart(part, opts, size);
    throw new DownloadError(`${opts.url} sent more bytes than the ${want} announced`, opts.url);
  }
  return { complete: true };
}

/** Checks size and hashes, then renames the part to `dest` (or to `<dest>.corrupt` on a mismatch). */
async function finish(
  opts: DownloadOptions,
  part: Part,
  size: number | undefined,
  resumedFrom: number,
): Promise<DownloadResult> {
  const sha256 = await part.sha256.digest();
  const corrupt = (expected: string, got: string, kind: string) => {
    renameSync(part.path, `${opts.dest}.corrupt`);
    return new ChecksumError(opts.dest, expected, got, `${opts.dest}.corrupt`, kind);
  };
  if (size !== undefined && part.done !== size)
    throw new DownloadError(`${opts.url}: got ${part.done} bytes, expected ${size}`, opts.url);
  if (opts.sha256 && sha256 !== opts.sha256.toLowerCase()) throw corrupt(opts.sha256.toLowerCase(), sha256, "sha256");
  const oid = part.sha1?.digest("hex");
  if (opts.gitOid && oid && oid !== opts.gitOid.toLowerCase())
    throw corrupt(opts.gitOid.toLowerCase(), oid, "git blob id");
  try {
    renameSync(part.path, opts.dest);
  } catch (e) {
    throw writeError(e, opts.dest, opts.url);
  }
  return { bytes: part.done, sha256, resumedFrom };
}

/** Waits `ms`, or rejects with the signal's reason as soon as it aborts. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  if (ms <= 0) return signal?.aborted ? Promise.reject(signal.reason) : Promise.resolve();
  return new Promise((resolve, reject) => {
    const done = () => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    };
    const timer = setTimeout(done, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
