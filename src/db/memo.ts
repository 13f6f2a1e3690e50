import type { Db } from "./index";

const stamps = new WeakMap<Db, (fresh: boolean) => string>();

/**
 * A cheap stamp that changes whenever the store may have changed: SQLite's data_version (bumped by
 * other connections' commits, e.g. the CLI revoking a key) and total_changes (this connection's).
 */
function stampOf(db: Db): (fresh: boolean) => string {
  let fn = stamps.get(db);
  if (!fn) {
    const stmt = db.$client.prepare<{ dv: number; tc: number }, []>("SELECT (SELECT data_version FROM pragma_data_version) AS dv, total_changes() AS tc");
    // A fresh read (authentication, first thing of every request) always queries; later lookups of
    // the same request reuse a reading under a millisecond old.
    let at = -1;
    let last = "";
    fn = (fresh) => {
      const now = performance.now();
      if (fresh || now - at >= 1) {
        const r = stmt.get()!;
        last = `${r.dv}:${r.tc}`;
        at = now;
      }
      return last;
    };
    stamps.set(db, fn);
  }
  return fn;
}

/** Entries kept at most before a memo starts over. */
const MAX_ENTRIES = 10_000;

/**
 * Memoises a lookup on the hot path (authentication, workload lookup) while the store is unchanged:
 * any write — here or by another process on the same file — empties it before the next read, so a
 * revoked key is refused on the very next request. With `fresh` false the store's state may be read
 * from up to a millisecond before (by the same request's authentication).
 * @example const find = memoize(db, (k: string) => slowQuery(k)); find("a"); find("a"); // one query
 */
export function memoize<V>(db: Db, load: (key: string) => V, fresh = true): (key: string) => V {
  const stamp = stampOf(db);
  const cache = new Map<string, V>();
  let seen = "";
  return (key) => {
    const now = stamp(fresh);
    if (now !== seen || cache.size > MAX_ENTRIES) {
      cache.clear();
      seen = now;
    }
    if (cache.has(key)) return cache.get(key)!;
    const v = load(key);
    cache.set(key, v);
    return v;
  };
}
