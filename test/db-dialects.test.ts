/**
 * The two dialects of the store stay one schema: src/db/schema.ts (SQLite, what the domain code is
 * written against) and src/db/schema-pg.ts (PostgreSQL) hold the same tables, columns, keys,
 * indexes and foreign keys with matching storage kinds; both migration folders are complete
 * (drizzle-kit generate finds nothing to add); and no code outside src/db uses a drizzle method that
 * exists in one dialect only.
 */
import { describe, expect, test } from "bun:test";
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { getTableName, is, SQL, Table } from "drizzle-orm";
import { getTableConfig as sqliteConfig } from "drizzle-orm/sqlite-core";
import { getTableConfig as pgConfig } from "drizzle-orm/pg-core";
import * as sqliteSchema from "../src/db/schema";
import * as pgSchema from "../src/db/schema-pg";
import { repoRoot } from "./helpers/proc";

/** What the two schemas must agree on about a column. */
interface ColumnShape {
  notNull: boolean;
  default: unknown;
  primary: boolean;
  unique: boolean;
  generated: boolean;
}

/** A table as both dialects can describe it. */
interface TableShape {
  columns: Record<string, ColumnShape>;
  primaryKey: string[];
  uniques: string[];
  indexes: string[];
  foreignKeys: string[];
}

/** The parts of a drizzle table config (either dialect) this test reads. */
interface AnyConfig {
  name: string;
  columns: {
    name: string;
    notNull: boolean;
    default?: unknown;
    hasDefault: boolean;
    primary: boolean;
    isUnique: boolean;
    getSQLType(): string;
  }[];
  primaryKeys: { columns: { name: string }[] }[];
  uniqueConstraints: { getName(): string | undefined; columns: { name: string }[] }[];
  indexes: { config: { name: string; unique: boolean; columns: unknown[] } }[];
  foreignKeys: {
    getName(): string;
    onDelete?: string;
    onUpdate?: string;
    reference(): { columns: { name: string }[]; foreignTable: Table; foreignColumns: { name: string }[] };
  }[];
}

/** A default as both dialects write it: flags as 0/1, SQL expressions by their text. */
function defaultOf(d: unknown): unknown {
  if (typeof d === "boolean") return d ? 1 : 0;
  if (is(d, SQL)) return `sql:${d.queryChunks.map((c) => String((c as { value?: unknown }).value ?? c)).join("")}`;
  return d;
}

/** A table's shape from its drizzle config, `generated` read by the dialect's own rule. */
function shapeOf(c: AnyConfig, generated: (col: unknown) => boolean): TableShape {
  const names = (cols: unknown[]) => cols.map((x) => (x as { name?: string }).name ?? `expr:${String(x)}`).join(",");
  return {
    columns: Object.fromEntries(
      c.columns.map((col) => [
        col.name,
        {
          notNull: col.notNull,
          default: defaultOf(col.default),
          primary: col.primary,
          unique: col.isUnique,
          generated: generated(col),
        },
      ]),
    ),
    primaryKey: c.primaryKeys.flatMap((k) => k.columns.map((x) => x.name)),
    uniques: c.uniqueConstraints.map((u) => `${u.getName()}(${names(u.columns)})`).sort(),
    indexes: c.indexes
      .map((i) => `${i.config.unique ? "unique " : ""}${i.config.name}(${names(i.config.columns)})`)
      .sort(),
    foreignKeys: c.foreignKeys
      .map((f) => {
        const r = f.reference();
        return `${f.getName()}: (${names(r.columns)}) → ${getTableName(r.foreignTable)}(${names(r.foreignColumns)}) on delete ${f.onDelete ?? "no action"} on update ${f.onUpdate ?? "no action"}`;
      })
      .sort(),
  };
}

/** Each storage kind of SQLite and the PostgreSQL types that keep the same values. */
const STORAGE: Record<string, string[]> = { text: ["text"], integer: ["bigint", "integer"], blob: ["bytea"] };

const tables = <T>(mod: Record<string, unknown>) => Object.values(mod).filter((t): t is T => is(t, Table));
const sqliteTables = () =>
  tables<Parameters<typeof sqliteConfig>[0]>(sqliteSchema).map((t) => sqliteConfig(t) as unknown as AnyConfig);
const pgTables = () => tables<Parameters<typeof pgConfig>[0]>(pgSchema).map((t) => pgConfig(t) as unknown as AnyConfig);

