/**
 * Backups of a PostgreSQL store (cluster mode) with PostgreSQL's own tools: `inferd backup` runs
 * `pg_dump --format=custom` into `<data-dir>/backups/inferd-<time>.pgdump`; `inferd restore` never
 * touches the database and prints the `pg_restore` command instead.
 */
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
import { dataPaths } from "../datadir";
import { isPostgresUrl, redactUrl } from "../db";
import { BackupFailed, pruneBackups, stamp, type Backup } from "./backup";
import { shellWord } from "./check";
import { isSqliteFile } from "./header";

/** Where Debian and Ubuntu put each PostgreSQL version's programs (`<root>/<version>/bin`). */
export const PG_LIB_ROOT = "/usr/lib/postgresql";

/**
 * A PostgreSQL program (`pg_dump`, `pg_restore`): on PATH, else in the newest `<root>/<v>/bin`.
 * Undefined when there is none.
 * @example findPgTool("pg_dump") // → "/usr/bin/pg_dump"
 */
export function findPgTool(name: string, path = process.env.PATH ?? "", root = PG_LIB_ROOT): string | undefined {
  for (const dir of path.split(":")) if (dir && existsSync(join(dir, name))) return join(dir, name);
  const versions = existsSync(root) ? readdirSync(root).filter((v) => existsSync(join(root, v, "bin", name))) : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  return newest === undefined ? undefined : join(root, newest, "bin", name);
}

/** Why a PostgreSQL program is missing, and how to get it. */
export const missingTool = (name: string, root = PG_LIB_ROOT) =>
  `${name} was not found (looked on PATH and in ${root}/<version>/bin). It comes with PostgreSQL's client programs: on Debian or Ubuntu \`apt-get install postgresql-client\` (a version at least as new as the database server), elsewhere your system's PostgreSQL client package`;

/** A database URL split for libpq's programs: the URL without its password, and the password for `PGPASSWORD`. */
export function libpqTarget(url: string): { url: string; env: Record<string, string> } {
  const u = new URL(url);
  const password = decodeURIComponent(u.password);
  u.password = "";
  return { url: u.toString(), env: password ? { PGPASSWORD: password } : {} };
}

