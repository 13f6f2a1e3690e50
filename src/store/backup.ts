import { Database } from "bun:sqlite";
import {
  closeSync,
  existsSync,
  fchmodSync,
  mkdirSync,
  openSync,
  readdirSync,
  renameSync,
  rmSync,
  statSync,
} from "node:fs";
import { dirname, join, resolve } from "node:path";
import { MIGRATIONS } from "../db/migrations";
import { dataPaths } from "../datadir";
import { headerProblem } from "./header";

/** A backup in `<data-dir>/backups/`: its file, when it was taken (from its name) and its size. */
export interface Backup {
  path: string;
  takenAt: Date;
  bytes: number;
}

/** A backup could not be taken or a file is not a sound inferd database; the message says why. */
export class BackupFailed extends Error {}

/** A UTC timestamp usable in file names, sorting as time does. @example stamp(new Date(0)) // → "1970-01-01T00-00-00-000Z" */
export const stamp = (d: Date) => d.toISOString().replace(/[:.]/g, "-");

/** What a backup file holds, by its extension: an SQLite copy (`.db`) or a `pg_dump` archive (`.pgdump`). */
export type BackupKind = "db" | "pgdump";

/** The name of a finished backup of that kind: `inferd-<UTC time>.<kind>`. */
const nameOf = (kind: BackupKind) =>
  new RegExp(`^inferd-(\\d{4}-\\d\\d-\\d\\dT\\d\\d-\\d\\d-\\d\\d-\\d{3}Z)\\.${kind}$`);

/** Verified backups of one kind (default: SQLite copies) in `<data-dir>/backups/`, newest first. Only finished, verified backups carry this name. */
export function listBackups(dataDir: string, kind: BackupKind = "db"): Backup[] {
  const NAME = nameOf(kind);
  const dir = dataPaths(dataDir).backups;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return [];
  }
  return names
    .map((name) => NAME.exec(name))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => {
      const [d, t] = m[1].split("T");
      const [hh, mm, ss, ms] = t.slice(0, -1).split("-");
      return {
        path: join(dir, m[0]),
        takenAt: new Date(`${d}T${hh}:${mm}:${ss}.${ms}Z`),
        bytes: statSync(join(dir, m[0])).size,
      };
    })
    .sort((a, b) => b.takenAt.getTime() - a.takenAt.getTime());
}

/** The newest backup that is still whole (its header checked again, cheaply), or undefined. */
export function lastGoodBackup(dataDir: string): Backup | undefined {
  return listBackups(dataDir).find((b) => headerProblem(b.path) === null);
}

/** What SQLite says of a database file: `integrity_check`'s lines ("ok" alone when sound) and the migrations it records (null: no migrations table). */
export interface Inspection {
  integrity: string[];
  migrations: string[] | null;
}

/** Opens `file` read-only (safe while a server writes to it) and runs `PRAGMA integrity_check`. Throws what SQLite throws. */
export function inspectDatabase(file: string): Inspection {
  const db = new Database(file, { readonly: true });
  try {
    db.exec("PRAGMA busy_timeout = 5000");
    const integrity = db
      .query<{ integrity_check: string }, []>("PRAGMA integrity_check")
      .all()
      .map((r) => r.integrity_check);
    const table = db.query("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = '__inferd_migrations'").get();
    const migrations = table
      ? db
          .query<{ tag: string }, []>("SELECT tag FROM __inferd_migrations")
          .all()
          .map((r) => r.tag)
      : null;
    return { integrity, migrations };
  } finally {
    db.close();
  }
}

/** The first migration recorded in a store that this version does not know (a newer inferd wrote it). */
export const unknownMigration = (applied: string[]) => applied.find((tag) => !MIGRATIONS.some((m) => m.tag === tag));

/**
 * What keeps `file` from being a sound inferd database, or null: it must pass SQLite's
 * `integrity_check`, hold the migrations table, and record no migration this version does not know.
 */
export function databaseProblem(file: string): string | null {
  if (!existsSync(file)) return `${file} does not exist`;
  const header = headerProblem(file);
  if (header) return header;
  try {
    const { integrity, migrations } = inspectDatabase(file);
    if (integrity.join() !== "ok") return `integrity_check failed: ${integrity.slice(0, 3).join("; ")}`;
    if (!migrations) return "it has no __inferd_migrations table: not an inferd store";
    const unknown = unknownMigration(migrations);
    return unknown ? `it was written by a newer inferd (migration ${unknown} is unknown to this version)` : null;
  } catch (e) {
    return (e as Error).message;
  }
}

/** Removes all but the newest `keep` backups of a kind (0 keeps all), and unfinished copies older than a day. */
export function pruneBackups(dataDir: string, keep: number, now = Date.now(), kind: BackupKind = "db"): string[] {
  const removed =
    keep > 0
      ? listBackups(dataDir, kind)
          .slice(keep)
          .map((b) => b.path)
      : [];
  const dir = dataPaths(dataDir).backups;
  for (const name of existsSync(dir) ? readdirSync(dir) : []) {
    if (name.endsWith(".partial") && now - statSync(join(dir, name)).mtimeMs > 86_400_000)
      removed.push(join(dir, name));
  }
  for (const path of removed) rmSync(path, { force: true });
  return removed;
}

/**
 * Copies the store into `partial`, which is owner-only (0600) from its first byte: it is made empty
 * with that mode before `VACUUM INTO` fills it (SQLite keeps a file's mode, and gives a journal its
 * database's), under umask 077 for anything else SQLite makes meanwhile.
 */
function copyInto(db: Database, partial: string): void {
  const umask = process.umask(0o077);
  try {
    const fd = openSync(partial, "w", 0o600);
    fchmodSync(fd, 0o600); // a stale file of that name keeps its mode through open()
    closeSync(fd);
    db.query("VACUUM INTO ?").run(partial);
  } finally {
    process.umask(umask);
  }
}

/**
 * Takes a consistent copy of the store with `VACUUM INTO` (a snapshot, while a server keeps serving
 * and writing), checks it with `integrity_check` (`verify`), and only then gives it its name. The
 * copy is mode 0600 from the start. Without `file` it goes to
 * `<data-dir>/backups/inferd-<UTC time>.db` and the backups beyond the newest `keep` are removed.
 */
export function takeBackup(
  dataDir: string,
  keep: number,
  file?: string,
  now = new Date(),
  verify = databaseProblem,
): Backup {
  const source = dataPaths(dataDir).db;
  if (!existsSync(source)) throw new BackupFailed(`there is no store to back up at ${source}`);
  const target = file ? resolve(file) : join(dataPaths(dataDir).backups, `inferd-${stamp(now)}.db`);
  if (existsSync(target)) throw new BackupFailed(`${target} already exists; name another file`);
  mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
  const partial = `${target}.${process.pid}.partial`;
  const db = new Database(source, { readwrite: true, create: false });
  try {
    db.exec("PRAGMA busy_timeout = 5000");
    copyInto(db, partial);
  } catch (e) {
    rmSync(partial, { force: true });
    throw new BackupFailed(`could not copy ${source}: ${(e as Error).message}`);
  } finally {
    db.close();
  }
  const problem = verify(partial);
  if (problem) {
    rmSync(partial, { force: true });
    throw new BackupFailed(`the copy of ${source} failed its check (${problem}); no backup was kept`);
  }
  renameSync(partial, target);
  if (!file) pruneBackups(dataDir, keep, now.getTime());
  return { path: target, takenAt: now, bytes: statSync(target).size };
}
