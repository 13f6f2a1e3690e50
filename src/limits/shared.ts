/**
 * Per-key limits that hold across the hosts of a cluster, counted in the store per key and second
 * (`rate_windows`) over a sliding window: never more than a key's limit in any 60 s, whatever the
 * clock says of minutes.
 * - requests per minute: each host takes budget in leases of a few requests, each granted under a
 *   per-key lock only while the key's rows of the last SPAN seconds leave room, and usable for
 *   LEASE_MS; a request is decided from the lease in hand without a store read, and a lease is taken
 *   when it runs out or ends (what a lease left unused is given back at the next sync). A host the
 *   store refused refuses the key from memory until budget frees (asking again at most each second);
 * - tokens per minute: what requests used is added every SYNC_MS to the second's row and the last
 *   60 s read back, so a key over its tokens is refused by every host within that time;
 * - requests at once: each live host allows its share of the limit.
 * Hosts count seconds by their own clocks (kept in step by NTP, as a cluster's are).
 * The embedded store's one host keeps its own smooth buckets instead (src/limits/limiter.ts).
 */
import { sql, type SQL as Query } from "drizzle-orm";
import { pgOf, type Db } from "../db";
import { exec, rows } from "../db/raw";
import { log } from "../log";
import type { Maybe } from "../db/memo";

/** How often token counts are summed across the hosts (and unused leases given back). */
export const SYNC_MS = 250;
/** The window a key's rpm and tpm count over, in seconds. */
export const WINDOW_S = 60;
/** How long a lease may be used after it was asked for. */
export const LEASE_MS = 1000;
/**
 * The seconds of rows a lease is checked against: a lease's requests are made within LEASE_MS of the
 * start of its second's next one, so any 60 s holds requests of at most this many seconds' rows.
 */
export const SPAN = WINDOW_S + 1 + Math.ceil(LEASE_MS / 1000);
/** How often rows of seconds long past are deleted. */
const PRUNE_MS = 10_000;
const SECOND = 1000;
/** The advisory lock namespace of per-key leases ("inrl"); the key's hash is the second half. */
const RATE_LOCK = 0x696e726c;

interface Lease {
  /** The second it was granted in (its row). */
  second: number;
  granted: number;
  used: number;
  /** When it may no longer be used (ms). */
  expires: number;
  /** The key's requests in the window over every host when it was granted, this lease aside. */
  total: number;
  /** The oldest second with requests in the window then. */
  oldest: number;
  /** When the window has room again, as of the last refusal (ms). */
  freeAt: number;
  /** Until when a refused key is refused here without asking the store (ms). */
  retryAt: number;
  pending?: Promise<void>;
}

interface Tokens {
  tokens: number;
  /** The oldest second with tokens in the window (undefined: none). */
  oldest?: number;
  /** When a request last asked (ms): keys not asked about for a window are no longer read. */
  asked: number;
}

/** Cluster-wide request and token counts per key (see the module comment). */
export class SharedLimits {
  private leases = new Map<string, Lease>();
  private unsynced = new Map<string, number>();
  /** Unused requests of ended leases, per `keyId` and second, to give back at the next sync. */
  private unused = new Map<string, Map<number, number>>();
  private totals = new Map<string, Tokens>();
  private timer?: ReturnType<typeof setInterval>;
  private syncing = false;
  private prunedAt = 0;

  constructor(
    private db: Db,
    /** How many hosts are alive now (each takes its share of a concurrency limit). */
    readonly hosts: () => number,
    private now: () => number = Date.now,
  ) {}

  /** Starts summing token counts every SYNC_MS. */
  start(): void {
    this.timer = setInterval(() => void this.sync(), SYNC_MS);
  }

