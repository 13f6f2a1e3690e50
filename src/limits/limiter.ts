/**
 * Per-key limits on the data plane, checked next to authentication: requests and tokens per minute
 * (in-memory token buckets), requests in flight, and token quotas per UTC day and month for keys and
 * projects (counted from the stored daily usage, so they hold across restarts). Over a limit: 429
 * with `Retry-After` (and `retry-after-ms`) and OpenAI's `x-ratelimit-*` headers, which the official
 * SDKs read to wait before retrying.
 */
import { callOf } from "../call";
import { utcDay } from "../ids";
import { AppError } from "../errors";
import { andThen } from "../db/memo";
import type { SharedLimits } from "./shared";
import type { Finished } from "../usage/meter";
import { keyLimitsProblem, parseKeyLimits, withDefaults, type KeyLimitDefaults } from "./defaults";
import { plural } from "../words";

/** What the limiter needs of a key (its row). */
export interface LimitedKey {
  id: string;
  projectId: string;
  rpm: number | null;
  tpm: number | null;
  maxConcurrent: number | null;
  tokensPerDay: number | null;
  tokensPerMonth: number | null;
}

/** A project's token quotas (null: none). */
export type ProjectQuotas = { tokensPerDay: number | null; tokensPerMonth: number | null };

/**
 * Stored token counts (the daily usage table) and project quotas. Either may answer with a promise
 * (a store read); the limiter keeps counts in memory once read, so that happens once per period.
 */
export interface QuotaSource {
  /** Tokens used by a key (or a project) on a UTC day (`2026-11-22`) or in a month (`2026-11`). */
  tokensUsed(scope: "key" | "project", id: string, period: string): number | Promise<number>;
  projectQuotas(projectId: string): ProjectQuotas | Promise<ProjectQuotas>;
}

/** A token bucket: `capacity` at most, refilled at capacity per minute. */
interface Bucket {
  level: number;
  at: number;
}

/** What an admitted request holds until it ends. */
export interface Ticket {
  headers: Record<string, string>;
  release(): void;
}

const MINUTE = 60_000;

/** The ticket of a request whose key has no per-minute limit and no concurrency cap: no headers, nothing to give back. */
const UNLIMITED: Ticket = Object.freeze({ headers: Object.freeze({}) as Record<string, string>, release: () => {} });

/** Whether `o` has no own key. */
function isEmpty(o: Record<string, string>): boolean {
  for (const _ in o) return false;
  return true;
}

/** Whether the key or its project has a token quota (per day or per month). */
const hasQuotas = (key: LimitedKey, project: ProjectQuotas): boolean =>
  key.tokensPerDay !== null ||
  key.tokensPerMonth !== null ||
  project.tokensPerDay !== null ||
  project.tokensPerMonth !== null;

/**
 * A reset time as OpenAI writes it (`1s`, `6m0s`, `20ms`).
 * @example resetText(361_000) // → "6m1s"
 */