describe("schema.ts and schema-pg.ts describe the same store", () => {
  const sqlite = new Map(sqliteTables().map((c) => [c.name, c]));
  const pg = new Map(pgTables().map((c) => [c.name, c]));

  test("the same tables", () => {
    expect([...pg.keys()].sort()).toEqual([...sqlite.keys()].sort());
    expect(sqlite.size).toBeGreaterThan(10);
  });

  test("each table: column names, nullability, defaults, primary keys, unique constraints, indexes, foreign keys", () => {
    for (const [name, s] of sqlite) {
      const p = pg.get(name);
      if (!p) continue; // reported by "the same tables"
      const fromSqlite = shapeOf(s, (col) => (col as { autoIncrement?: boolean }).autoIncrement === true);
      const fromPg = shapeOf(p, (col) => (col as { generatedIdentity?: unknown }).generatedIdentity !== undefined);
      expect({ table: name, ...fromPg }).toEqual({ table: name, ...fromSqlite });
    }
  });

  test("each column keeps its storage kind: text ↔ text, integer ↔ bigint or integer, blob ↔ bytea", () => {
    const mismatched: string[] = [];
    for (const [name, s] of sqlite) {
      for (const col of s.columns) {
        const kind = col.getSQLType();
        const other = pg
          .get(name)
          ?.columns.find((c) => c.name === col.name)
          ?.getSQLType();
        if (other !== undefined && !(STORAGE[kind] ?? []).includes(other))
          mismatched.push(`${name}.${col.name}: SQLite ${kind}, PostgreSQL ${other}`);
      }
    }
    expect(mismatched).toEqual([]);
  });
});

