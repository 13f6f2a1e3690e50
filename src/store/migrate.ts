/**
 * `inferd store migrate --to postgres://…`: moves the embedded store into an empty PostgreSQL
 * database for cluster mode. The data dir is locked meanwhile (no server may run on it), the copy
 * reads one SQLite snapshot and writes in one PostgreSQL transaction, and the row counts of every
 * table are compared before it commits: a difference, or any error, leaves the database empty.
 */
import type { Database } from "bun:sqlite";
import { existsSync, statSync } from "node:fs";
import type { SQL } from "bun";
import { DataDirLocked, dataPaths, lockDataDir } from "../datadir";
import { openPgStore, pgStore, redactUrl, type Store } from "../db";
import { openStoreFile } from "./open";
import { shellWord } from "./check";
import { CONNECT_HINT, unreachable } from "./doctor-pg";
import {
  advanceSequences,
  copyPlan,
  copyTable,
  DEFAULT_BATCH,
  firstNonEmpty,
  pgCounts,
  sqliteCounts,
  type TablePlan,
} from "./copy";

/** What `inferd store migrate` is asked to do. */
export interface MigrateOptions {
  to: string;
  dryRun?: boolean;
  json?: boolean;
}

/** A row of the report: a table's rows in SQLite and in PostgreSQL (null: not written, a dry run). */
export interface TableCount {
  table: string;
  sqlite: number;
  postgres: number | null;
}

/** The migration cannot go ahead (a non-empty database, a store that does not match); the message says why and what to do. */
class MigrateRefused extends Error {}

/** The counts differed before commit: everything was rolled back. */
class CountsDiffer extends Error {
  constructor(readonly counts: TableCount[]) {
    super("row counts differ");
  }
}

/** The table of counts, numbers right-aligned, with a total line and a mark on every difference. */
export function countsTable(counts: TableCount[]): string {
  const rows = [
    ...counts,
    {
      table: "total",
      sqlite: counts.reduce((n, c) => n + c.sqlite, 0),
      postgres: counts.some((c) => c.postgres === null) ? null : counts.reduce((n, c) => n + (c.postgres ?? 0), 0),
    },
  ];
  const w = Math.max(5, ...rows.map((r) => r.table.length));
  const line = (a: string, b: string, c: string, mark = "") =>
    `${a.padEnd(w)}  ${b.padStart(10)}  ${c.padStart(10)}${mark}`;
  return [
    line("table", "sqlite", "postgres"),
    ...rows.map((r) =>
      line(
        r.table,
        String(r.sqlite),
        r.postgres === null ? "-" : String(r.postgres),
        r.postgres !== null && r.postgres !== r.sqlite ? "  differs" : "",
      ),
    ),
  ].join("\n");
}

/** Refuses when the SQLite store and this version's PostgreSQL schema do not have the same tables. */
function checkTables(sqlite: Database, plan: TablePlan[]): void {
  const have = sqlite
    .query<{ name: string }, []>(
      "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT IN ('__inferd_migrations', '__inferd_changes')",
    )
    .all()
    .map((r) => r.name);
  const missing = plan.find((t) => !have.includes(t.name));
  const extra = have.find((name) => !plan.some((t) => t.name === name));
  if (missing || extra)
    throw new MigrateRefused(
      `the store's tables do not match this inferd's PostgreSQL schema (${missing ? `no table ${missing.name} in SQLite` : `table ${extra} has no place in PostgreSQL`}); run the inferd version that wrote this store`,
    );
}

/** Refuses a database where an inferd table already holds rows, naming the first. */
async function requireEmpty(pg: SQL, plan: TablePlan[], url: string): Promise<void> {
  const table = await firstNonEmpty(pg, plan);
  if (table)
    throw new MigrateRefused(
      `the database ${redactUrl(url)} is not empty: table ${table} already holds rows. store migrate copies into an empty database only; create a new one (createdb) and pass its URL to --to`,
    );
}

/** Copies every table in one transaction, advances the identity sequences, compares the counts, commits. */
async function copyAll(sqlite: Database, pg: SQL, plan: TablePlan[], say: (s: string) => void): Promise<TableCount[]> {
  return pg.begin(async (tx) => {
    for (const t of plan) {
      let shown = 0;
      const progress = (rows: number) => {
        if (rows - shown < 50_000) return;
        shown = rows;
        say(`  ${t.name}: ${rows} rows…`);
      };
      const n = await copyTable(sqlite, tx, t, DEFAULT_BATCH, progress);
      if (n > 0) say(`copied ${t.name} (${n} rows)`);
    }
    await advanceSequences(sqlite, tx);
    const before = sqliteCounts(sqlite, plan);
    const after = await pgCounts(tx, plan);
    const counts = plan.map((t) => ({ table: t.name, sqlite: before.get(t.name)!, postgres: after.get(t.name)! }));
    if (counts.some((c) => c.sqlite !== c.postgres)) throw new CountsDiffer(counts);
    return counts;
  });
}

