import { statfsSync } from "node:fs";
import { basename, dirname } from "node:path";
import { lastGoodBackup } from "./backup";
import { headerProblem, isCorruption } from "./header";

/** The store file is damaged or truncated; the message names the file, the last good backup and the restore command. */
export class StoreDamaged extends Error {}

/** The data dir's file system has less free space than `--min-free-disk-mb`. */
export class DiskTooFull extends Error {}

/** A path as a shell word: quoted only when it needs to be. */
export const shellWord = (s: string) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/** How long ago `ms` was, in a human's words. */
export function ago(ms: number): string {
  const m = Math.max(0, Math.round(ms / 60_000));
  if (m < 120) return `${m} min ago`;
  if (m < 48 * 60) return `${Math.round(m / 60)} h ago`;
  return `${Math.round(m / 1440)} days ago`;
}

/**
 * The message for a damaged store: which file and what is wrong, the newest verified backup in
 * `<data-dir>/backups/` and the exact `inferd restore` command, or what to do when there is none.
 */
export function damagedMessage(dbPath: string, problem: string, now = Date.now()): string {
  const dataDir = dirname(dbPath);
  const lines = [`the store ${dbPath} is damaged (${problem}); inferd cannot use it.`];
  const backup = lastGoodBackup(dataDir);
  if (backup) {
    lines.push(
      `The last good backup is ${backup.path} (taken ${backup.takenAt.toISOString()}, ${ago(now - backup.takenAt.getTime())}). To restore it:`,
    );
    lines.push(`  inferd restore ${shellWord(backup.path)} --data-dir ${shellWord(dataDir)}`);
    lines.push(`(restore keeps the damaged ${basename(dbPath)} as ${basename(dbPath)}.before-restore-<time>)`);
  } else {
    lines.push(
      `There is no good backup in ${dataDir}/backups. \`inferd doctor --data-dir ${shellWord(dataDir)}\` tells more; to start over with an empty store, move ${dbPath} away.`,
    );
  }
  return lines.join("\n");
}

/** Throws StoreDamaged when the store file's header says it is damaged or truncated. */
export function assertStoreHeader(dbPath: string): void {
  const problem = headerProblem(dbPath);
  if (problem) throw new StoreDamaged(damagedMessage(dbPath, problem));
}

/** An error from opening or migrating the store: StoreDamaged (with the clear message) for corruption, else itself. */
export function asDamaged(dbPath: string, e: unknown): unknown {
  return isCorruption(e) ? new StoreDamaged(damagedMessage(dbPath, (e as Error).message)) : e;
}

/** Free bytes for an unprivileged writer on the file system holding `dir`, or null where statfs is not available. */
export function freeBytes(dir: string): number | null {
  try {
    const s = statfsSync(dir);
    return Number(s.bavail) * Number(s.bsize);
  } catch {
    return null;
  }
}

/** Refuses to start (DiskTooFull) when the data dir's file system has less than `minMb` MiB free. */
export function assertFreeDisk(dir: string, minMb: number): void {
  const free = freeBytes(dir);
  if (free === null || free >= minMb * 1024 * 1024) return;
  throw new DiskTooFull(
    `the file system of the data dir ${dir} has ${(free / 1024 / 1024).toFixed(1)} MiB free, less than --min-free-disk-mb (${minMb}); free some space (or lower the setting) and start again`,
  );
}
