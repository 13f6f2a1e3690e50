/**
 * Copying the embedded store's rows into PostgreSQL, table by table (for `inferd store migrate`):
 * the tables come from the PostgreSQL schema in foreign-key order, rows stream out of SQLite one at
 * a time and go in as multi-row INSERTs of bounded size, so a jobs table of many GiB never sits in
 * memory. Values are mapped to the PostgreSQL column's type (bytes stay bytes).
 */
import type { Database } from "bun:sqlite";
import type { SQL } from "bun";
import { is } from "drizzle-orm";
import { getTableConfig, PgTable } from "drizzle-orm/pg-core";
import * as pgSchema from "../db/schema-pg";

/** A client to run statements on: the pool or the transaction the copy runs in. */
type Pg = Pick<SQL, "unsafe">;

/** A table to copy: its name and columns with their PostgreSQL types (`text`, `bigint`, `integer`, `bytea`). */
export interface TablePlan {
  name: string;
  columns: { name: string; type: string }[];
  /** The tables its foreign keys point to. */
  parents: string[];
}

/** Every inferd table of the PostgreSQL schema, parents before children (then by name). */
export function copyPlan(): TablePlan[] {
  const all = (Object.values(pgSchema) as unknown[])
    .filter((t): t is PgTable => is(t, PgTable))
    .map((t) => getTableConfig(t))
    .map((c) => ({
      name: c.name,
      columns: c.columns.map((col) => ({ name: col.name, type: col.getSQLType() })),
      parents: c.foreignKeys.map((f) => getTableConfig(f.reference().foreignTable).name),
    }))
    .sort((a, b) => a.name.localeCompare(b.name));
  const done: TablePlan[] = [];
  while (done.length < all.length) {
    const next = all.find(
      (t) => !done.includes(t) && t.parents.every((p) => p === t.name || done.some((d) => d.name === p)),
    );
    if (!next) throw new Error("the schema's foreign keys form a cycle");
    done.push(next);
  }
  return done;
}

/** An identifier in double quotes. */
export const quoted = (name: string) => `"${name.replace(/"/g, '""')}"`;

/** A value from SQLite as the PostgreSQL column of `type` takes it. */
export function pgValue(type: string, v: unknown): unknown {
  if (v === null || v === undefined) return null;
  if (type === "bytea") return typeof v === "string" ? Buffer.from(v, "utf8") : Buffer.from(v as Uint8Array);
  if (type === "bigint" || type === "integer") return Number(v);
  return v instanceof Uint8Array ? Buffer.from(v).toString("utf8") : String(v);
}

/** Bytes a value takes in a batch (text and bytes by length; numbers count 8). */
const sizeOf = (v: unknown) => (v === null ? 1 : typeof v === "string" || v instanceof Uint8Array ? v.length : 8);

/** How large one INSERT may get: rows, and bytes of values (a few large job bodies fill it first). */
export interface BatchLimits {
  rows: number;
  bytes: number;
}

/** The default batch: 500 rows or 8 MiB of values, whichever comes first. */
export const DEFAULT_BATCH: BatchLimits = { rows: 500, bytes: 8 << 20 };

/** Inserts rows as one multi-row statement ($1, $2, … placeholders, within PostgreSQL's 65,535). */
async function insertRows(pg: Pg, t: TablePlan, rows: unknown[][]): Promise<void> {
  const width = t.columns.length;
  const tuples = rows.map((_, r) => `(${t.columns.map((_, c) => `$${r * width + c + 1}`).join(", ")})`);
  await pg.unsafe(
    `INSERT INTO ${quoted(t.name)} (${t.columns.map((c) => quoted(c.name)).join(", ")}) VALUES ${tuples.join(", ")}`,
    rows.flat(),
  );
}

/**
 * Copies one table's rows from SQLite into PostgreSQL in rowid order, streaming: at most one batch
 * (`limits`) and one row are held at a time. Returns how many rows it copied.
 */
export async function copyTable(
  sqlite: Database,
  pg: Pg,
  t: TablePlan,
  limits: BatchLimits = DEFAULT_BATCH,
  progress?: (rows: number) => void,
): Promise<number> {
  const rowCap = Math.max(1, Math.min(limits.rows, Math.floor(60_000 / t.columns.length)));
  const query = sqlite.query<Record<string, unknown>, []>(
    `SELECT ${t.columns.map((c) => quoted(c.name)).join(", ")} FROM ${quoted(t.name)} ORDER BY rowid`,
  );
  let batch: unknown[][] = [];
  let bytes = 0;
  let copied = 0;
  const flush = async () => {
    if (batch.length === 0) return;
    await insertRows(pg, t, batch);
    copied += batch.length;
    progress?.(copied);
    batch = [];
    bytes = 0;
  };
  for (const row of query.iterate()) {
    const values = t.columns.map((c) => pgValue(c.type, row[c.name]));
    batch.push(values);
    bytes += values.reduce<number>((n, v) => n + sizeOf(v), 0);
    if (batch.length >= rowCap || bytes >= limits.bytes) await flush();
  }
  await flush();
  return copied;
}

/** Rows per table in SQLite, in the plan's order. */
export function sqliteCounts(sqlite: Database, plan: TablePlan[]): Map<string, number> {
  return new Map(
    plan.map((t) => [t.name, sqlite.query<{ n: number }, []>(`SELECT count(*) AS n FROM ${quoted(t.name)}`).get()!.n]),
  );
}

/** Rows per table in PostgreSQL (its 64-bit counts arrive as strings). */
export async function pgCounts(pg: Pg, plan: TablePlan[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const t of plan)
    out.set(t.name, Number(((await pg.unsafe(`SELECT count(*) AS n FROM ${quoted(t.name)}`)) as { n: string }[])[0].n));
  return out;
}

/**
 * The first table of the plan that exists in the database and holds a row, or undefined (tables
 * not created yet count as empty).
 */
export async function firstNonEmpty(pg: Pg, plan: TablePlan[]): Promise<string | undefined> {
  for (const t of plan) {
    const [{ exists }] = (await pg.unsafe(`SELECT to_regclass($1) IS NOT NULL AS exists`, [quoted(t.name)])) as {
      exists: boolean;
    }[];
    if (!exists) continue;
    const [{ any }] = (await pg.unsafe(`SELECT EXISTS (SELECT 1 FROM ${quoted(t.name)}) AS any`)) as { any: boolean }[];
    if (any) return t.name;
  }
  return undefined;
}

/**
 * Moves each identity column's sequence past the highest id copied (or ever handed out by SQLite's
 * AUTOINCREMENT, whichever is higher), so new audit entries and delivery attempts get later ids.
 */
export async function advanceSequences(sqlite: Database, pg: Pg): Promise<void> {
  const identity = (await pg.unsafe(
    `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema() AND is_identity = 'YES'`,
  )) as { table_name: string; column_name: string }[];
  const hasSeq = sqlite.query("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_sequence'").get() !== null;
  for (const { table_name: table, column_name: column } of identity) {
    const max =
      sqlite.query<{ n: number | null }, []>(`SELECT max(${quoted(column)}) AS n FROM ${quoted(table)}`).get()?.n ?? 0;
    const seq = hasSeq
      ? (sqlite.query<{ seq: number }, [string]>("SELECT seq FROM sqlite_sequence WHERE name = ?").get(table)?.seq ?? 0)
      : 0;
    const last = Math.max(max, seq);
    if (last > 0) await pg.unsafe(`SELECT setval(pg_get_serial_sequence($1, $2), $3)`, [quoted(table), column, last]);
  }
}
