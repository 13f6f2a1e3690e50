/**
 * Per-key limits that hold across the hosts of a cluster, counted in the store (`rate_windows`, one
 * row per key and minute):
 * - requests per minute: each host takes budget in leases of a few requests (`UPDATE … FOR UPDATE`,
 *   never past the limit), so the hosts together admit at most the limit in a minute; a request
 *   is decided from the lease in hand without a store read, and a lease is taken when it runs out;
 * - tokens per minute: what requests used is added every SYNC_MS and the minute's total read back,
 *   so a key over its tokens is refused by every host within that time;
 * - requests at once: each live host allows its share of the limit.
 * The embedded store's one host keeps its own smooth buckets instead (src/limits/limiter.ts).
 */
import { sql } from "drizzle-orm";
import type { Db } from "../db";
import { rows } from "../db/raw";
import { log } from "../log";
import type { Maybe } from "../maybe";

/** How often token counts are summed across the hosts. */
export const SYNC_MS = 250;
const MINUTE = 60_000;

interface Lease {
  minute: number;
  granted: number;
  used: number;
  /** The minute's total over every host, as of the last lease. */
  total: number;
  pending?: Promise<number>;
}

/** Cluster-wide request and token counts per key (see the module comment). */
export class SharedLimits {
  private leases = new Map<string, Lease>();
  private unsynced = new Map<string, number>();
  private totals = new Map<string, { minute: number; tokens: number }>();
  private timer?: ReturnType<typeof setInterval>;
  private syncing = false;
  /** Keys whose token totals this host reads at each sync (it checks their tpm). */
  private watched = new Set<string>();

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
    await this.sync();
  }

  private minute(): number {
    return Math.floor(this.now() / MINUTE);
  }

  /** Milliseconds until the next minute's budget. */
  untilNextMinute(): number {
    return MINUTE - (this.now() % MINUTE);
  }

  /**
   * One request of `keyId`'s `rpm` this minute: true when the cluster still has budget. Decided at
   * once from the lease in hand; when it is used up, a new lease is taken from the store (a promise).
   */
  takeRequest(keyId: string, rpm: number): Maybe<boolean> {
    const minute = this.minute();
    let l = this.leases.get(keyId);
    if (!l || l.minute !== minute) this.leases.set(keyId, (l = { minute, granted: 0, used: 0, total: 0 }));
    const lease = l;
    if (lease.used < lease.granted) {
      lease.used++;
      return true;
    }
    lease.pending ??= this.lease(keyId, lease, rpm).finally(() => (lease.pending = undefined));
    return lease.pending.then(() => {
      if (lease.used >= lease.granted) return false;
      lease.used++;
      return true;
    });
  }

  /** Requests of `keyId` left this minute over the cluster, as this host knows it. */
  remainingRequests(keyId: string, rpm: number): number {
    const l = this.leases.get(keyId);
    return l && l.minute === this.minute() ? Math.max(0, rpm - l.total + (l.granted - l.used)) : rpm;
  }

  /** Takes a lease of a few requests (a share of what is left) from the minute's row; resolves with how many. */
  private async lease(keyId: string, l: Lease, rpm: number): Promise<number> {
    const want = Math.max(1, Math.min(10, Math.floor(rpm / (4 * Math.max(1, this.hosts())))));
    try {
      await rows(this.db, sql`INSERT INTO rate_windows (key_id, minute, requests, tokens) VALUES (${keyId}, ${l.minute}, 0, 0) ON CONFLICT DO NOTHING`);
      const got = await rows<{ g: number | string; total: number | string }>(
        this.db,
        sql`UPDATE rate_windows SET requests = rate_windows.requests + s.g
            FROM (SELECT LEAST(${want}, ${rpm} - requests) AS g FROM rate_windows WHERE key_id = ${keyId} AND minute = ${l.minute} FOR UPDATE) s
            WHERE rate_windows.key_id = ${keyId} AND rate_windows.minute = ${l.minute} AND s.g > 0
            RETURNING s.g AS g, rate_windows.requests AS total`,
      );
      const g = Number(got[0]?.g ?? 0);
      l.granted += g;
      l.total = got[0] ? Number(got[0].total) : rpm;
      return g;
    } catch (e) {
      log.warn(`could not take a request budget for key ${keyId} from the store: ${(e as Error).message}`);
      return 0;
    }
  }

  /**
   * Tokens `keyId` used this minute over the cluster: the last sum plus what this host counted since.
   * The first time a key is asked about in a minute its row is read (a promise); after that the
   * sums every SYNC_MS keep it current.
   */
  tokensNow(keyId: string): Maybe<number> {
    const minute = this.minute();
    const t = this.totals.get(keyId);
    const mine = () => this.unsynced.get(keyId) ?? 0;
    if (t && t.minute === minute) return t.tokens + mine();
    this.watched.add(keyId);
    return rows<{ tokens: number | string }>(this.db, sql`SELECT tokens FROM rate_windows WHERE key_id = ${keyId} AND minute = ${minute}`).then(
      (got) => {
        const seen = this.totals.get(keyId);
        const tokens = seen && seen.minute === minute ? seen.tokens : Number(got[0]?.tokens ?? 0);
        this.totals.set(keyId, { minute, tokens });
        return tokens + mine();
      },
      () => mine(),
    );
  }

  /** Counts tokens a request of `keyId` used (summed across the hosts at the next sync). */
  addTokens(keyId: string, n: number): void {
    if (n > 0) this.unsynced.set(keyId, (this.unsynced.get(keyId) ?? 0) + n);
  }

  /** Adds what this host counted to the minute's rows and reads back the totals of every host. */
  private async sync(): Promise<void> {
    if (this.syncing || (this.unsynced.size === 0 && this.watched.size === 0)) return;
    this.syncing = true;
    const batch = this.unsynced;
    this.unsynced = new Map();
    const watched = [...this.watched].filter((k) => !batch.has(k));
    const minute = this.minute();
    try {
      for (const [keyId, n] of batch) {
        const got = await rows<{ tokens: number | string }>(
          this.db,
          sql`INSERT INTO rate_windows (key_id, minute, requests, tokens) VALUES (${keyId}, ${minute}, 0, ${n})
              ON CONFLICT (key_id, minute) DO UPDATE SET tokens = rate_windows.tokens + excluded.tokens RETURNING tokens`,
        );
        this.totals.set(keyId, { minute, tokens: Number(got[0]?.tokens ?? n) });
      }
      // Keys this host checks but did not count for: what the other hosts counted.
      if (watched.length) {
        const got = await rows<{ key_id: string; tokens: number | string }>(this.db, sql`SELECT key_id, tokens FROM rate_windows WHERE minute = ${minute} AND key_id IN (${sql.join(watched.map((k) => sql`${k}`), sql`, `)})`);
        const seen = new Map(got.map((r) => [r.key_id, Number(r.tokens)]));
        for (const k of watched) this.totals.set(k, { minute, tokens: seen.get(k) ?? 0 });
      }
      if (this.now() % MINUTE < SYNC_MS) this.watched.clear(); // a key not checked for a minute is no longer asked about
      await rows(this.db, sql`DELETE FROM rate_windows WHERE minute < ${minute - 2}`);
    } catch (e) {
      for (const [k, n] of batch) this.unsynced.set(k, (this.unsynced.get(k) ?? 0) + n);
      log.warn(`could not sum token counts across the cluster: ${(e as Error).message}`);
    } finally {
      this.syncing = false;
    }
  }
}
