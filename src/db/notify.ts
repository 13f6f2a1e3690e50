/**
 * Changes made by any host of a cluster, heard by every host: the PostgreSQL store's triggers send
 * `NOTIFY inferd_changes, '<table>'` when a row the request path memoises changes, and each host
 * LISTENs. Which tables and columns count is declared once (`CHANGE_FEED`): the triggers are
 * generated from it at every start (`changeTriggerStatements`), and a host's own writes are read
 * with it (`changedTables`), so the two can never disagree. Each notification bumps its table's
 * version, which the memos (./memo.ts) and other in-memory views compare against; listeners may
 * also react. A host's own writes to those tables are noted the moment they commit (`watchWrites`),
 * without waiting for the notification to come back, so a change answers the very next request of
 * that host. The embedded SQLite store needs none of this (one process writes; see ./memo.ts).
 */
import type { SQL } from "bun";
import type { Database } from "bun:sqlite";
import { getTableColumns, getTableName, type Table } from "drizzle-orm";
import { log } from "../log";
import * as pgSchema from "./schema-pg";

/** A store as change tracking sees it: one identity per store, and its engine (./index.ts's `Db`). */
export interface StoreRef {
  readonly engine: "sqlite" | "postgres";
}

/** The channel the store's triggers notify on. */
export const CHANGES_CHANNEL = "inferd_changes";

/**
 * One watched table: every column of its PostgreSQL schema is watched except the `quiet` ones
 * (written often, read by no memo: usage counters, heartbeats), so a column added to the schema is
 * watched without anyone remembering to.
 */
export function feedTable<T extends Table>(table: T, quiet: (keyof T["_"]["columns"] & string)[] = []) {
  const columns = Object.entries(getTableColumns(table));
  const isQuiet = new Set<string>(quiet);
  return {
    table: getTableName(table),
    watched: columns.filter(([key]) => !isQuiet.has(key)).map(([, c]) => c.name),
    quiet: new Set(columns.filter(([key]) => isQuiet.has(key)).map(([, c]) => c.name)),
  };
}

/** A table of the change feed: its name, the columns whose updates other hosts must hear, and the quiet ones. */
export type FeedTable = ReturnType<typeof feedTable>;

/**
 * The one change feed: the tables other hosts must hear about (what the request path memoises:
 * projects, keys' settings, workloads, workers, placements) and, per table, the columns whose
 * updates are no change. The store's triggers and `changedTables` are both derived from it.
 */
export const CHANGE_FEED: readonly FeedTable[] = [
  feedTable(pgSchema.projects),
  feedTable(pgSchema.apiKeys, ["requests", "inputTokens", "outputTokens", "lastUsedAt"]),
  feedTable(pgSchema.workloads),
  feedTable(pgSchema.workers, [
    "hostname",
    "version",
    "cpuCores",
    "ramBytes",
    "gpus",
    "telemetry",
    "lastSeenAt",
    "createdAt",
    "hostId",
  ]),
  feedTable(pgSchema.assignments),
  feedTable(pgSchema.adapters),
];

/** A watched table by name. */
const FEED_TABLES = new Map(CHANGE_FEED.map((t) => [t.table, t]));

/**
 * The statements that (re)create the change triggers from `CHANGE_FEED`: inserts and deletes notify
 * once per statement; an update notifies for a row whose watched columns actually changed (so a
 * heartbeat that rewrites an unchanged address is silent). Idempotent; run under the migration lock.
 */
export function changeTriggerStatements(feed: readonly FeedTable[] = CHANGE_FEED): string[] {
  const out = [
    `CREATE OR REPLACE FUNCTION inferd_notify_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('${CHANGES_CHANNEL}', TG_TABLE_NAME);
  RETURN NULL;
END
$$`,
  ];
  for (const { table, watched } of feed) {
    const t = `"${table}"`;
    const cols = watched.map((c) => `"${c}"`);
    out.push(
      `DROP TRIGGER IF EXISTS ${table}_changed ON ${t}`,
      `CREATE TRIGGER ${table}_changed AFTER INSERT OR DELETE ON ${t} FOR EACH STATEMENT EXECUTE FUNCTION inferd_notify_change()`,
      `DROP TRIGGER IF EXISTS ${table}_updated ON ${t}`,
      `CREATE TRIGGER ${table}_updated AFTER UPDATE OF ${cols.join(", ")} ON ${t} FOR EACH ROW` +
        ` WHEN (ROW(${cols.map((c) => `OLD.${c}`).join(", ")}) IS DISTINCT FROM ROW(${cols.map((c) => `NEW.${c}`).join(", ")}))` +
        " EXECUTE FUNCTION inferd_notify_change()",
    );
  }
  return out;
}

