/**
 * Memoised lookups for the request path (a key by its hash, a workload by its slugs): answered from
 * memory while the store is unchanged, so a request does not wait on the database.
 * - SQLite: a cheap stamp (the store's change counter, bumped by triggers on the memoised tables
 *   whichever connection writes them, such as the CLI's; and this process's writes to those tables,
 *   noted as they run by ./notify.ts's `watchSqliteWrites`) is read before each lookup; any change
 *   empties the memo. Jobs inserted, usage counters flushed and the inspector's rows (written by a
 *   worker thread's own connection) do not touch what is memoised, so they leave it alone.
 * - PostgreSQL: the store's triggers NOTIFY on changes to the looked-up tables (./notify.ts); a memo
 *   naming the tables it reads compares only their versions. It then reloads the entries it holds in
 *   the background and keeps answering from the old ones until the new ones are in (a few
 *   milliseconds), so the request path never waits on a reload. A change this host made itself to
 *   those tables empties the memo at once (read back on the next request, as on SQLite).
 */
import { statSync } from "node:fs";
import { sqliteOf, type Db } from "./index";
import { changeCounter, localChanges, SQLITE_CHANGES_TABLE } from "./notify";

const stamps = new WeakMap<Db, (fresh: boolean) => string>();

/** The longest a reading of the change counter is trusted while the WAL file looks unchanged (ms). */
const RECHECK_MS = 100;

/**
 * A look at `file`'s WAL (`<file>-wal`) by name, no descriptor opened: its inode, size and times.
 * Any connection's commit appends to it (or rewrites it from the start after a checkpoint, which
 * moves its times), so an unchanged look means no commit happened since, as far as the file system's
 * clock can tell. Undefined when there is no WAL (not in WAL mode, or in memory). Nothing here may
 * open the WAL or its index: closing a descriptor of a file drops every POSIX lock this process
 * holds on it, SQLite's included.
 */
function walLook(file: string): (() => string | undefined) | undefined {
  if (!file || file === ":memory:") return undefined;
  const wal = `${file}-wal`;
  return () => {
    try {
      const s = statSync(wal);
      return `${s.ino}:${s.size}:${s.mtimeMs}:${s.ctimeMs}`;
    } catch {
      return undefined;
    }
  };
}

/**
 * A cheap SQLite stamp that changes whenever what the memos hold may have changed: the store's
 * change counter (bumped by triggers on the memoised tables, whoever writes them: ./notify.ts
 * `sqliteChangeStatements`) and this process's writes to those tables. The counter is read when the
 * WAL file looks changed (some commit happened) or RECHECK_MS after the last reading (a commit the
 * file system's clock could not tell apart); otherwise the last reading stands, so a request costs
 * one `stat`.
 */
function sqliteStamp(db: Db): (fresh: boolean) => string {
  let fn = stamps.get(db);
  if (!fn) {
    const sqlite = sqliteOf(db);
    const stmt = sqlite.prepare<{ v: number }, []>(`SELECT version AS v FROM ${SQLITE_CHANGES_TABLE} WHERE id = 1`);
    const look = walLook(sqlite.filename);
    // A fresh read (authentication, first thing of every request) always looks; later lookups of
    // the same request reuse a reading under a millisecond old. This process's own writes are
    // counted in memory and always current.
    let at = -1;
    let readAt = -Infinity;
    let seen: string | undefined;
    let version = 0;
    const read = (t: number) => {
      const now = look?.();
      if (now !== undefined && now === seen && t - readAt < RECHECK_MS) return;
      seen = now;
      readAt = t;
      version = stmt.get()?.v ?? 0;
    };
    fn = (fresh) => {
      const t = performance.now();
      if (fresh || t - at >= 1) {
        read(t);
        at = t;
      }
      return `${version}:${localChanges(db)}`;
    };
    stamps.set(db, fn);
  }
  return fn;
}

/** Entries kept at most before a memo starts over. */
const MAX_ENTRIES = 10_000;

/** A memoised lookup: the value at once when held, else a promise of it. */
export type Lookup<V> = (key: string) => V | Promise<V>;

/**
 * Memoises `load` on the request path while the store is unchanged (see the module comment): on
 * SQLite any write empties it before the next read, so a revoked key is refused on the very next
 * request; on PostgreSQL a change NOTIFY makes it reload in the background. With `fresh` false the
 * SQLite stamp may be read from up to a millisecond before (by the same request's authentication).
 * `tables`: the tables of ./notify.ts's change feed that `load` reads (none named: any change counts).
 * @example const find = memoize(db, (k) => loadKey(k), true, ["api_keys"]); await find("a"); await find("a"); // one query
 */
export function memoize<V>(
  db: Db,
  load: (key: string) => Promise<V>,
  fresh = true,
  tables?: readonly string[],
): Lookup<V> {
  return db.engine === "sqlite" ? sqliteMemo(db, load, fresh) : notifiedMemo(db, load, tables);
}

function sqliteMemo<V>(db: Db, load: (key: string) => Promise<V>, fresh: boolean): Lookup<V> {
  const stamp = sqliteStamp(db);
  const cache = new Map<string, V>();
  let seen = "";
  return (key) => {
    const now = stamp(fresh);
    if (now !== seen || cache.size > MAX_ENTRIES) {
      cache.clear();
      seen = now;
    }
    if (cache.has(key)) return cache.get(key)!;
    return load(key).then((v) => {
      if (seen === now) cache.set(key, v);
      return v;
    });
  };
}

function notifiedMemo<V>(db: Db, load: (key: string) => Promise<V>, tables?: readonly string[]): Lookup<V> {
  const changes = changeCounter(db, tables);
  let cache = new Map<string, V>();
  let version = changes.heard();
  let own = changes.own();
  let refreshing = false;
  const refresh = async (target: number) => {
    refreshing = true;
    try {
      const keys = [...cache.keys()];
      const values = await Promise.all(keys.map((k) => load(k)));
      if (changes.heard() === target) {
        cache = new Map(keys.map((k, i) => [k, values[i]]));
        version = target;
      }
    } catch {
      cache = new Map(); // the database is unreachable: start over rather than serve stale forever
      version = target;
    } finally {
      refreshing = false;
    }
  };
  return (key) => {
    if (changes.own() !== own) {
      // This host changed the store itself: the next lookup reads it back, as on SQLite.
      own = changes.own();
      cache = new Map();
      version = changes.heard();
    }
    const now = changes.heard();
    if (now !== version && !refreshing) void refresh(now);
    if (cache.size > MAX_ENTRIES) cache.clear();
    if (cache.has(key)) return cache.get(key)!;
    const into = cache;
    return load(key).then((v) => {
      // Not kept when the memo started over while it loaded (it may be the value from before a change).
      if (cache === into) cache.set(key, v);
      return v;
    });
  };
}
