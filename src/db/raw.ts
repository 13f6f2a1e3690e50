/**
 * What the domain code needs beyond query builders, the same on both dialects: raw SQL that reads
 * rows or changes them, the first row of a query, and several writes that land together or not
 * at all (`batch`). Raw SQL passed here must be valid in both SQLite and PostgreSQL; where a
 * dialect needs its own spelling, branch on `db.engine`.
 */
import { sql, type SQL, type SQLWrapper } from "drizzle-orm";
import { pgOf, sqliteOf, type Db } from "./index";
import { changedTables, noteChange } from "./notify";

/** Rows of a raw query. */
export async function rows<T>(db: Db, query: SQL): Promise<T[]> {
  if (db.engine === "sqlite") return (db as unknown as { all(q: SQL): T[] }).all(query);
  return [...((await (db as unknown as { execute(q: SQL): Promise<T[]> }).execute(query)) as T[])];
}

/** Runs a raw statement; returns how many rows it changed. */
export async function exec(db: Db, query: SQL): Promise<number> {
  if (db.engine === "sqlite") return (db as unknown as { run(q: SQL): { changes: number } }).run(query).changes;
  return (
    (await (db as unknown as { execute(q: SQL): Promise<{ count: number }> }).execute(query)) as { count: number }
  ).count;
}

/**
 * The first row of a select (adds `LIMIT 1`), or undefined.
 * @example const key = await first(db.select().from(apiKeys).where(eq(apiKeys.id, id)));
 */
export async function first<T>(query: { limit(n: number): PromiseLike<T[]> }): Promise<T | undefined> {
  return (await query.limit(1))[0];
}

/** A statement for `batch`: a query builder (not awaited) or raw SQL. */
export type Statement = { toSQL(): { sql: string; params: unknown[] } } | SQL;

/** A statement's text and parameters in the store's own dialect (drizzle's dialect renders raw SQL). */
function compile(db: Db, s: Statement): { sql: string; params: unknown[] } {
  if ("toSQL" in s) return s.toSQL();
  return (db as unknown as { dialect: { sqlToQuery(q: SQL): { sql: string; params: unknown[] } } }).dialect.sqlToQuery(
    s,
  );
}

/**
 * Runs `statements` in one transaction: all of them land, or none (the error is thrown). On SQLite
 * they run synchronously inside one transaction, so nothing else can interleave; on PostgreSQL in
 * one transaction on one connection. Build the statements with `db`; their results are not returned
 * (use `.returning()` outside a batch when a write's rows matter).
 * @example await batch(db, [db.update(jobs).set(…).where(…), db.insert(deliveries).values(rows)]);
 */
export async function batch(db: Db, statements: Statement[]): Promise<void> {
  const compiled = statements.map((s) => compile(db, s));
  if (db.engine === "sqlite") {
    const sqlite = sqliteOf(db);
    sqlite.transaction(() => {
      for (const c of compiled) sqlite.query(c.sql).run(...(c.params as never[]));
    })();
    return;
  }
  await pgOf(db).begin(async (tx) => {
    for (const c of compiled) await tx.unsafe(c.sql, c.params as unknown[]);
  });
  for (const table of new Set(compiled.flatMap((c) => changedTables(c.sql)))) noteChange(db, table, true);
}

/**
 * Whether `column` starts with `prefix`, meaning the same on both dialects: case and all, with no
 * wildcards (`LIKE` ignores ASCII case on SQLite but not on PostgreSQL, and reads `%` and `_` as patterns).
 * @example await db.select().from(auditLog).where(startsWith(auditLog.action, "key."));
 */
export function startsWith(column: SQLWrapper, prefix: string): SQL {
  return sql`substr(${column}, 1, ${[...prefix].length}) = ${prefix}`;
}
