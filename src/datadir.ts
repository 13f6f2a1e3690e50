import { chmodSync, existsSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { startTime } from "../agent/pidfiles";

/** Files inside the data dir. */
export const dataPaths = (dir: string) => ({
  db: join(dir, "inferd.db"),
  lock: join(dir, "inferd.lock"),
  pid: join(dir, "inferd.pid"),
  backups: join(dir, "backups"),
  adminToken: join(dir, "admin-token"),
  logs: join(dir, "logs"),
  runtimes: join(dir, "runtimes"),
});

/** Creates the data dir (owner-only) if it does not exist. */
export function ensureDataDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
}

/** A process's state letter (R, S, Z…) from Linux's /proc, or null where that does not tell. */
function procState(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat[stat.lastIndexOf(")") + 2] ?? null;
  } catch {
    return null;
  }
}

/** Whether `pid` runs (a zombie, killed but not reaped, does not) and is the process that started at `start`. */
function alive(pid: number, start: string | null): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
  if (procState(pid) === "Z") return false;
  return start === null || startTime(pid) === null || startTime(pid) === start;
}

/**
 * Lock databases held by this process, by path: a second server in one process is refused too, and
 * a held lock stays referenced (a collected Database would close and let the lock go).
 */
const heldHere = new Map<string, Database>();

/** A second server on one data dir; the message says which process holds it. */
export class DataDirLocked extends Error {}

/** Where a server listens: the address it bound and its HTTP and TLS ports (the real ones, also with `--port 0`). */
export interface Listening {
  host: string;
  http: number;
  tls: number;
}

/** Who holds a data dir, as its holder wrote in `inferd.pid`: pid, what it does (its URL) and, for a server, where it listens. */
export interface Holder {
  pid?: number;
  info?: string;
  listen?: Listening;
}

/** The holder file's contents, when it names a live process. */
function readHolder(dir: string): Holder {
  try {
    const held = JSON.parse(readFileSync(dataPaths(dir).pid, "utf8"));
    if (typeof held.pid === "number" && alive(held.pid, held.start ?? null))
      return {
        pid: held.pid,
        info: typeof held.info === "string" ? held.info : undefined,
        listen: held.listen ?? undefined,
      };
  } catch {}
  return {};
}

const busyMessage = (dir: string, h: Holder) =>
  `another inferd (${h.pid ? `pid ${h.pid}${h.info ? `, ${h.info}` : ""}` : "starting"}) is already serving the data dir ${dir}; stop it first or pass a different --data-dir`;

/**
 * The previous version's `inferd.lock` was JSON text naming a pid, not a database: refused while
 * that pid runs (an older inferd serving), else removed so the lock database can take its place.
 */
function retireOldLock(dir: string): void {
  const path = dataPaths(dir).lock;
  let head: string;
  try {
    head = readFileSync(path).subarray(0, 16).toString("latin1");
  } catch {
    return;
  }
  if (head.length === 0 || head === "SQLite format 3\0") return;
  try {
    const old = JSON.parse(readFileSync(path, "utf8"));
    if (typeof old.pid === "number" && old.pid !== process.pid && alive(old.pid, old.start ?? null))
      throw new DataDirLocked(busyMessage(dir, old));
  } catch (e) {
    if (e instanceof DataDirLocked) throw e;
  }
  unlinkSync(path);
}

/** Opens the lock database and takes its exclusive lock; throws SQLITE_BUSY when another process has it. */
function takeLock(path: string, waitMs: number): Database {
  const db = new Database(path, { create: true });
  try {
    db.exec(`PRAGMA busy_timeout = ${waitMs}`);
    db.exec("PRAGMA locking_mode = EXCLUSIVE");
    db.exec("BEGIN EXCLUSIVE");
    return db;
  } catch (e) {
    db.close();
    throw e;
  }
}

const isBusy = (e: unknown) => (e as { code?: string }).code === "SQLITE_BUSY";

/**
 * Who holds the data dir, or undefined when nobody does. It looks without taking the lock for
 * longer than one read (for `inferd doctor`).
 */
export function lockHolder(dir: string): Holder | undefined {
  if (heldHere.has(dataPaths(dir).lock)) return { ...readHolder(dir), pid: process.pid };
  if (!existsSync(dataPaths(dir).lock)) return undefined;
  try {
    const db = new Database(dataPaths(dir).lock, { readonly: true });
    try {
      db.exec("PRAGMA busy_timeout = 0");
      db.query("SELECT count(*) FROM sqlite_master").get();
    } finally {
      db.close();
    }
    return undefined;
  } catch (e) {
    return isBusy(e) ? readHolder(dir) : undefined;
  }
}

/**
 * Takes the data dir for this process: one `inferd serve` (or `agent`) per data dir. The lock is
 * an exclusive SQLite lock on `inferd.lock` (a kernel file lock), so it ends with the process however
 * it ends, even a `kill -9`ed one its parent has not reaped yet. Who holds it is in `inferd.pid`,
 * which a refused start names (and `inferd doctor` reads for the ports in use). Returns a release
 * function and `update(info, listen?)` for that file.
 */
export function lockDataDir(dir: string): { release(): void; update(info: string, listen?: Listening): void } {
  const paths = dataPaths(dir);
  if (heldHere.has(paths.lock)) throw new DataDirLocked(`this inferd is already serving the data dir ${dir}`);
  retireOldLock(dir);
  let db: Database;
  try {
    db = takeLock(paths.lock, 200);
  } catch (e) {
    if (isBusy(e)) throw new DataDirLocked(busyMessage(dir, readHolder(dir)));
    throw e;
  }
  heldHere.set(paths.lock, db);
  const write = (info: string, listen?: Listening) =>
    writeFileSync(paths.pid, JSON.stringify({ pid: process.pid, start: startTime(process.pid), info, listen }), {
      mode: 0o600,
    });
  write("starting");
  return {
    release: () => {
      if (!heldHere.delete(paths.lock)) return;
      try {
        if (JSON.parse(readFileSync(paths.pid, "utf8")).pid === process.pid) unlinkSync(paths.pid);
      } catch {}
      db.close();
    },
    update: write,
  };
}

/**
 * The admin token: from the setting when given, else the one saved in the data dir, else a new
 * one saved there with mode 0600. `created` tells the caller to print it (first start only).
 */
export function adminToken(dir: string, fromConfig: string | undefined): { token: string; created: boolean } {
  if (fromConfig) return { token: fromConfig, created: false };
  const path = dataPaths(dir).adminToken;
  if (existsSync(path)) {
    const saved = readFileSync(path, "utf8").trim();
    if (saved) return { token: saved, created: false };
  }
  const token = `ik_admin_${randomBytes(32).toString("base64url")}`;
  writeFileSync(path, `${token}\n`, { mode: 0o600 });
  chmodSync(path, 0o600);
  return { token, created: true };
}

/** The URL of a server already running on this data dir, if it answers. */
export async function runningServer(dataDir: string): Promise<string | undefined> {
  const holder = dataPaths(dataDir).pid;
  if (!existsSync(holder)) return undefined;
  try {
    const info = JSON.parse(readFileSync(holder, "utf8")).info as string;
    if (!/^http:\/\//.test(info)) return undefined;
    const r = await fetch(`${info}/healthz`, { signal: AbortSignal.timeout(2000) });
    return r.ok ? info : undefined;
  } catch {
    return undefined;
  }
}