export function resetText(ms: number): string {
  if (ms < 1000) return `${Math.max(0, Math.ceil(ms))}ms`;
  const s = Math.ceil(ms / 1000);
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${s % 60}s`;
}

/** The start of the next UTC day and month after `now` (ms). */
function nextPeriods(now: number): { day: number; month: number } {
  const d = new Date(now);
  return {
    day: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate() + 1),
    month: Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1),
  };
}

declare module "../call" {
  interface Call {
    /** The key's admission: the headers its answers carry and the concurrency slot it gives back (set by `Limiter.admit`). */
    ticket?: Ticket;
  }
}

/** Per-key limits and quotas (a key without a limit of some kind gets the default one, if set); `now` injectable for tests. */
export class Limiter {
  private requests = new Map<string, Bucket>();
  private tokens = new Map<string, Bucket>();
  private inFlight = new Map<string, number>();
  /** Tokens counted per `scope:id:period` since loaded from the store. */
  private used = new Map<string, number>();

  constructor(
    private quotas: QuotaSource,
    private now: () => number = Date.now,
    /** In a cluster: request, token and concurrency limits counted across the hosts (src/limits/shared.ts). */
    private shared?: SharedLimits,
  ) {}

  /** The default key limits in force (`--default-key-limits`): `useDefaults` sets them as the setting changes. */
  private defaults: KeyLimitDefaults = {};
  /** Each key record with the defaults filled in, made once per record and defaults in force. */
  private keysWithDefaults = new WeakMap<LimitedKey, { defaults: KeyLimitDefaults; key: LimitedKey }>();

  /**
   * Applies the setting's items (`rpm=60`, …) from the next request on; items that do not parse
   * (checked before they are stored) count as none.
   */
  useDefaults(items: string[]): void {
    this.defaults = keyLimitsProblem(items) ? {} : parseKeyLimits(items);
  }

  /** `own` with the defaults in force filled in where it has no limit of its own. */
  private effectiveKey(own: LimitedKey): LimitedKey {
    let made = this.keysWithDefaults.get(own);
    if (made?.defaults !== this.defaults)
      this.keysWithDefaults.set(own, (made = { defaults: this.defaults, key: withDefaults(own, this.defaults) }));
    return made.key;
  }

  private fill(map: Map<string, Bucket>, id: string, capacity: number, t: number): Bucket {
    let b = map.get(id);
    if (!b) map.set(id, (b = { level: capacity, at: t }));
    b.level = Math.min(capacity, b.level + ((t - b.at) * capacity) / MINUTE);
    b.at = t;
    return b;
  }

  /** Reads the stored count of a period once (then counted in memory); a promise while it is read. */
  private loadUsed(scope: "key" | "project", id: string, period: string): Promise<void> | undefined {
    const k = `${scope}:${id}:${period}`;
    if (this.used.has(k)) return undefined;
    const n = this.quotas.tokensUsed(scope, id, period);
    if (!(n instanceof Promise)) {
      this.used.set(k, n);
      return undefined;
    }
    return n.then((v) => {
      if (!this.used.has(k)) this.used.set(k, v);
    });
  }

  /** 429 with the retry time and the headers. */
  private refuse(code: string, message: string, waitMs: number, headers: Record<string, string>): never {
    throw new AppError(429, code, message, {
      ...headers,
      "retry-after": String(Math.max(1, Math.ceil(waitMs / 1000))),
      "retry-after-ms": String(Math.max(1, Math.ceil(waitMs))),
    });
  }

  /**
   * Admits a request of `key` or refuses it with 429; the ticket's headers go on the response and its
   * `release()` (also called by `finished`) gives back the concurrency slot. Keys without limits
   * pass at once; a key with quotas whose counts are in memory is decided at once too, else once
   * they are read (a promise).
   */
  admit(own: LimitedKey, request?: Request): Ticket | Promise<Ticket> {
    const key = this.effectiveKey(own);
    const q = this.quotas.projectQuotas(key.projectId);
    return q instanceof Promise ? q.then((v) => this.admitWith(key, v, request)) : this.admitWith(key, q, request);
  }

  /** Reads every count `key`'s quotas need that is not in memory yet; undefined when all are. */
  private loadAll(key: LimitedKey, project: ProjectQuotas): Promise<void> | undefined {
    if (!hasQuotas(key, project)) return undefined;
    const day = utcDay(this.now());
    const month = day.slice(0, 7);
    const loads = [
      key.tokensPerDay !== null ? this.loadUsed("key", key.id, day) : undefined,
      key.tokensPerMonth !== null ? this.loadUsed("key", key.id, month) : undefined,
      project.tokensPerDay !== null ? this.loadUsed("project", key.projectId, day) : undefined,
      project.tokensPerMonth !== null ? this.loadUsed("project", key.projectId, month) : undefined,
    ].filter((p): p is Promise<void> => p !== undefined);
    return loads.length ? Promise.all(loads).then(() => undefined) : undefined;
  }

  /** Reads what the quotas need (when not in memory), takes the cluster's request budget and token count (in a cluster), then decides. */
  private admitWith(key: LimitedKey, project: ProjectQuotas, request?: Request): Ticket | Promise<Ticket> {
    const pending = this.loadAll(key, project);
    if (pending) return pending.then(() => this.admitWith(key, project, request));
    const shared = this.shared;
    if (!shared) return this.decide(key, project, request);
    const headers: Record<string, string> = {};
    const tokens = key.tpm === null ? undefined : shared.tokensNow(key.id);
    return andThen(tokens, (used) => {
      if (key.tpm !== null && used !== undefined) {
        const tpm = key.tpm;
        Object.assign(headers, {
          "x-ratelimit-limit-tokens": String(tpm),
          "x-ratelimit-remaining-tokens": String(Math.max(0, tpm - used)),
          "x-ratelimit-reset-tokens": resetText(shared.tokensResetMs(key.id)),
        });
        if (used >= tpm)
          this.refuse(
            "rate_limited",
            `this key may use ${tpm} tokens per minute (across every host)`,
            shared.tokensResetMs(key.id),
            headers,
          );
      }
      if (key.rpm === null) return this.decide(key, project, request, headers);
      const rpm = key.rpm;
      return andThen(shared.takeRequest(key.id, rpm), (ok) => {
        Object.assign(headers, {
          "x-ratelimit-limit-requests": String(rpm),
          "x-ratelimit-remaining-requests": String(shared.remainingRequests(key.id, rpm)),
          "x-ratelimit-reset-requests": resetText(shared.requestsResetMs(key.id)),
        });
        if (!ok)
          this.refuse(
            "rate_limited",
            `this key may make ${rpm} requests per minute (across every host)`,
            shared.requestsResetMs(key.id),
            { ...headers, "x-ratelimit-remaining-requests": "0" },
          );
        return this.decide(key, project, request, headers);
      });
    });
  }

  /** The decision once the counts are in memory: 429 (thrown) or the ticket (`headers`: from the cluster's request and token counts). */
  private decide(
    key: LimitedKey,
    project: ProjectQuotas,
    request?: Request,
    headers: Record<string, string> = {},
  ): Ticket {
    const t = this.now();
    // In a cluster each live host allows its share of the requests at once.
    const maxConcurrent =
      key.maxConcurrent === null
        ? null
        : this.shared
          ? Math.max(1, Math.floor(key.maxConcurrent / Math.max(1, this.shared.hosts())))
          : key.maxConcurrent;
    if (maxConcurrent !== null && (this.inFlight.get(key.id) ?? 0) >= maxConcurrent) {
      this.refuse(
        "rate_limited",
        `this key may have ${plural(key.maxConcurrent!, "request")} in flight at once${this.shared ? ` (${maxConcurrent} through this host)` : ""}`,
        1000,
        headers,
      );
    }
    if (key.rpm !== null && !this.shared) {
      const b = this.fill(this.requests, key.id, key.rpm, t);
      const reset = ((key.rpm - Math.max(0, b.level - 1)) * MINUTE) / key.rpm;
      Object.assign(headers, {
        "x-ratelimit-limit-requests": String(key.rpm),
        "x-ratelimit-remaining-requests": String(Math.max(0, Math.floor(b.level - 1))),
        "x-ratelimit-reset-requests": resetText(reset),
      });
      if (b.level < 1)
        this.refuse(
          "rate_limited",
          `this key may make ${key.rpm} requests per minute`,
          ((1 - b.level) * MINUTE) / key.rpm,
          { ...headers, "x-ratelimit-remaining-requests": "0" },
        );
      b.level -= 1;
    }
    if (key.tpm !== null && !this.shared) {
      const b = this.fill(this.tokens, key.id, key.tpm, t);
      Object.assign(headers, {
        "x-ratelimit-limit-tokens": String(key.tpm),
        "x-ratelimit-remaining-tokens": String(Math.max(0, Math.floor(b.level))),
        "x-ratelimit-reset-tokens": resetText(((key.tpm - Math.max(0, b.level)) * MINUTE) / key.tpm),
      });
      if (b.level <= 0)
        this.refuse(
          "rate_limited",
          `this key may use ${key.tpm} tokens per minute`,
          ((1 - b.level) * MINUTE) / key.tpm,
          headers,
        );
    }
    this.checkQuotas(key, project, t, headers);
    if (key.maxConcurrent === null && key.rpm === null && key.tpm === null && isEmpty(headers)) {
      // No limit that a ticket carries: the one shared ticket, with no headers and nothing to give back.
      if (request) callOf(request).ticket = UNLIMITED;
      return UNLIMITED;
    }
    if (key.maxConcurrent !== null) this.inFlight.set(key.id, (this.inFlight.get(key.id) ?? 0) + 1);
    let released = key.maxConcurrent === null;
    const ticket: Ticket = {
      headers,
      release: () => {
        if (released) return;
        released = true;
        this.inFlight.set(key.id, Math.max(0, (this.inFlight.get(key.id) ?? 1) - 1));
      },
    };
    if (request) callOf(request).ticket = ticket;
    return ticket;
  }

  /** Token quotas of the key and its project, per day and per month. */
  private checkQuotas(key: LimitedKey, project: ProjectQuotas, t: number, headers: Record<string, string>): void {
    if (!hasQuotas(key, project)) return;
    const day = utcDay(t);
    const month = day.slice(0, 7);
    const next = nextPeriods(t);
    const checks: [string, "key" | "project", string, number | null, string, number][] = [
      ["this key's daily", "key", key.id, key.tokensPerDay, day, next.day],
      ["this key's monthly", "key", key.id, key.tokensPerMonth, month, next.month],
      ["the project's daily", "project", key.projectId, project.tokensPerDay, day, next.day],
      ["the project's monthly", "project", key.projectId, project.tokensPerMonth, month, next.month],
    ];
    for (const [what, scope, id, quota, period, resetAt] of checks) {
      if (quota === null) continue;
      const used = this.used.get(`${scope}:${id}:${period}`) ?? 0;
      if (used >= quota)
        this.refuse(
          "quota_exceeded",
          `${what} token quota of ${quota} is used up (${used} used); it renews at ${new Date(resetAt).toISOString()}`,
          resetAt - t,
          headers,
        );
    }
  }

  /** A request or job ended: its tokens are charged to the key's per-minute bucket and to the quotas. */
  finished(f: Finished): void {
    if (!f.keyId) return;
    const tokens = f.usage.inputTokens + f.usage.outputTokens;
    this.shared?.addTokens(f.keyId, tokens);
    const b = this.tokens.get(f.keyId);
    if (b) b.level -= tokens;
    if (this.used.size === 0) return;
    const day = utcDay(this.now());
    for (const k of [
      `key:${f.keyId}:${day}`,
      `key:${f.keyId}:${day.slice(0, 7)}`,
      `project:${f.projectId}:${day}`,
      `project:${f.projectId}:${day.slice(0, 7)}`,
    ]) {
      const n = this.used.get(k);
      if (n !== undefined) this.used.set(k, n + tokens);
    }
  }

  /** Forgets cached quota counts (after a day rolls over they are keyed anew anyway). */
  forget(): void {
    this.used.clear();
  }

  /**
   * Reads every cached quota count from the store again, keeping what was counted here while it was
   * read: in a cluster, so that the tokens other hosts charged to a key or project count here too
   * (within the refresh period). Counts of past periods are dropped.
   */
  async refreshCounts(): Promise<void> {
    const day = utcDay(this.now());
    await Promise.all(
      [...this.used.keys()].map(async (k) => {
        const [scope, id, period] = k.split(":") as ["key" | "project", string, string];
        if (period !== day && period !== day.slice(0, 7)) return void this.used.delete(k);
        const before = this.used.get(k) ?? 0;
        const stored = await this.quotas.tokensUsed(scope, id, period);
        const now = this.used.get(k);
        if (now !== undefined) this.used.set(k, stored + (now - before));
      }),
    );
  }
}
