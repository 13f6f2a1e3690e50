import { chmodSync, closeSync, copyFileSync, existsSync, fsyncSync, openSync, renameSync } from "node:fs";
import { resolve } from "node:path";
import { DataDirLocked, dataPaths, ensureDataDir, lockDataDir } from "../datadir";
import { BackupFailed, databaseProblem, stamp } from "./backup";

/** What a restore did: the file now in place, and where the store it replaced went (null when there was none). */
export interface Restored {
  from: string;
  setAside: string | null;
}

/**
 * Puts the backup `file` in place as the data dir's store. Refused while a server (or agent) holds
 * the data dir (DataDirLocked), and when the file is not a sound inferd database (BackupFailed).
 * The current `inferd.db` and its `-wal`/`-shm` move aside as `inferd.db.before-restore-<time>`
 * (with the same suffixes, so SQLite can still open them together); nothing is deleted.
 */
export function restoreStore(dataDir: string, file: string, now = new Date()): Restored {
  const from = resolve(file);
  const problem = databaseProblem(from);
  if (problem) throw new BackupFailed(`${from} cannot be restored: ${problem}`);
  ensureDataDir(dataDir);
  let lock: ReturnType<typeof lockDataDir>;
  try {
    lock = lockDataDir(dataDir);
  } catch (e) {
    throw e instanceof DataDirLocked ? new DataDirLocked(`cannot restore now: ${e.message}`) : e;
  }
  try {
    const db = dataPaths(dataDir).db;
    const incoming = `${db}.restoring`;
    copyFileSync(from, incoming);
    chmodSync(incoming, 0o600);
    const fd = openSync(incoming, "r+");
    fsyncSync(fd);
    closeSync(fd);
    const aside = `${db}.before-restore-${stamp(now)}`;
    const hadStore = existsSync(db);
    for (const suffix of ["", "-wal", "-shm", "-journal"]) {
      if (existsSync(db + suffix)) renameSync(db + suffix, aside + suffix);
    }
    renameSync(incoming, db);
    return { from, setAside: hadStore ? aside : null };
  } finally {
    lock.release();
  }
}
