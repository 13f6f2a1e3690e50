/**
 * Changes made by any host of a cluster, heard by every host: the PostgreSQL store's triggers send
 * `NOTIFY inferd_changes, '<table>'` when a row the request path memoises changes (projects, keys'
 * settings, workloads, workers), and each host LISTENs. Each notification bumps a version that
 * the memos (./memo.ts) and other in-memory views compare against; listeners may also react.
 * A host's own writes to those tables are noted the moment they commit (`watchWrites`), without
 * waiting for the notification to come back, so a change answers the very next request of that host.
 * The embedded SQLite store needs none of this (one process writes; see ./memo.ts for its stamp).
 */
import type { SQL } from "bun";
import type { Database } from "bun:sqlite";
import { log } from "../log";

/** A store as change tracking sees it: one identity per store, and its engine (./index.ts's `Db`). */
export interface StoreRef {
  readonly engine: "sqlite" | "postgres";
}

/** The channel the store's triggers notify on. */
export const CHANGES_CHANNEL = "inferd_changes";

interface Feed {
  version: number;
  /** This host's own changes (a subset of `version`'s). */
  local: number;
  listeners: Set<(table: string) => void>;
}

const feeds = new WeakMap<StoreRef, Feed>();

function feedOf(db: StoreRef): Feed {
  let f = feeds.get(db);
  if (!f) feeds.set(db, (f = { version: 0, local: 0, listeners: new Set() }));
  return f;
}

/** How many changes this host has heard of (0 on SQLite): a memo compares it to know when to reload. */
export function changeVersion(db: StoreRef): number {
  return feedOf(db).version;
}

/** How many of those changes this host made itself: a memo forgets at once on these (its own writes are read back at once). */
export function localChanges(db: StoreRef): number {
  return feedOf(db).local;
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

/** Records a change: heard from the database, or (`local`) made here and known at once. */
export function noteChange(db: StoreRef, table: string, local = false): void {
  const f = feedOf(db);
  f.version++;
  if (local) f.local++;
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
  const sub = await pg.listen(CHANGES_CHANNEL, (payload) => noteChange(db, payload), () => noteChange(db, "*"));
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
 * Columns written often that the triggers leave out (usage counters, heartbeats): an UPDATE that
 * sets only these is no change to what the request path memoises. Mirrors 0001_change_notify.sql.
 */
const QUIET_COLUMNS: Record<string, Set<string> | undefined> = {
  projects: new Set(),
  workloads: new Set(),
  assignments: new Set(),
  api_keys: new Set(["requests", "input_tokens", "output_tokens", "last_used_at"]),
  workers: new Set(["hostname", "version", "cpu_cores", "ram_bytes", "gpus", "telemetry", "last_seen_at", "created_at", "host_id"]),
};

/**
 * The memoised tables a statement changes (the ones the store's triggers notify about), from its
 * text: `INSERT INTO t`, `DELETE FROM t`, or `UPDATE t SET …` of a column other than the quiet ones.
 * @example changedTables('update "api_keys" set "revoked_at" = $1 where …') // → ["api_keys"]
 */
export function changedTables(statement: string): string[] {
  const tables = new Set<string>();
  for (const m of statement.matchAll(/\b(insert(?:\s+or\s+\w+)?\s+into|replace\s+into|delete\s+from|update(?:\s+or\s+\w+)?)\s+[`"]?(\w+)[`"]?/gi)) {
    const table = m[2].toLowerCase();
    const quiet = QUIET_COLUMNS[table];
    if (!quiet) continue;
    if (!/^update/i.test(m[1])) {
      tables.add(table);
      continue;
    }
    const setList = /^\s*set\b([\s\S]*?)(?:\bwhere\b|\breturning\b|$)/i.exec(statement.slice(m.index + m[0].length))?.[1] ?? "";
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
      if (prop === "prepare" || prop === "query") return (text: string, ...rest: unknown[]) => watched((value as (...a: unknown[]) => object).call(target, text, ...rest), text);
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
        return { then: (ok?: (v: unknown) => unknown, fail?: (e: unknown) => unknown) => after(query).then(ok, fail), values: () => after(query.values()) };
      };
    },
  });
}
