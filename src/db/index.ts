/**
 * The store, in one of two dialects behind one handle: the embedded SQLite file (the default) or a
 * PostgreSQL database (cluster mode, `--database-url postgres://…`). The domain code is written once
 * against the tables of ./schema.ts with drizzle's query builders and `await`; underneath, drizzle's
 * bun-sqlite or bun-sql driver renders and runs each query in its own dialect. What differs by
 * dialect lives in src/db only: opening, migrating, raw SQL (./raw.ts), memo invalidation (./memo.ts).
 */
import { Database } from "bun:sqlite";
import { closeSync, existsSync, openSync } from "node:fs";
import { SQL } from "bun";
import { drizzle as drizzleSqlite } from "drizzle-orm/bun-sqlite";
import type { BaseSQLiteDatabase } from "drizzle-orm/sqlite-core";
import { drizzle as drizzlePg } from "drizzle-orm/bun-sql";
import * as schema from "./schema";
import { MIGRATIONS, PG_MIGRATIONS } from "./migrations";
import {
  applyChangeTriggers,
  applySqliteChangeTriggers,
  noteChange,
  noteLocalWrite,
  watchSqliteWrites,
  watchWrites,
} from "./notify";

/** Which database a store is (named `engine`: drizzle's own handle has a `dialect` property). */
export type Engine = "sqlite" | "postgres";

/**
 * The typed drizzle handle every feature's service takes, typed by the SQLite tables (./schema.ts)
 * as an asynchronous database: build queries and `await` them. Never `.get()`, `.all()`, `.run()`,
 * `.transaction()` or `$client`, which behave differently or not at all in the other dialect
 * (test/db-dialects.test.ts checks); `first()` and `batch()` in ./raw.ts stand in for them.
 * `engine` says which database runs underneath.
 */
export type Db = BaseSQLiteDatabase<"async", unknown, typeof schema> & { readonly engine: Engine };

/** An open store: the handle, and the raw client of its dialect for src/db's own use. */
export interface Store {
  db: Db;
  engine: Engine;
  /** The embedded store's database (SQLite only). */
  sqlite?: Database;
  /** The cluster store's connection pool (PostgreSQL only). */
  pg?: SQL;
  /** Where it is: the SQLite file, or the database URL without its password. */
  location: string;
  close(): Promise<void>;
}

/** The raw bun:sqlite database under a SQLite handle (src/db's own use: prepared statements, pragmas). */
export function sqliteOf(db: Db): Database {
  return (db as unknown as { $client: Database }).$client;
}

/** The raw Bun SQL pool under a PostgreSQL handle (src/db's own use: LISTEN, COPY-like bulk writes). */
export function pgOf(db: Db): SQL {
  return (db as unknown as { $client: SQL }).$client;
}

/** Whether `url` names a PostgreSQL database (`postgres://` or `postgresql://`). */
export const isPostgresUrl = (url: string | undefined): boolean => !!url && /^postgres(ql)?:\/\//i.test(url);

/** A database URL fit for logs and messages: the password replaced by `***`. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = "***";
    return u.toString();
  } catch {
    return "postgres://…";
  }
}

/**
 * Opens (creating if needed) the SQLite file with the pragmas inferd relies on: WAL so readers never
 * block the writer, NORMAL sync (durable at each WAL checkpoint, one fsync per commit avoided),
 * a busy timeout so the CLI and the server can share the file, and foreign keys on. A new file is
 * made owner-only (`openStoreFile` in src/store/open.ts tells a damaged file apart).
 */
export function openStore(path: string): Store {
  if (!existsSync(path)) closeSync(openSync(path, "a", 0o600));
  const sqlite = new Database(path, { create: true, strict: true });
  try {
    sqlite.exec("PRAGMA busy_timeout = 5000");
    sqlite.exec("PRAGMA journal_mode = WAL");
    sqlite.exec("PRAGMA synchronous = NORMAL");
    sqlite.exec("PRAGMA foreign_keys = ON");
    migrate(sqlite);
    applySqliteChangeTriggers(sqlite);
  } catch (e) {
    sqlite.close();
    throw e;
  }
  // Every query of the handle goes through the watched client: a write to a memoised table is noted as it runs.
  const client = watchSqliteWrites(sqlite, () => noteLocalWrite(db));
  const db: Db = Object.assign(drizzleSqlite({ client, schema }), { engine: "sqlite" as const }) as unknown as Db;
  return { db, engine: "sqlite", sqlite, location: path, close: async () => sqlite.close() };
}

