import type { Db } from "./index";

const stamps = new WeakMap<Db, () => string>();

/**
 * A cheap stamp that changes whenever the store may have changed: SQLite's data_version (bumped by
 * other connections' commits, e.g. the CLI revoking a key) and total_changes (this connection's).
 */
function stampOf(db: Db): () => string {
  let fn = stamps.get(db);
  if (!fn) {
    const stmt = db.$client.prepare<{ dv: number; tc: number }, []>("SELECT (SELECT data_version FROM pragma_data_version) AS dv, total_changes() AS tc");
    fn = () => {
      const r = stmt.get()!;
      return `${r.dv}:${r.tc}`;
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
 * revoked key is refused on the very next request.
 * @example const find = memoize(db, (k: string) => slowQuery(k)); find("a"); find("a"); // one query
 */
export function memoize<V>(db: Db, load: (key: string) => V): (key: string) => V {
  const stamp = stampOf(db);
  const cache = new Map<string, V>();
  let seen = "";
  return (key) => {
    const now = stamp();
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
