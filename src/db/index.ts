import { Database } from "bun:sqlite";
import { drizzle, type BunSQLiteDatabase } from "drizzle-orm/bun-sqlite";
import * as schema from "./schema";
import { MIGRATIONS } from "./migrations";
import { asDamaged, prepareStoreFile } from "../store/check";

/** The typed drizzle handle every feature's service takes. */
export type Db = BunSQLiteDatabase<typeof schema> & { $client: Database };

/** An open store: the drizzle handle and the raw bun:sqlite database under it. */
export interface Store {
  db: Db;
  sqlite: Database;
  close(): void;
}

/**
 * Opens (creating if needed) the SQLite file with the pragmas inferd relies on: WAL so readers never
 * block the writer, NORMAL sync (durable at each WAL checkpoint, one fsync per commit avoided),
 * a busy timeout so the CLI and the server can share the file, and foreign keys on. A new file is
 * made owner-only; a damaged one (bad header, truncated, or SQLite finding corruption while
 * migrating) throws StoreDamaged naming the last good backup.
 */
export function openStore(path: string): Store {
  prepareStoreFile(path);
  const sqlite = new Database(path, { create: true, strict: true });
  try {
    sqlite.exec("PRAGMA busy_timeout = 5000");
    sqlite.exec("PRAGMA journal_mode = WAL");
    sqlite.exec("PRAGMA synchronous = NORMAL");
    sqlite.exec("PRAGMA foreign_keys = ON");
    migrate(sqlite);
  } catch (e) {
    sqlite.close();
    throw asDamaged(path, e);
  }
  const db = drizzle({ client: sqlite, schema });
  return { db, sqlite, close: () => sqlite.close() };
}

/**
 * Applies the embedded drizzle-kit migrations not yet recorded, each in its own transaction.
 * A store written by a newer inferd (unknown migrations recorded) is refused rather than damaged.
 */
export function migrate(sqlite: Database): void {
  sqlite.exec("CREATE TABLE IF NOT EXISTS __inferd_migrations (tag TEXT PRIMARY KEY, applied_at TEXT NOT NULL)");
  const applied = new Set(sqlite.query<{ tag: string }, []>("SELECT tag FROM __inferd_migrations").all().map((r) => r.tag));
  const known = new Set(MIGRATIONS.map((m) => m.tag));
  const unknown = [...applied].filter((t) => !known.has(t));
  if (unknown.length > 0) {
    throw new Error(`this data dir was written by a newer inferd (migration ${unknown[0]} is unknown to this version); upgrade inferd`);
  }
  for (const m of MIGRATIONS) {
    if (applied.has(m.tag)) continue;
    sqlite.transaction(() => {
      for (const stmt of m.sql.split("--> statement-breakpoint")) {
        if (stmt.trim()) sqlite.exec(stmt);
      }
      sqlite.query("INSERT INTO __inferd_migrations (tag, applied_at) VALUES (?, ?)").run(m.tag, new Date().toISOString());
    })();
  }
}