/**
 * Brings the store's change triggers in line with this code's `CHANGE_FEED` (inside the caller's
 * transaction, which holds the migration lock). A fingerprint of the statements is kept as the
 * function's comment: when it matches and every trigger is there, nothing is touched (no table
 * lock at an ordinary start).
 */
export async function applyChangeTriggers(tx: SQL): Promise<void> {
  const statements = changeTriggerStatements();
  const fingerprint = `inferd change feed ${Bun.hash(statements.join(";\n")).toString(16)}`;
  const [row] =
    (await tx`SELECT obj_description(p.oid, 'pg_proc') AS note, (SELECT count(*)::int FROM pg_trigger t WHERE t.tgfoid = p.oid) AS triggers
    FROM pg_proc p WHERE p.proname = 'inferd_notify_change'`) as { note: string | null; triggers: number }[];
  if (row?.note === fingerprint && row.triggers === 2 * CHANGE_FEED.length) return;
  for (const s of statements) await tx.unsafe(s);
  await tx.unsafe(`COMMENT ON FUNCTION inferd_notify_change() IS '${fingerprint}'`);
}

/** The embedded store's change counter: one row, bumped by the triggers of `sqliteChangeStatements`. */
export const SQLITE_CHANGES_TABLE = "__inferd_changes";

/**
 * The embedded SQLite store's change triggers, from the same `CHANGE_FEED`: every insert, delete
 * and update of a watched column (to another value) of a watched table, by any connection (the
 * server's, the CLI's, a worker thread's), bumps the one counter in `__inferd_changes`. The memos
 * (./memo.ts) read it, so writes to other tables (the inspector's rows, usage counters) leave them
 * alone whoever makes them.
 */
export function sqliteChangeStatements(feed: readonly FeedTable[] = CHANGE_FEED): string[] {
  const bump = `UPDATE ${SQLITE_CHANGES_TABLE} SET version = version + 1 WHERE id = 1`;
  const out: string[] = [];
  for (const { table, watched } of feed) {
    const cols = watched.map((c) => `"${c}"`);
    out.push(
      `CREATE TRIGGER ${SQLITE_CHANGES_TABLE}_${table}_ins AFTER INSERT ON "${table}" BEGIN ${bump}; END`,
      `CREATE TRIGGER ${SQLITE_CHANGES_TABLE}_${table}_del AFTER DELETE ON "${table}" BEGIN ${bump}; END`,
      `CREATE TRIGGER ${SQLITE_CHANGES_TABLE}_${table}_upd AFTER UPDATE OF ${cols.join(", ")} ON "${table}" FOR EACH ROW` +
        ` WHEN ${cols.map((c) => `OLD.${c} IS NOT NEW.${c}`).join(" OR ")} BEGIN ${bump}; END`,
    );
  }
  return out;
}

/**
 * Brings the SQLite store's change counter and triggers in line with this code's `CHANGE_FEED`:
 * when the fingerprint kept beside the counter matches, nothing is touched; otherwise the old
 * triggers are dropped and these made, in one transaction.
 */
export function applySqliteChangeTriggers(sqlite: Database): void {
  const statements = sqliteChangeStatements();
  const fingerprint = Bun.hash(statements.join(";\n")).toString(16);
  sqlite.exec(
    `CREATE TABLE IF NOT EXISTS ${SQLITE_CHANGES_TABLE} (id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL, feed TEXT NOT NULL)`,
  );
  const row = sqlite.query<{ feed: string }, []>(`SELECT feed FROM ${SQLITE_CHANGES_TABLE} WHERE id = 1`).get();
  if (row?.feed === fingerprint) return;
  sqlite.transaction(() => {
    const old = sqlite
      .query<{ name: string }, []>(
        `SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE '${SQLITE_CHANGES_TABLE}_%'`,
      )
      .all();
    for (const t of old) sqlite.exec(`DROP TRIGGER IF EXISTS "${t.name}"`);
    for (const s of statements) sqlite.exec(s);
    sqlite
      .query(
        `INSERT INTO ${SQLITE_CHANGES_TABLE} (id, version, feed) VALUES (1, 0, ?) ON CONFLICT (id) DO UPDATE SET feed = excluded.feed, version = version + 1`,
      )
      .run(fingerprint);
  })();
}

/** Changes counted: all of them, and per table (heard from any host, and this host's own). */
interface Feed {
  version: number;
  /** This host's own changes (a subset of `version`'s). */
  local: number;
  heard: Record<string, number>;
  own: Record<string, number>;
  listeners: Set<(table: string) => void>;
}

const feeds = new WeakMap<StoreRef, Feed>();

function feedOf(db: StoreRef): Feed {
  let f = feeds.get(db);
  if (!f) {
    const zeros = () => Object.fromEntries(CHANGE_FEED.map((t) => [t.table, 0]));
    feeds.set(db, (f = { version: 0, local: 0, heard: zeros(), own: zeros(), listeners: new Set() }));
  }
  return f;
}