/** Runs drizzle-kit generate for one config in a copy of the schema and its migrations; returns what it printed and the files it added. */
async function generateInCopy(config: string, folder: string): Promise<{ output: string; added: string[] }> {
  const dir = mkdtempSync(join(tmpdir(), "inferd-drizzle-kit-"));
  try {
    for (const f of [
      "drizzle.config.ts",
      "drizzle.pg.config.ts",
      "package.json",
      "src/db/schema.ts",
      "src/db/schema-pg.ts",
      "src/db/migrations",
      "src/db/migrations-pg",
    ]) {
      cpSync(join(repoRoot, f), join(dir, f), { recursive: true });
    }
    symlinkSync(join(repoRoot, "node_modules"), join(dir, "node_modules"));
    const before = readdirSync(join(dir, folder), { recursive: true }).map(String).sort();
    const kit = Bun.spawn(
      [process.execPath, join(repoRoot, "node_modules/drizzle-kit/bin.cjs"), "generate", "--config", config],
      { cwd: dir, stdin: "ignore", stdout: "pipe", stderr: "pipe" },
    );
    const timer = setTimeout(() => kit.kill("SIGKILL"), 60_000);
    const [out, err, code] = await Promise.all([
      new Response(kit.stdout).text(),
      new Response(kit.stderr).text(),
      kit.exited,
    ]);
    clearTimeout(timer);
    const after = readdirSync(join(dir, folder), { recursive: true }).map(String).sort();
    return { output: `exit code ${code}\n${out}${err}`, added: after.filter((f) => !before.includes(f)) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe("both migration folders are complete", () => {
  test.each([
    ["drizzle.config.ts", "src/db/migrations"],
    ["drizzle.pg.config.ts", "src/db/migrations-pg"],
  ])("drizzle-kit generate --config %s finds no change to %s", async (config, folder) => {
    const { output, added } = await generateInCopy(config, folder);
    expect({ added, output: output.includes("No schema changes") ? "no changes" : output }).toEqual({
      added: [],
      output: "no changes",
    });
  });
});

/** Drizzle members that exist in one dialect only (or behave differently), from the dot on. */
const ONE_DIALECT = /\.(get|all|run|values|transaction|prepare)\s*\(|\.\$client\b/g;

/** The handle itself as code names it: `db`, `tx`, `this.db`, `deps.db`, `s.store.db`. */
const HANDLE = /^(?:this\.|[\w$]+\.)*(?:db|tx)$/;

/** A query built from the handle: the chain's first call is a builder method of it (arguments blanked to `#`). */
const BUILT = /^(?:this\.|[\w$]+\.)*(?:db|tx)\.(?:select|selectDistinct|insert|update|delete|\$count)#/;

/** A chain with every bracketed part (arguments, indexes) replaced by `#` and no spaces: `db.select#.from#`. */
function spineOf(chain: string): string {
  let s = chain;
  for (let prev = ""; prev !== s; ) {
    prev = s;
    s = s.replace(/\([^()]*\)|\[[^[\]]*\]/g, "#");
  }
  return s.replace(/\s+/g, "");
}

/** The member chain that ends just before `at` in `text` (back over balanced brackets and `.name` steps). */
function chainBefore(text: string, at: number): string {
  let i = at;
  for (;;) {
    while (i > 0 && /\s/.test(text[i - 1])) i--;
    const ch = text[i - 1];
    if (ch === ")" || ch === "]") {
      const open = ch === ")" ? "(" : "[";
      let depth = 0;
      do {
        i--;
        if (text[i] === ch) depth++;
        else if (text[i] === open) depth--;
      } while (i > 0 && depth > 0);
      continue;
    }
    const word = /[\w$]+$/.exec(text.slice(Math.max(0, i - 80), i));
    if (!word) break;
    i -= word[0].length;
    while (i > 0 && /\s/.test(text[i - 1])) i--;
    if (text[i - 1] === "." || text.slice(i - 2, i) === "?.") i -= text[i - 1] === "." ? 1 : 2;
    else break;
  }
  return text.slice(i, at);
}

/** The text of a source file with comments and string literals blanked (template expressions kept). */
function codeOnly(source: string): string {
  return source.replace(/\/\*[\s\S]*?\*\/|\/\/[^\n]*|"(?:\\.|[^"\\\n])*"|'(?:\\.|[^'\\\n])*'/g, (m) =>
    m.replace(/[^\n]/g, " "),
  );
}

/**
 * Where `source` uses a one-dialect member on the drizzle handle or on a query built from it
 * (`.values(` only without arguments: `insert(…).values(rows)` is common to both), and `$client`
 * anywhere; a raw bun:sqlite handle (`sqlite.query(…).get()`) is not the drizzle handle.
 */
function oneDialectCalls(source: string): string[] {
  const code = codeOnly(source);
  const found: string[] = [];
  for (const m of code.matchAll(ONE_DIALECT)) {
    const chain = chainBefore(code, m.index!);
    const spine = spineOf(chain);
    const noArgs = /^\.\w+\s*\(\s*\)/.test(code.slice(m.index!));
    const drizzle = HANDLE.test(spine) || BUILT.test(spine);
    if (m[0] === ".$client" || (drizzle && (m[1] !== "values" || noArgs))) {
      found.push(`${source.slice(0, m.index!).split("\n").length}: ${spine.slice(-60)}${m[0]}`);
    }
  }
  return found;
}

describe("the boundary: one-dialect drizzle methods stay in src/db", () => {
  test("the check finds them, and passes other code by", () => {
    expect(oneDialectCalls("const r = db.select().from(jobs).where(eq(jobs.id, id)).get();")).toHaveLength(1);
    expect(oneDialectCalls("await this.db.update(jobs).set({ a: 1 })\n  .run();")).toHaveLength(1);
    expect(oneDialectCalls("deps.db.transaction((tx) => {});")).toHaveLength(1);
    expect(oneDialectCalls("const raw = (db as unknown as { $client: Database }).$client;")).toHaveLength(1);
    expect(oneDialectCalls("const q = db.select().from(t).prepare();")).toHaveLength(1);
    expect(oneDialectCalls("Array.from(seen).values(); sqlite.transaction(() => {}); stmt.run(a, b);")).toHaveLength(0);
    expect(oneDialectCalls("for (const v of [...this.items.values()]) {}")).toHaveLength(0);
    expect(oneDialectCalls("await db.insert(jobs).values(rows);")).toHaveLength(0);
    expect(oneDialectCalls('db.query("SELECT 1").get(); // bun:sqlite')).toHaveLength(0);
    expect(oneDialectCalls('const s = "db.select().all()";')).toHaveLength(0);
    expect(oneDialectCalls("new Elysia().delete('/x', () => db.update(t).set({})).get('/y', () => 1);")).toHaveLength(
      0,
    );
  });

  test("no file under src/ outside src/db/ uses .get(), .all(), .run(), .values(), .transaction(, .prepare( or $client on the drizzle handle", () => {
    const offenders: string[] = [];
    for (const file of new Bun.Glob("src/**/*.ts").scanSync({ cwd: repoRoot })) {
      if (file.startsWith("src/db/")) continue;
      for (const hit of oneDialectCalls(readFileSync(join(repoRoot, file), "utf8")))
        offenders.push(`${relative(".", file)}:${hit}`);
    }
    expect(offenders).toEqual([]);
  });
});