/** Runs a program to its end; resolves with its exit code and the last lines of its error output. */
async function runTool(
  argv: string[],
  env: Record<string, string>,
  stdout: number | "ignore" = "ignore",
): Promise<{ code: number; tail: string }> {
  const p = Bun.spawn(argv, {
    stdin: "ignore",
    stdout,
    stderr: "pipe",
    env: { ...process.env, PGCONNECT_TIMEOUT: "10", ...env },
  });
  const [err, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
  return {
    code,
    tail: err
      .trim()
      .split("\n")
      .slice(-3)
      .map((l) => l.trim())
      .join(" / "),
  };
}

/** Creates `file` empty and owner-only (0600) and returns its descriptor: the dump is written into it, so it is never readable by others. */
function privateFile(file: string): number {
  const fd = openSync(file, "w", 0o600);
  fchmodSync(fd, 0o600); // a stale file of that name keeps its mode through open()
  return fd;
}

/** What `pgBackup` did: the archive, its size and time, and the programs that wrote and read it. */
export interface PgBackup extends Backup {
  dump: string;
  /** The `pg_restore` that listed the archive's contents (undefined: none found, not verified). */
  verifiedWith?: string;
  /** Older archives removed to keep `--backup-keep`. */
  removed: string[];
}

/** Runs pg_dump into `partial` (0600 from its creation); throws BackupFailed with pg_dump's own words. */
async function dumpInto(dump: string, url: string, partial: string): Promise<void> {
  const target = libpqTarget(url);
  const fd = privateFile(partial);
  let result: { code: number; tail: string };
  try {
    result = await runTool([dump, "--format=custom", "--no-password", "--dbname", target.url], target.env, fd);
  } finally {
    closeSync(fd);
  }
  if (result.code !== 0) {
    rmSync(partial, { force: true });
    throw new BackupFailed(
      `${dump} failed for ${redactUrl(url)} (exit ${result.code}): ${result.tail || "no message"}`,
    );
  }
}

/**
 * `inferd backup` in PostgreSQL mode: `pg_dump --format=custom` of the database into
 * `<data-dir>/backups/inferd-<UTC time>.pgdump` (or `file`), mode 0600 from its creation, checked
 * with `pg_restore --list` before it gets its name; beyond the newest `keep` archives the oldest
 * are removed (not when `file` is given). Throws BackupFailed with the reason and a way forward.
 */
export async function pgBackup(
  url: string,
  dataDir: string,
  keep: number,
  file?: string,
  now = new Date(),
): Promise<PgBackup> {
  if (!isPostgresUrl(url))
    throw new BackupFailed("--database-url must be a postgres:// URL; leave it unset to back up the embedded store");
  const dump = findPgTool("pg_dump");
  if (!dump) throw new BackupFailed(`cannot back up ${redactUrl(url)}: ${missingTool("pg_dump")}`);
  const target = file ? resolve(file) : join(dataPaths(dataDir).backups, `inferd-${stamp(now)}.pgdump`);
  if (existsSync(target)) throw new BackupFailed(`${target} already exists; name another file`);
  mkdirSync(dirname(target), { recursive: true, mode: 0o700 });
  const partial = `${target}.${process.pid}.partial`;
  await dumpInto(dump, url, partial);
  const lister = findPgTool("pg_restore");
  if (lister) {
    const listed = await runTool([lister, "--list", partial], {});
    if (listed.code !== 0) {
      rmSync(partial, { force: true });
      throw new BackupFailed(
        `the archive pg_dump wrote cannot be read back (${lister} --list: ${listed.tail}); no backup was kept`,
      );
    }
  }
  renameSync(partial, target);
  const removed = file ? [] : pruneBackups(dataDir, keep, now.getTime(), "pgdump");
  return { path: target, takenAt: now, bytes: statSync(target).size, dump, verifiedWith: lister, removed };
}

/** The automatic backup in PostgreSQL mode (run by the leading host): `pgBackup` into the data dir; resolves with what to log. */
export const pgAutoBackup = (url: string, dataDir: string, keep: number) => async (): Promise<string> => {
  const b = await pgBackup(url, dataDir, keep);
  return `${b.path} (${b.bytes} bytes${b.verifiedWith ? ", verified" : ""}${b.removed.length ? `; removed ${b.removed.length} older` : ""})`;
};

/**
 * `inferd restore` in PostgreSQL mode changes nothing: the text tells the exact `pg_restore` command
 * (into an empty database, every `inferd serve` on it stopped) and how to point inferd at it.
 */
export function pgRestoreAdvice(url: string, file: string, dataDir: string): string {
  const from = resolve(file);
  if (isSqliteFile(from)) {
    return [
      `${from} is a backup of the embedded (SQLite) store, not of PostgreSQL. To move it into a database:`,
      `  inferd restore ${shellWord(from)} --data-dir ${shellWord(dataDir)}   (without --database-url)`,
      `  inferd store migrate --to ${shellWord(redactUrl(url))} --data-dir ${shellWord(dataDir)}   (into an empty database)`,
    ].join("\n");
  }
  const target = libpqTarget(url);
  const lines = [
    "inferd restore does not touch a PostgreSQL store. Restore the archive with pg_restore, into an empty database, with every inferd serve on it stopped:",
    `  pg_restore --exit-on-error --no-owner --dbname ${shellWord(target.url)} ${shellWord(from)}`,
    `Empty means: drop and create the database again (dropdb, createdb), or create a new one and put its name in the URL. Then start inferd serve --database-url with that URL.${target.env.PGPASSWORD ? " pg_restore asks for the password (or set PGPASSWORD)." : ""}`,
  ];
  if (!existsSync(from)) lines.push(`(${from} does not exist)`);
  return lines.join("\n");
}
