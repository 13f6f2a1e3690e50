/**
 * SQLite writes off the request thread (the inspector's rows): a worker thread with its own connection
 * inserts the rows the server hands it, one transaction per batch, so a busy second's records never
 * hold the event loop (as ./checkpoint.ts does for WAL checkpoints). The rows are built on the
 * request thread (value arrays, handed over as one JSON text unless they hold bytes; JSON columns as
 * values, printed by the worker); the worker's source is inline so the compiled binary needs no file
 * beside it. Where no worker can run, the rows are written in place.
 */
import type { Database } from "bun:sqlite";

/** One table's insert: its statement and the rows (values in the statement's column order). */
export interface TableRows {
  sql: string;
  rows: unknown[][];
  /**
   * The places of values the worker stores as their JSON text (an array or object; null stays null):
   * handed over as they are, they are printed once, on the worker's thread, instead of printed on the
   * request thread and then escaped again inside the message.
   */
  json?: number[];
  /** The caller checked that every value outside `json` is text, a finite number or null (else the writer checks). */
  plain?: boolean;
}

const WORKER_SOURCE = `import { Database } from "bun:sqlite";
let db;
const statements = new Map();
const prepared = (sql) => { let s = statements.get(sql); if (!s) statements.set(sql, (s = db.prepare(sql))); return s; };
let write;
onmessage = (e) => {
  const m = e.data;
  try {
    if (!db) {
      db = new Database(m.path);
      db.exec("PRAGMA busy_timeout = 5000");
      // As the server's own connection (a per-connection setting): in WAL mode a commit is not
      // synced to disk each time, only at checkpoints; a power cut may lose the last records, a
      // crash of inferd none. Synced at each commit, a batch's thread waited out a sync per batch.
      db.exec("PRAGMA synchronous = NORMAL");
      write = db.transaction((tables) => {
        for (const t of tables) {
          const s = prepared(t.sql);
          for (const r of t.rows) {
            if (t.json) for (const i of t.json) if (r[i] !== null) r[i] = JSON.stringify(r[i]);
            s.run(...r);
          }
        }
      });
    }
    if (m.text !== undefined) write(JSON.parse(m.text));
    else if (m.tables) write(m.tables);
    postMessage({ id: m.id, ok: true });
  } catch (err) {
    postMessage({ id: m.id, ok: false, error: String((err && err.message) || err) });
  }
};`;

let workerUrl: string | undefined;

/** Whether a value survives JSON as it is: text, a finite number or null. */
export function jsonSafe(v: unknown): boolean {
  return v === null || typeof v === "string" || (typeof v === "number" && Number.isFinite(v));
}

/** Whether every value of `tables` survives JSON as it is (`json` values when the caller says so). */
function plain(tables: TableRows[]): boolean {
  for (const t of tables) if (!t.plain) for (const r of t.rows) for (const v of r) if (!jsonSafe(v)) return false;
  return true;
}

/** Writes batches of rows into a SQLite file from a worker thread (in place where none can run). */
export class SqliteWriter {
  private worker?: Worker;
  private next = 0;
  private waiting = new Map<number, { ok: () => void; fail: (e: Error) => void }>();
  private inPlace?: (tables: TableRows[]) => void;

  /** A writer into the database `sqlite` is open on (the worker opens its own connection to the same file). */
  constructor(private readonly sqlite: Database) {
    const path = sqlite.filename;
    if (!path || path === ":memory:") return;
    try {
      workerUrl ??= URL.createObjectURL(new Blob([WORKER_SOURCE], { type: "application/javascript" }));
      const worker = new Worker(workerUrl);
      (worker as unknown as { unref(): void }).unref();
      worker.onmessage = (e: MessageEvent<{ id: number; ok: boolean; error?: string }>) => {
        const w = this.waiting.get(e.data.id);
        this.waiting.delete(e.data.id);
        if (e.data.ok) w?.ok();
        else w?.fail(new Error(e.data.error));
      };
      worker.onerror = (e) => this.failAll(new Error(e.message));
      worker.postMessage({ id: this.next++, path });
      this.worker = worker;
    } catch {
      this.worker = undefined;
    }
  }

  /** Writes the rows of `tables` in one transaction: all land, or none (the promise then rejects). */
  write(tables: TableRows[]): Promise<void> {
    if (!this.worker) {
      (this.inPlace ??= this.sqlite.transaction((ts: TableRows[]) => {
        for (const t of ts) {
          const s = this.sqlite.query(t.sql);
          for (const r of t.rows) {
            if (t.json) for (const i of t.json) if (r[i] !== null) r[i] = JSON.stringify(r[i]);
            s.run(...(r as never[]));
          }
        }
      }))(tables);
      return Promise.resolve();
    }
    const id = this.next++;
    // Rows of text, numbers and nulls go as one JSON text: a structured clone of a slice's arrays
    // cost the event loop several times as much. Rows holding bytes (captured bodies) are cloned.
    const message = plain(tables) ? { id, text: JSON.stringify(tables) } : { id, tables };
    return new Promise<void>((ok, fail) => {
      this.waiting.set(id, { ok, fail });
      this.worker!.postMessage(message);
    });
  }

  /** Ends the worker; call once the last write has settled (a write still pending then fails). */
  close(): void {
    this.worker?.terminate();
    this.worker = undefined;
    this.failAll(new Error("the inspector's writer was closed"));
  }

  private failAll(e: Error): void {
    for (const w of this.waiting.values()) w.fail(e);
    this.waiting.clear();
  }
}
