/**
 * WAL checkpoints off the request thread. SQLite's automatic checkpoint runs inside whichever
 * commit passes the threshold — on this machine's disk 10–100 ms, in the middle of a request. The
 * serving connection turns it off; a worker thread with its own connection checkpoints (PASSIVE:
 * never waits for readers or the writer) on a timer. The worker's source is inline so the compiled
 * binary needs no file beside it.
 */
import type { Database } from "bun:sqlite";
import { log } from "../log";

const WORKER_SOURCE = `import { Database } from "bun:sqlite";
let db;
onmessage = (e) => {
  try {
    if (!db) { db = new Database(e.data.path); db.exec("PRAGMA busy_timeout = 5000"); }
    const r = db.query("PRAGMA wal_checkpoint(" + (e.data.mode || "PASSIVE") + ")").get();
    postMessage({ ok: true, ...r });
  } catch (err) { postMessage({ ok: false, error: String(err && err.message || err) }); }
};`;

let workerUrl: string | undefined;

/** A running checkpointer: `stop()` ends it (a last checkpoint is left to the caller's close). */
export interface Checkpointer {
  stop(): void;
}

/**
 * Turns off automatic checkpoints on `sqlite` and checkpoints the WAL every `everyMs` from a worker
 * thread instead. When the worker cannot run, automatic checkpoints are turned back on.
 */
export function startCheckpointer(sqlite: Database, path: string, everyMs = 1000): Checkpointer {
  workerUrl ??= URL.createObjectURL(new Blob([WORKER_SOURCE], { type: "application/javascript" }));
  let worker: Worker;
  try {
    worker = new Worker(workerUrl);
  } catch (e) {
    log.warn(`WAL checkpoints stay on the request thread (no worker: ${(e as Error).message})`);
    return { stop: () => {} };
  }
  sqlite.exec("PRAGMA wal_autocheckpoint = 0");
  let busy = false;
  let failures = 0;
  worker.onmessage = (e: MessageEvent<{ ok: boolean; error?: string }>) => {
    busy = false;
    if (e.data.ok) return void (failures = 0);
    if (++failures === 3) {
      log.warn(`WAL checkpoints failed in the background (${e.data.error}); SQLite checkpoints on its own again`);
      sqlite.exec("PRAGMA wal_autocheckpoint = 1000");
    }
  };
  const timer = setInterval(() => {
    if (busy || failures >= 3) return;
    busy = true;
    worker.postMessage({ path });
  }, everyMs);
  return {
    stop: () => {
      clearInterval(timer);
      worker.terminate();
      sqlite.exec("PRAGMA wal_autocheckpoint = 1000");
    },
  };
}