/** What to do once the rows are in PostgreSQL. */
function nextSteps(url: string, dataDir: string, dbFile: string): string {
  const shown = redactUrl(url);
  return [
    "Next:",
    `  1. start inferd on the database: inferd serve --database-url ${shellWord(shown)} --data-dir ${shellWord(dataDir)}${shown !== url ? "   (with the real password in place of ***; or set INFERD_DATABASE_URL)" : "   (or set INFERD_DATABASE_URL)"}`,
    `  2. keep ${dbFile} as the backup of the store as it was: with --database-url set, inferd neither reads nor writes it`,
    "  3. back the database up: inferd backup --database-url … (pg_dump), or your database's own backups",
  ].join("\n");
}

/** Opens the source store with the data dir locked (DataDirLocked naming the holder while a server runs). */
function openSource(dataDir: string): { store: Store; release(): void } {
  const file = dataPaths(dataDir).db;
  if (!existsSync(file) || statSync(file).size === 0)
    throw new MigrateRefused(
      `there is no store to migrate at ${file}; pass the data dir that holds inferd.db with --data-dir`,
    );
  let lock: ReturnType<typeof lockDataDir>;
  try {
    lock = lockDataDir(dataDir);
  } catch (e) {
    throw e instanceof DataDirLocked ? new DataDirLocked(`cannot migrate now: ${e.message}`) : e;
  }
  lock.update(`inferd store migrate`);
  try {
    return { store: openStoreFile(file), release: lock.release };
  } catch (e) {
    lock.release();
    throw e;
  }
}

/**
 * Refuses a database that cannot be reached (the reason, password hidden, and what to check) or
 * that holds rows in an inferd table; looks only, creates nothing.
 */
async function checkTarget(plan: TablePlan[], url: string): Promise<void> {
  const target = pgStore(url, 1);
  try {
    const why = await unreachable(target, url);
    if (why !== null) throw new MigrateRefused(`cannot connect to ${redactUrl(url)}: ${why}; ${CONNECT_HINT}`);
    await requireEmpty(target.pg!, plan, url);
  } finally {
    await target.close();
  }
}

/**
 * `inferd store migrate --to <url> [--dry-run] [--json]`: prints the table of counts and the next
 * steps; returns the exit code (1 when the counts differ; refusals throw).
 */
export async function migrateCommand(
  dataDir: string,
  opts: MigrateOptions,
  out: (s: string) => void,
  err: (s: string) => void,
): Promise<number> {
  const plan = copyPlan();
  const say = opts.json ? () => {} : err;
  const source = openSource(dataDir);
  const sqlite = source.store.sqlite!;
  sqlite.exec("BEGIN IMMEDIATE"); // one snapshot for the copy and its counts; the write lock keeps `inferd key create` and the like from writing rows the copy would leave behind
  try {
    checkTables(sqlite, plan);
    const report = (counts: TableCount[], ok: boolean) =>
      opts.json
        ? JSON.stringify(
            { ok, dry_run: !!opts.dryRun, from: source.store.location, to: redactUrl(opts.to), tables: counts },
            null,
            2,
          )
        : countsTable(counts);
    await checkTarget(plan, opts.to);
    if (opts.dryRun) {
      const counts = sqliteCounts(sqlite, plan);
      out(
        report(
          plan.map((t) => ({ table: t.name, sqlite: counts.get(t.name)!, postgres: null })),
          true,
        ),
      );
      if (!opts.json) out(`dry run: ${redactUrl(opts.to)} is empty and would take these rows; nothing was written`);
      return 0;
    }
    const target = await openPgStore(opts.to, 2);
    try {
      await requireEmpty(target.pg!, plan, opts.to);
      const counts = await copyAll(sqlite, target.pg!, plan, say);
      out(report(counts, true));
      if (!opts.json)
        out(
          `every row of ${source.store.location} is in ${redactUrl(opts.to)}: the counts match.\n${nextSteps(opts.to, dataDir, source.store.location)}`,
        );
      return 0;
    } catch (e) {
      if (!(e instanceof CountsDiffer)) throw e;
      out(report(e.counts, false));
      err(
        `inferd: the row counts differ (marked above); the copy was rolled back and ${redactUrl(opts.to)} holds no rows. Run store migrate again; if it differs again, report it with this table`,
      );
      return 1;
    } finally {
      await target.close();
    }
  } finally {
    sqlite.exec("ROLLBACK");
    await source.store.close();
    source.release();
  }
}
