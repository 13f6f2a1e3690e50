/**
 * sha256 of a download as its bytes go by: in this thread for small files, in a worker thread for
 * large ones (see `DEFAULT_HASH_WORKER_MIN_BYTES` in download.ts),
 * so hashing (≈1.7 GB/s a core) overlaps the network and the disk instead of adding to them, and
 * the agent's event loop stays free for the requests it proxies. The worker is made from an inline script (a Blob URL), so it needs no file of its own in
 * the compiled binary. Chunks are transferred to it when they own their buffer (copied otherwise);
 * at most `MAX_IN_FLIGHT` bytes wait for it before `update` makes the caller wait.
 */

/** A running sha256. `update` returns a promise only when the caller should wait before the next chunk. */
export interface Hasher {
  update(chunk: Uint8Array): void | Promise<void>;
  /** The hex digest; the hasher is finished after it. */
  digest(): Promise<string>;
  /** Stops it without a digest (its worker, if any, ends). */
  close(): void;
}

/** A sha256 computed in this thread. */
export function inlineHasher(): Hasher {
  const h = new Bun.CryptoHasher("sha256");
  return {
    update: (chunk) => void h.update(chunk),
    digest: async () => h.digest("hex"),
    close: () => {},
  };
}

/** Bytes posted to a worker and not yet hashed, beyond which `update` waits. */
const MAX_IN_FLIGHT = 64 << 20;
/** The worker acknowledges hashed bytes every this many. */
const ACK_EVERY = 8 << 20;

const WORKER_SOURCE = `
let h = new Bun.CryptoHasher("sha256"), pending = 0;
self.onmessage = (e) => {
  const m = e.data;
  if (m === "digest") return postMessage({ digest: h.digest("hex") });
  h.update(m);
  pending += m.byteLength;
  if (pending >= ${ACK_EVERY}) { postMessage({ hashed: pending }); pending = 0; }
};`;

let workerUrl: string | undefined;

/** A sha256 computed in a worker thread (one worker per hasher, ended by `digest` or `close`). */
export function workerHasher(): Hasher {
  workerUrl ??= URL.createObjectURL(new Blob([WORKER_SOURCE], { type: "application/javascript" }));
  const worker = new Worker(workerUrl);
  let inFlight = 0;
  let drained: (() => void) | null = null;
  let done: ((hex: string) => void) | null = null;
  let failed: ((e: Error) => void) | null = null;
  worker.onmessage = (e: MessageEvent<{ hashed?: number; digest?: string }>) => {
    if (e.data.hashed) inFlight -= e.data.hashed;
    if (drained && inFlight < MAX_IN_FLIGHT / 2) drained(), (drained = null);
    if (e.data.digest !== undefined) done?.(e.data.digest);
  };
  worker.onerror = (e) => failed?.(new Error(`the hashing worker failed: ${e.message}`));
  return {
    update(chunk) {
      const owns =
        chunk.byteOffset === 0 && chunk.byteLength === chunk.buffer.byteLength && chunk.buffer instanceof ArrayBuffer;
      if (owns) worker.postMessage(chunk, [chunk.buffer as ArrayBuffer]);
      else worker.postMessage(chunk.slice());
      inFlight += chunk.byteLength;
      if (inFlight >= MAX_IN_FLIGHT) return new Promise<void>((ok) => (drained = ok));
    },
    digest() {
      return new Promise<string>((ok, fail) => {
        done = (hex) => (worker.terminate(), ok(hex));
        failed = (e) => (worker.terminate(), fail(e));
        worker.postMessage("digest");
      });
    },
    close: () => worker.terminate(),
  };
}

/** The hasher for a file of `size` bytes: a worker from `workerFrom` bytes up (unknown sizes: inline). */
export function hasherFor(size: number | undefined, workerFrom: number): Hasher {
  return size !== undefined && size >= workerFrom ? workerHasher() : inlineHasher();
}