/**
 * Applies the embedded drizzle-kit migrations not yet recorded, each in its own transaction.
 * A store written by a newer inferd (unknown migrations recorded) is refused rather than damaged.
 */
export function migrate(sqlite: Database): void {
  sqlite.exec("CREATE TABLE IF NOT EXISTS __inferd_migrations (tag TEXT PRIMARY KEY, applied_at TEXT NOT NULL)");
  const applied = new Set(
    sqlite
      .query<{ tag: string }, []>("SELECT tag FROM __inferd_migrations")
      .all()
      .map((r) => r.tag),
  );
  refuseNewer(applied, MIGRATIONS);
  for (const m of MIGRATIONS) {
    if (applied.has(m.tag)) continue;
    sqlite.transaction(() => {
      for (const stmt of statements(m.sql)) sqlite.exec(stmt);
      sqlite
        .query("INSERT INTO __inferd_migrations (tag, applied_at) VALUES (?, ?)")
        .run(m.tag, new Date().toISOString());
    })();
  }
}

/** The statements of a drizzle-kit migration file. */
const statements = (sql: string) => sql.split("--> statement-breakpoint").filter((s) => s.trim());

/** Throws when the store records a migration this version does not know (a newer inferd wrote it). */
function refuseNewer(applied: Set<string>, known: { tag: string }[]): void {
  const tags = new Set(known.map((m) => m.tag));
  const unknown = [...applied].filter((t) => !tags.has(t));
  if (unknown.length > 0) {
    throw new Error(
      `this store was written by a newer inferd (migration ${unknown[0]} is unknown to this version); upgrade inferd`,
    );
  }
}

/** The advisory lock every inferd takes while it migrates a PostgreSQL store (one migrates, the others wait). */
const MIGRATION_LOCK = 0x696e6664; // "infd"

/**
 * Connects to a PostgreSQL database and applies the embedded PostgreSQL migrations not yet recorded,
 * under an advisory lock so hosts starting together migrate once, each migration in a transaction;
 * then, under the same lock, the change triggers are brought in line with this code's change feed.
 * `max` bounds the pool (connections held at once by this process).
 */
export async function openPgStore(url: string, max = 16): Promise<Store> {
  const store = pgStore(url, max);
  const pg = store.pg!;
  try {
    await pg.begin(async (tx) => {
      await tx`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`;
      await tx`CREATE TABLE IF NOT EXISTS __inferd_migrations (tag text PRIMARY KEY, applied_at text NOT NULL)`;
      const applied = new Set(((await tx`SELECT tag FROM __inferd_migrations`) as { tag: string }[]).map((r) => r.tag));
      refuseNewer(applied, PG_MIGRATIONS);
      for (const m of PG_MIGRATIONS) {
        if (applied.has(m.tag)) continue;
        for (const stmt of statements(m.sql)) await tx.unsafe(stmt);
        await tx`INSERT INTO __inferd_migrations (tag, applied_at) VALUES (${m.tag}, ${new Date().toISOString()})`;
      }
      await applyChangeTriggers(tx);
    });
  } catch (e) {
    await pg.close().catch(() => {});
    throw new Error(`cannot use the database ${redactUrl(url)}: ${(e as Error).message}`);
  }
  return store;
}

/**
 * A store over a PostgreSQL pool that connects lazily and migrates nothing: `openPgStore` migrates
 * it first; `inferd doctor` only looks. `connectionTimeout` is in seconds.
 */
export function pgStore(url: string, max = 16, connectionTimeout = 10): Store {
  const pg = new SQL({ url, max, idleTimeout: 60, connectionTimeout });
  const client = watchWrites(pg, (table) => noteChange(db, table, true));
  const db: Db = Object.assign(drizzlePg({ client }), { engine: "postgres" as const }) as unknown as Db;
  return { db, engine: "postgres", pg, location: redactUrl(url), close: () => pg.close() };
}
