/**
 * Which host runs the duties that must run once: placement and scaling, the webhook delivery
 * sweeper, retention, backups. With the embedded store the one host always leads. With PostgreSQL
 * the leader holds a session advisory lock on a connection of its own: when its process dies the
 * connection closes, the lock goes with it, and another host takes it at its next try (every
 * LEADER_TRY_MS), well within the 15 s a cluster promises. When the leader's machine vanishes
 * without closing it (power, network), the server's keepalive probes on that connection (set short
 * here) end it within about 10 s; a leader that cannot reach its lock connection for CHECK_TIMEOUT_MS
 * stops leading first, so two hosts never lead at once.
 */
import type { ReservedSQL, SQL } from "bun";
import { log } from "../log";

/** How often a host that does not lead tries to, and a leader checks it still holds the lock. */
export const LEADER_TRY_MS = 2_000;

/** A leader whose lock connection does not answer within this stops leading. */
export const CHECK_TIMEOUT_MS = 5_000;

/**
 * The server's TCP keepalive on the lock connection: probes after 4 s of silence, every 2 s, 3 of
 * them. The leader's check every LEADER_TRY_MS keeps it busy while it lives.
 */
const KEEPALIVE = ["SET tcp_keepalives_idle = 4", "SET tcp_keepalives_interval = 2", "SET tcp_keepalives_count = 3"];

/** The advisory lock key of the leader ("inld"). */
export const LEADER_LOCK = 0x696e6c64;

/** Told when this host starts or stops leading. */
export type LeaderListener = (leading: boolean) => void;

/** This host's leadership: `leading` now, and a listener for changes. */
export interface Leadership {
  readonly leading: boolean;
  start(): Promise<void>;
  stop(): Promise<void>;
  onChange(fn: LeaderListener): void;
}

/** The embedded store's leadership: the one host, always. */
export function soleLeader(): Leadership {
  const listeners: LeaderListener[] = [];
  return {
    leading: true,
    start: async () => listeners.forEach((l) => l(true)),
    stop: async () => {},
    onChange: (fn) => void listeners.push(fn),
  };
}

/** Leadership over a PostgreSQL store by advisory lock (see the module comment). */
export class LockLeadership implements Leadership {
  private held?: ReservedSQL;
  private timer?: ReturnType<typeof setInterval>;
  private listeners: LeaderListener[] = [];
  private trying = false;
  private stopped = false;

  constructor(private pg: SQL) {}

  /** Whether this host leads now. */
  get leading(): boolean {
    return this.held !== undefined;
  }

  onChange(fn: LeaderListener): void {
    this.listeners.push(fn);
  }

  /** Tries at once, then every LEADER_TRY_MS. */
  async start(): Promise<void> {
    await this.attempt();
    this.timer = setInterval(() => void this.attempt(), LEADER_TRY_MS);
  }

  private async attempt(): Promise<void> {
    if (this.trying || this.stopped) return;
    this.trying = true;
    try {
      if (this.held) await this.check();
      else await this.take();
    } finally {
      this.trying = false;
    }
  }

  /** Takes the lock when free, on a connection kept for as long as this host leads. */
  private async take(): Promise<void> {
    let conn: ReservedSQL | undefined;
    try {
      conn = await this.pg.reserve();
      const [{ ok }] = (await conn`SELECT pg_try_advisory_lock(${LEADER_LOCK}) AS ok`) as { ok: boolean }[];
      if (!ok || this.stopped) {
        if (ok) await conn`SELECT pg_advisory_unlock(${LEADER_LOCK})`.catch(() => {});
        conn.release();
        return;
      }
      for (const setting of KEEPALIVE)
        await conn.unsafe(setting).catch((e) => log.debug(`${setting}: ${(e as Error).message}`));
      this.held = conn;
      log.info("this host leads the cluster (placement, scaling, deliveries, retention, backups)");
      this.tell(true);
    } catch (e) {
      conn?.release();
      log.debug(`could not try for leadership: ${(e as Error).message}`);
    }
  }

  /** A leader whose lock connection no longer answers has lost the lock with it. */
  private async check(): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<never>(
      (_, reject) =>
        (timer = setTimeout(
          () => reject(new Error(`no answer within ${CHECK_TIMEOUT_MS / 1000} s`)),
          CHECK_TIMEOUT_MS,
        )),
    );
    try {
      await Promise.race([this.held!`SELECT 1`, late]);
    } catch (e) {
      log.warn(`this host no longer leads: its lock connection failed (${(e as Error).message})`);
      this.lose();
    } finally {
      clearTimeout(timer);
    }
  }

  private lose(): void {
    const conn = this.held;
    this.held = undefined;
    // Closed, not put back in the pool: it may still be waiting on a database it cannot reach.
    void conn?.close().catch(() => {});
    this.tell(false);
  }

  private tell(leading: boolean): void {
    for (const l of this.listeners) {
      try {
        l(leading);
      } catch (e) {
        log.warn("a leadership listener failed", e);
      }
    }
  }

  /** Gives up the lead (a clean stop: another host takes over at once) and stops trying. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    const conn = this.held;
    if (!conn) return;
    this.held = undefined;
    await conn`SELECT pg_advisory_unlock(${LEADER_LOCK})`.catch(() => {});
    conn.release();
    this.tell(false);
  }
}