/**
 * How many changes this host has heard of (0 on SQLite), of every table or of one: a memo compares
 * it to know when to reload.
 */
export function changeVersion(db: StoreRef, table?: string): number {
  const f = feedOf(db);
  return table === undefined ? f.version : (f.heard[table] ?? 0);
}

/** How many of those changes this host made itself: a memo forgets at once on these (its own writes are read back at once). */
export function localChanges(db: StoreRef, table?: string): number {
  const f = feedOf(db);
  return table === undefined ? f.local : (f.own[table] ?? 0);
}

/**
 * This host's change counts of every table as a live object (`version`: heard, `local`: its own):
 * a memo on the request path reads its fields instead of calling a function each lookup.
 */
export function changeCounts(db: StoreRef): Readonly<{ version: number; local: number }> {
  return feedOf(db);
}

/**
 * The change counts of some tables (all when none named), as two readers for a memo to call on
 * each lookup: heard from any host, and made by this host. Cheap: a few additions, no lookups.
 */
export function changeCounter(db: StoreRef, tables?: readonly string[]): { heard: () => number; own: () => number } {
  const f = feedOf(db);
  if (!tables) return { heard: () => f.version, own: () => f.local };
  const sum = (counts: Record<string, number>) => () => {
    let n = 0;
    for (const t of tables) n += counts[t] ?? 0;
    return n;
  };
  return { heard: sum(f.heard), own: sum(f.own) };
}

/** Calls `fn` with the table's name on every change heard; returns an unsubscribe. */
export function onChange(db: StoreRef, fn: (table: string) => void): () => void {
  const f = feedOf(db);
  f.listeners.add(fn);
  return () => f.listeners.delete(fn);
}

/**
 * Records a write this process made to a memoised table, the moment it ran: memos forget at once
 * (their next lookup reads it back). Listeners are not called: on PostgreSQL the store's trigger
 * notification follows and calls them; the embedded store's one process calls its parts directly.
 */
export function noteLocalWrite(db: StoreRef): void {
  feedOf(db).local++;
}

/** Records a change of `table` (`*`: of everything): heard from the database, or (`local`) made here and known at once. */
export function noteChange(db: StoreRef, table: string, local = false): void {
  const f = feedOf(db);
  f.version++;
  if (local) f.local++;
  for (const t of table === "*" ? Object.keys(f.heard) : [table]) {
    f.heard[t] = (f.heard[t] ?? 0) + 1;
    if (local) f.own[t] = (f.own[t] ?? 0) + 1;
  }
  for (const l of f.listeners) {
    try {
      l(table);
    } catch (e) {
      log.warn("a change listener failed", e);
    }
  }
}

/**
 * LISTENs on the PostgreSQL store's change channel for the life of the process; returns a stop.
 * A lost connection is re-established by Bun's SQL client; every (re)subscription counts as a change
 * of everything (`*`), since notifications sent while it was down are lost.
 */
export async function listenForChanges(db: StoreRef, pg: SQL): Promise<() => Promise<void>> {
  const sub = await pg.listen(
    CHANGES_CHANNEL,
    (payload) => noteChange(db, payload),
    () => noteChange(db, "*"),
  );
  return () => sub.unlisten();
}

/** Channels hosts signal each other on (besides the change triggers' channel). */
export const SIGNALS = { jobs: "inferd_jobs", deliveries: "inferd_deliveries" } as const;

/**
 * Tells every host of the cluster something happened (`payload`, e.g. the workload that got a job).
 * A no-op on the embedded store, whose one host calls its parts directly.
 */
export async function signal(db: StoreRef, pg: SQL | undefined, channel: string, payload = ""): Promise<void> {
  if (db.engine !== "postgres" || !pg) return;
  await pg.notify(channel, payload).catch((e) => log.debug(`could not signal ${channel}: ${(e as Error).message}`));
}

/**
 * Signals in rounds: the first call sends at once; calls while a round is in flight are sent
 * together in the next one (their payloads joined with commas, or "" for "all" when any is empty
 * or more than `most`). One NOTIFY per round instead of one per call: each is a transaction of its
 * own, and a burst of job submissions would otherwise pay one per job.
 * @example const wake = coalesce((p) => signal(db, pg, SIGNALS.jobs, p)); wake("wl_1"); wake("wl_2");
 */
export function coalesce(send: (payload: string) => Promise<void>, most = 32): (payload?: string) => void {
  let pending: Set<string> | undefined;
  let running = false;
  const flush = async () => {
    running = true;
    while (pending) {
      const round = pending;
      pending = undefined;
      await send(round.has("") || round.size > most ? "" : [...round].join(",")).catch(() => {});
    }
    running = false;
  };
  return (payload = "") => {
    (pending ??= new Set()).add(payload);
    if (!running) void flush();
  };
}