  /** Stops, after one last sum of what was counted here. */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.sync(true);
  }

  /**
   * One request of `keyId` under its `rpm`: true when the cluster still has budget in the window.
   * Decided at once from the lease in hand (or a refusal remembered); otherwise a new lease is
   * taken from the store (a promise).
   */
  takeRequest(keyId: string, rpm: number): Maybe<boolean> {
    const t = this.now();
    const l = this.leases.get(keyId);
    if (l && l.used < l.granted && t < l.expires) {
      l.used++;
      return true;
    }
    if (l && !l.pending && t < l.retryAt) return false;
    const lease = l ?? this.fresh(keyId);
    lease.pending ??= this.lease(keyId, lease, rpm).finally(() => (lease.pending = undefined));
    return lease.pending.then(() => {
      if (lease.used >= lease.granted || this.now() >= lease.expires) return false;
      lease.used++;
      return true;
    });
  }

  private fresh(keyId: string): Lease {
    const l: Lease = { second: 0, granted: 0, used: 0, expires: 0, total: 0, oldest: 0, freeAt: 0, retryAt: 0 };
    this.leases.set(keyId, l);
    return l;
  }

  /** Requests of `keyId` left in the window over the cluster, as this host knows it. */
  remainingRequests(keyId: string, rpm: number): number {
    const l = this.leases.get(keyId);
    return l ? Math.max(0, rpm - l.total - l.used) : rpm;
  }

  /** Milliseconds until `keyId`'s window has room again (refused), or until its oldest requests leave it. */
  requestsResetMs(keyId: string): number {
    const l = this.leases.get(keyId);
    const t = this.now();
    if (!l) return WINDOW_S * SECOND;
    if (l.freeAt > t && l.used >= l.granted) return l.freeAt - t;
    return Math.max(SECOND, (l.oldest + SPAN) * SECOND - t);
  }

  /** Milliseconds until the oldest tokens of `keyId` counted now leave the window. */
  tokensResetMs(keyId: string): number {
    const oldest = this.totals.get(keyId)?.oldest;
    const t = this.now();
    return oldest === undefined ? WINDOW_S * SECOND : Math.max(SECOND, (oldest + WINDOW_S + 1) * SECOND - t);
  }

  /** Notes what an ended lease left unused (given back at the next sync). */
  private release(keyId: string, l: Lease): void {
    const left = l.granted - l.used;
    if (left <= 0) return;
    l.used = l.granted;
    this.addUnused(keyId, l.second, left);
  }

  private addUnused(keyId: string, second: number, n: number): void {
    let m = this.unused.get(keyId);
    if (!m) this.unused.set(keyId, (m = new Map()));
    m.set(second, (m.get(second) ?? 0) + n);
  }

  /**
   * Takes a lease of a few requests (a share of what the window has left) under the key's lock:
   * the key's rows of the last SPAN seconds are summed and the grant added to this second's row in
   * one transaction, so hosts asking at once never grant past the limit together.
   */
  private async lease(keyId: string, l: Lease, rpm: number): Promise<void> {
    this.release(keyId, l);
    const t = this.now();
    const second = Math.floor(t / SECOND);
    const want = Math.max(1, Math.min(10, Math.floor(rpm / (4 * Math.max(1, this.hosts())))));
    Object.assign(l, { second, granted: 0, used: 0, expires: t + LEASE_MS });
    try {
      const got = await pgOf(this.db).begin(async (tx) => {
        await tx`SELECT pg_advisory_xact_lock(${RATE_LOCK}, hashtext(${keyId}))`;
        return (await tx`
          WITH w AS (SELECT second, requests FROM rate_windows WHERE key_id = ${keyId} AND second > ${second - SPAN} AND requests > 0),
          g AS (SELECT GREATEST(0, LEAST(${want}::bigint, ${rpm}::bigint - COALESCE(SUM(requests), 0))) AS g, COALESCE(SUM(requests), 0) AS total FROM w),
          ins AS (
            INSERT INTO rate_windows (key_id, second, requests, tokens) SELECT ${keyId}::text, ${second}::bigint, g, 0 FROM g WHERE g > 0
            ON CONFLICT (key_id, second) DO UPDATE SET requests = rate_windows.requests + excluded.requests
          )
          SELECT g.g, g.total, (SELECT string_agg(second || ':' || requests, ',' ORDER BY second) FROM w) AS seconds FROM g`) as {
          g: number | string;
          total: number | string;
          seconds: string | null;
        }[];
      });
      const g = Number(got[0]?.g ?? 0);
      const total = Number(got[0]?.total ?? rpm);
      const seconds = (got[0]?.seconds ?? "")
        .split(",")
        .filter(Boolean)
        .map((p) => p.split(":").map(Number) as [number, number]);
      Object.assign(l, { granted: g, total, oldest: seconds[0]?.[0] ?? second, freeAt: 0, retryAt: 0 });
      if (g === 0) this.refused(l, seconds, total, rpm, t);
    } catch (e) {
      log.warn(`could not take a request budget for key ${keyId} from the store: ${(e as Error).message}`);
      Object.assign(l, { freeAt: t + SECOND, retryAt: t + SECOND });
    }
  }

  /** A key the window has no room for: when it frees (its oldest rows leave the window), and when to ask again. */
  private refused(l: Lease, seconds: [number, number][], total: number, rpm: number, t: number): void {
    let over = total - rpm + 1;
    let at = seconds.at(-1)?.[0] ?? l.second;
    for (const [s, n] of seconds) {
      over -= n;
      if (over <= 0) {
        at = s;
        break;
      }
    }
    l.freeAt = Math.max(t + 1, (at + SPAN) * SECOND);
    // Other hosts give unused leases back: ask again within a second, sooner when the window frees.
    l.retryAt = Math.min(l.freeAt, t + SECOND);
  }

  /**
   * Tokens `keyId` used in the last minute over the cluster: the last sum plus what this host counted
   * since. The first time a key is asked about its rows are read (a promise); after that the sums
   * every SYNC_MS keep it current.
   */
  tokensNow(keyId: string): Maybe<number> {
    const t = this.now();
    const seen = this.totals.get(keyId);
    const mine = () => this.unsynced.get(keyId) ?? 0;
    if (seen) {
      seen.asked = t;
      return seen.tokens + mine();
    }
    return this.readTokens([keyId]).then(
      (got) => {
        const now = this.totals.get(keyId) ?? { tokens: 0, ...got.get(keyId), asked: t };
        this.totals.set(keyId, now);
        return now.tokens + mine();
      },
      () => mine(),
    );
  }

  /** Counts tokens a request of `keyId` used (summed across the hosts at the next sync). */
  addTokens(keyId: string, n: number): void {
    if (n > 0) this.unsynced.set(keyId, (this.unsynced.get(keyId) ?? 0) + n);
  }

  /** The tokens of some keys in the window, over every host, with the oldest second that has any. */
  private async readTokens(keys: string[]): Promise<Map<string, { tokens: number; oldest?: number }>> {
    const since = Math.floor(this.now() / SECOND) - WINDOW_S;
    const got = await rows<{ key_id: string; tokens: number | string; oldest: number | string | null }>(
      this.db,
      sql`SELECT key_id, SUM(tokens) AS tokens, MIN(second) FILTER (WHERE tokens > 0) AS oldest FROM rate_windows
          WHERE second > ${since} AND key_id IN (${sql.join(
            keys.map((k) => sql`${k}`),
            sql`, `,
          )}) GROUP BY key_id`,
    );
    return new Map(
      got.map((r) => [
        r.key_id,
        { tokens: Number(r.tokens), oldest: r.oldest === null ? undefined : Number(r.oldest) },
      ]),
    );
  }

  /** Ended leases' unused requests, noted for giving back; leases idle for a window are forgotten. */
  private collectUnused(t: number, all: boolean): void {
    for (const [keyId, l] of this.leases) {
      if (l.pending) continue;
      if (all || t >= l.expires) this.release(keyId, l);
      if (t >= l.expires + SPAN * SECOND && t >= l.retryAt) this.leases.delete(keyId);
    }
  }

  /**
   * Adds what this host counted to this second's rows, gives back what leases left unused, reads
   * back the token totals of the keys this host checks, and now and then deletes rows long past.
   */
  private async sync(final = false): Promise<void> {
    if (this.syncing) return;
    const t = this.now();
    this.collectUnused(t, final);
    for (const [k, v] of this.totals) if (t - v.asked > WINDOW_S * SECOND) this.totals.delete(k);
    const prune = t - this.prunedAt >= PRUNE_MS;
    if (this.unsynced.size === 0 && this.unused.size === 0 && this.totals.size === 0 && !prune) return;
    this.syncing = true;
    const batch = this.unsynced;
    const unused = this.unused;
    this.unsynced = new Map();
    this.unused = new Map();
    const second = Math.floor(t / SECOND);
    const list = (items: Query[]) => sql.join(items, sql`, `);
    try {
      if (batch.size) {
        await exec(
          this.db,
          sql`INSERT INTO rate_windows (key_id, second, requests, tokens) VALUES ${list([...batch].map(([k, n]) => sql`(${k}, ${second}, 0, ${n})`))}
              ON CONFLICT (key_id, second) DO UPDATE SET tokens = rate_windows.tokens + excluded.tokens`,
        );
      }
      const back = [...unused].flatMap(([k, m]) => [...m].map(([s, n]) => sql`(${k}, ${s}::bigint, ${n}::bigint)`));
      if (back.length) {
        await exec(
          this.db,
          sql`UPDATE rate_windows SET requests = GREATEST(0, rate_windows.requests - v.n) FROM (VALUES ${list(back)}) AS v(key_id, second, n)
              WHERE rate_windows.key_id = v.key_id AND rate_windows.second = v.second`,
        );
      }
      if (this.totals.size) {
        const keys = [...this.totals.keys()];
        const got = await this.readTokens(keys);
        for (const k of keys) {
          const seen = this.totals.get(k);
          if (seen) Object.assign(seen, { tokens: 0, oldest: undefined }, got.get(k));
        }
      }
      if (prune) {
        this.prunedAt = t;
        await exec(this.db, sql`DELETE FROM rate_windows WHERE second < ${second - 2 * SPAN}`);
      }
    } catch (e) {
      for (const [k, n] of batch) this.unsynced.set(k, (this.unsynced.get(k) ?? 0) + n);
      for (const [k, m] of unused) for (const [s, n] of m) this.addUnused(k, s, n);
      log.warn(`could not sum token counts across the cluster: ${(e as Error).message}`);
    } finally {
      this.syncing = false;
    }
  }
}
