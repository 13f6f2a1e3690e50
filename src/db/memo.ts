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
import { sqliteOf, type Db } from "./index";
import { changeCounter, changeCounts, SQLITE_CHANGES_TABLE } from "./notify";

const versions = new WeakMap<Db, () => number>();

/**
 * How long a reading of the change counter stands (ms): the requests arriving within it share one.
 * A reading costs ~20 µs on a busy server (the connection's page cache is cold after other
 * connections' commits), so reading it for each request cost ~6 µs of CPU per request at 2 800/s.
 */
export const READING_MS = 10;

/**
 * The SQLite store's change counter (bumped by triggers on the memoised tables, whoever writes them:
 * ./notify.ts `sqliteChangeStatements`), read at most once per READING_MS (10 ms): the requests
 * arriving together share one reading, and another process's write (the CLI's) is seen by every
 * request arriving 10 ms after it committed. With this process's own writes (counted in memory,
 * always current) it tells when what the memos hold may have changed.
 */
function sqliteVersion(db: Db): () => number {
  let fn = versions.get(db);
  if (!fn) {
    const stmt = sqliteOf(db).prepare<{ v: number }, []>(
      `SELECT version AS v FROM ${SQLITE_CHANGES_TABLE} WHERE id = 1`,
    );
    let at = -Infinity;
    let version = 0;
    fn = () => {
      const t = performance.now();
      if (t - at >= READING_MS) {
        version = stmt.get()?.v ?? 0;
        at = t;
      }
      return version;
    };
    versions.set(db, fn);
  }
  return fn;
}

/** Entries kept at most before a memo starts over. */
const MAX_ENTRIES = 10_000;

/**
 * A value ready now or later. The request path answers from memory when it can (a memoised key, a
 * count already read) and only then falls back to the store; these keep the first case free of
 * promises, so a request that needs no store read does not pay for one.
 */
export type Maybe<T> = T | Promise<T>;

/**
 * Applies `f` now when `x` is a value, or once it resolves.
 * @example andThen(lookup(k), (v) => v.name) // → the name now, or a promise of it
 */
export function andThen<T, U>(x: Maybe<T>, f: (v: T) => Maybe<U>): Maybe<U> {
  return x instanceof Promise ? x.then(f) : f(x);
}

/** A memoised lookup: the value at once when held, else a promise of it. */
export type Lookup<V> = (key: string) => Maybe<V>;

/**
 * Memoises `load` on the request path while the store is unchanged (see the module comment): on
 * SQLite any write empties it before the next read, so a revoked key is refused on the very next
 * request (another process's, within READING_MS); on PostgreSQL a change NOTIFY makes it reload in
 * the background.
 * `tables`: the tables of ./notify.ts's change feed that `load` reads (none named: any change counts).
 * @example const find = memoize(db, (k) => loadKey(k), ["api_keys"]); await find("a"); await find("a"); // one query
 */
export function memoize<V>(db: Db, load: (key: string) => Promise<V>, tables?: readonly string[]): Lookup<V> {
  return db.engine === "sqlite" ? sqliteMemo(db, load) : notifiedMemo(db, load, tables);
}

/** A lookup of every store: `memoize`'s, made for each store on its first use. */
export type StoreLookup<V> = (db: Db, key: string) => Maybe<V>;

/**
 * `memoize` for a lookup a feature offers as a function of the store: the memo of each store is made
 * on its first call. The request path runs only this and the memo while an entry is held: `load`
 * (the owning feature's query) runs on a miss.
 * @example export const findKeyByHash = storeLookup((db, hash) => loadKey(db, hash), ["api_keys"]);
 */
export function storeLookup<V>(load: (db: Db, key: string) => Promise<V>, tables?: readonly string[]): StoreLookup<V> {
  const memos = new WeakMap<Db, Lookup<V>>();
  return (db, key) => {
    let find = memos.get(db);
    if (!find) memos.set(db, (find = memoize(db, (k) => load(db, k), tables)));
    return find(key);
  };
}

function sqliteMemo<V>(db: Db, load: (key: string) => Promise<V>): Lookup<V> {
  const version = sqliteVersion(db);
  const counts = changeCounts(db);
  const cache = new Map<string, V>();
  let seenVersion = -1;
  let seenLocal = -1;
  return (key) => {
    const v = version();
    const local = counts.local;
    if (v !== seenVersion || local !== seenLocal || cache.size > MAX_ENTRIES) {
      cache.clear();
      seenVersion = v;
      seenLocal = local;
    }
    if (cache.has(key)) return cache.get(key)!;
    return load(key).then((value) => {
      if (seenVersion === v && seenLocal === local) cache.set(key, value);
      return value;
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