/** Calls `fn` with each payload signalled on `channel` by any host (this one included); returns a stop. */
export async function onSignal(pg: SQL, channel: string, fn: (payload: string) => void): Promise<() => Promise<void>> {
  const sub = await pg.listen(channel, fn);
  return () => sub.unlisten();
}

/**
 * The watched tables a statement changes (those of `CHANGE_FEED`, as the store's triggers see them),
 * from its text: `INSERT INTO t`, `DELETE FROM t`, or `UPDATE t SET …` of a column not quiet there.
 * @example changedTables('update "api_keys" set "revoked_at" = $1 where …') // → ["api_keys"]
 */
export function changedTables(statement: string): string[] {
  const tables = new Set<string>();
  for (const m of statement.matchAll(
    /\b(insert(?:\s+or\s+\w+)?\s+into|replace\s+into|delete\s+from|update(?:\s+or\s+\w+)?)\s+[`"]?(\w+)[`"]?/gi,
  )) {
    const table = m[2].toLowerCase();
    const quiet = FEED_TABLES.get(table)?.quiet;
    if (!quiet) continue;
    if (!/^update/i.test(m[1])) {
      tables.add(table);
      continue;
    }
    const setList =
      /^\s*set\b([\s\S]*?)(?:\bwhere\b|\breturning\b|$)/i.exec(statement.slice(m.index + m[0].length))?.[1] ?? "";
    const columns = [...setList.matchAll(/(?:^|,)\s*"?(\w+)"?\s*=/g)].map((c) => c[1].toLowerCase());
    if (columns.length === 0 || !columns.every((c) => quiet.has(c))) tables.add(table);
  }
  return [...tables];
}

/** `changedTables` of each statement text, remembered (drizzle and the services send the same texts over and over). */
const changedOf = (() => {
  const seen = new Map<string, string[]>();
  return (text: string) => {
    let t = seen.get(text);
    if (!t) {
      t = changedTables(text);
      if (seen.size < 5000) seen.set(text, t);
    }
    return t;
  };
})();

/** Statement methods that run it. */
const RUNS = new Set(["run", "all", "get", "values", "iterate"]);

/**
 * The bun:sqlite database drizzle (and src/db's raw helpers) run on, wrapped so that a statement
 * changing a memoised table (see `changedTables`) calls `changed()` each time it has run. The
 * memo's stamp then moves only on such writes (and on other connections' commits), not on every job
 * inserted or usage counter flushed.
 */
export function watchSqliteWrites(client: Database, changed: () => void): Database {
  const watched = <S extends object>(stmt: S, text: string): S => {
    if (changedOf(text).length === 0) return stmt;
    return new Proxy(stmt, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown;
        if (typeof value !== "function") return value;
        if (!RUNS.has(prop as string)) return value.bind(target);
        return (...args: unknown[]) => {
          try {
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          } finally {
            changed();
          }
        };
      },
    });
  };
  return new Proxy(client, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (typeof value !== "function") return value;
      if (prop === "prepare" || prop === "query")
        return (text: string, ...rest: unknown[]) =>
          watched((value as (...a: unknown[]) => object).call(target, text, ...rest), text);
      if (prop === "run" || prop === "exec")
        return (text: string, ...rest: unknown[]) => {
          try {
            return (value as (...a: unknown[]) => unknown).call(target, text, ...rest);
          } finally {
            if (changedOf(text).length) changed();
          }
        };
      return value.bind(target);
    },
  });
}

/**
 * The PostgreSQL client drizzle runs on, wrapped so that a statement changing a memoised table
 * (see `changedTables`) calls `changed(table)` once it has run, before its caller goes on.
 * Only `unsafe(text, params)` (drizzle's way in, awaited or with `.values()`) is watched.
 */
export function watchWrites(client: SQL, changed: (table: string) => void): SQL {
  return new Proxy(client, {
    get(target, prop) {
      const value = Reflect.get(target, prop, target) as unknown;
      if (prop !== "unsafe") return typeof value === "function" ? value.bind(target) : value;
      return (text: string, params?: unknown[]) => {
        const query = target.unsafe(text, params);
        const tables = changedTables(text);
        if (tables.length === 0) return query;
        const after = <T>(run: PromiseLike<T>) =>
          Promise.resolve(run).then((v) => {
            for (const t of tables) changed(t);
            return v;
          });
        return {
          then: (ok?: (v: unknown) => unknown, fail?: (e: unknown) => unknown) => after(query).then(ok, fail),
          values: () => after(query.values()),
        };
      };
    },
  });
}
