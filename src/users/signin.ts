/**
 * Signing in with an e-mail and password, slowed against guessing: after 5 failures for one e-mail
 * or from one client address within 15 minutes, further tries answer 429 `too_many_attempts` with
 * `retry-after` until the oldest failure leaves the window. Every try is counted **before** its
 * password is checked, so guesses sent at once are refused (429) without costing argon2 time:
 * an e-mail's tries are `session.attempt` rows of the audit log (written first, then counted again
 * since the account last signed in), so every host of a cluster counts them together and a restart
 * forgets nothing; an address's failures and tries under way are counted in this process's memory
 * (each host its own). Also: which ways of signing in the dashboard offers.
 */
import { and, desc, eq, gt } from "drizzle-orm";
import { AppError, unauthorized, validation } from "../errors";
import { oidcMethod } from "../auth/oidc";
import { audit } from "../audit/service";
import { openSession, type AuthDeps } from "../auth/service";
import type { Db } from "../db";
import { auditLog } from "../db/schema";
import { checkPassword, findUserByEmail, type UserRecord } from "./service";

/** Failures allowed per e-mail and per address within the window. */
export const MAX_FAILURES = 5;
/** The window failures are counted in. */
export const WINDOW_MS = 15 * 60_000;
/** Keys tracked at most (the oldest are dropped first), so a flood of addresses cannot grow memory without bound. */
const MAX_KEYS = 10_000;

/** The 429 `too_many_attempts` of a wait of `ms`, in whole seconds (at least 1). */
function tooMany(ms: number): AppError {
  const seconds = Math.max(1, Math.ceil(ms / 1000));
  return new AppError(429, "too_many_attempts", `too many failed sign-ins; try again in ${seconds} seconds`, {
    "retry-after": String(seconds),
  });
}

/** Failed sign-ins per key (a client address) in a sliding window, and tries under way per key, with an injected clock. */
export class SignInLimiter {
  private failures = new Map<string, number[]>();
  private underWay = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  /** The recent failures of a key (pruned). */
  private recent(key: string): number[] {
    const cutoff = this.now() - WINDOW_MS;
    const list = (this.failures.get(key) ?? []).filter((t) => t > cutoff);
    if (list.length) this.failures.set(key, list);
    else this.failures.delete(key);
    return list;
  }

  /**
   * Throws 429 `too_many_attempts` (with retry-after in seconds) when any of the keys has used up its
   * tries (its failures and its tries under way), or `elsewhere` (failure times counted outside this
   * memory, e.g. the store's; oldest first) has.
   */
  check(keys: string[], elsewhere: number[] = []): void {
    let wait = 0;
    for (const [list, busy] of [
      ...keys.map((key) => [this.recent(key), this.underWay.get(key) ?? 0] as const),
      [elsewhere, 0] as const,
    ]) {
      if (list.length >= MAX_FAILURES) wait = Math.max(wait, list[list.length - MAX_FAILURES] + WINDOW_MS - this.now());
      // Tries under way fill the rest: the next may go once they are answered.
      else if (list.length + busy >= MAX_FAILURES) wait = Math.max(wait, 1000);
    }
    if (wait > 0) throw tooMany(wait);
  }

  /** Notes a try under way for each key (until `end`). */
  begin(keys: string[]): void {
    for (const key of keys) this.underWay.set(key, (this.underWay.get(key) ?? 0) + 1);
  }

  /** Notes that a try of `begin` was answered. */
  end(keys: string[]): void {
    for (const key of keys) {
      const n = (this.underWay.get(key) ?? 0) - 1;
      if (n > 0) this.underWay.set(key, n);
      else this.underWay.delete(key);
    }
  }

  /** Notes a failure for each key. */
  fail(keys: string[]): void {
    for (const key of keys) {
      const list = [...this.recent(key), this.now()];
      // Re-inserted, so the map's order is oldest activity first (what MAX_KEYS drops).
      this.failures.delete(key);
      this.failures.set(key, list);
    }
    while (this.failures.size > MAX_KEYS) this.failures.delete(this.failures.keys().next().value as string);
  }
}

const limiters = new WeakMap<Db, SignInLimiter>();

/** The limiter of a server (one per store handle, so test servers in one process do not share counts). */
function limiterOf(db: Db): SignInLimiter {
  let l = limiters.get(db);
  if (!l) limiters.set(db, (l = new SignInLimiter()));
  return l;
}

/** Who tried a password, as the client address and browser the request came with. */
export interface SignInClient {
  address: string | null;
  userAgent: string | null;
}

/** The client of a request as this server saw it (the address null when unknown, e.g. over the TLS port). */
export function clientOf(
  server: { requestIP(r: Request): { address: string } | null } | null,
  request: Request,
): SignInClient {
  let address: string | null = null;
  try {
    address = server?.requestIP(request)?.address ?? null;
  } catch {}
  return { address, userAgent: request.headers.get("user-agent") };
}

/**
 * The local user with this e-mail and password, within the limits: the try is counted (in memory,
 * then in the store) before the password is checked, so tries beyond the limit get 429 without
 * costing a hash; a wrong e-mail or password is 401 `invalid_credentials`, counted and audited.
 */
export async function verifyPassword(
  db: Db,
  email: string,
  password: string,
  client: SignInClient,
): Promise<UserRecord> {
  const limiter = limiterOf(db);
  const address = email.trim().toLowerCase();
  const ipKeys = client.address ? [`ip:${client.address}`] : [];
  const keys = [`email:${address}`, ...ipKeys];
  limiter.check(keys);
  limiter.begin(keys);
  try {
    await countTry(db, limiter, address);
    const user = await checkPassword(db, address, password);
    if (user) return user;
    limiter.fail(ipKeys);
    await audit(
      db,
      "session.denied",
      { type: "session" },
      { email: address.slice(0, 320) },
      { type: "anonymous", label: deniedLabel(address) },
    );
    throw unauthorized("invalid_credentials", "the e-mail or password is wrong");
  } finally {
    limiter.end(keys);
  }
}

/**
 * Counts a try as `address` in the store, cluster-wide, before its password is checked: refused
 * (429) when the recorded tries already fill the limit; else its `session.attempt` row is written
 * and the tries counted again, so of tries made at once on any hosts, at most the limit go on.
 */
async function countTry(db: Db, limiter: SignInLimiter, address: string): Promise<void> {
  limiter.check([], await triesOf(db, address, MAX_FAILURES));
  await audit(
    db,
    "session.attempt",
    { type: "session" },
    { email: address.slice(0, 320) },
    { type: "anonymous", label: attemptLabel(address) },
  );
  // Among the latest tries (this one's included), those before the newest: a full list refuses.
  limiter.check([], (await triesOf(db, address, MAX_FAILURES + 1)).slice(0, -1));
}

/** Signs a local user in: `verifyPassword`, then a session. */
export async function signInWithPassword(
  deps: AuthDeps,
  email: string,
  password: string,
  client: SignInClient,
): Promise<{ id: string; maxAgeSeconds: number }> {
  const user = await verifyPassword(deps.db, email, password, client);
  return openSession(deps, {
    method: "password",
    user: { id: user.id, email: user.email },
    userAgent: client.userAgent,
  });
}

/**
 * Changing a password needs the current one when it is one's own (`who` is the user changing
 * `target`); an admin setting another user's, or the admin token, needs none. The current password
 * is checked within the sign-in limits: missing is 400 at `current_password`, wrong 403
 * `wrong_current_password` (not 401, which would read as a lost session).
 */
export async function confirmOwnPassword(
  db: Db,
  who: { userId: string | null },
  target: UserRecord,
  current: string | undefined,
  client: SignInClient,
): Promise<void> {
  if (who.userId === null || who.userId !== target.id) return;
  if (!current) throw validation("current_password", "your current password is needed to change your own password");
  if (!target.passwordHash)
    throw wrongCurrent("you have no password yet (you sign in with single sign-on); an admin can set one");
  try {
    await verifyPassword(db, target.email, current, client);
  } catch (e) {
    if (e instanceof AppError && e.status === 401) throw wrongCurrent("the current password is wrong");
    throw e;
  }
}

/** 403 `wrong_current_password` at `current_password`. */
const wrongCurrent = (message: string) => new AppError(403, "wrong_current_password", message, {}, "current_password");

/** Who a denied password sign-in was, in its audit row. */
const deniedLabel = (address: string) => `a sign-in as ${address.slice(0, 100)} with a wrong e-mail or password`;
/** Who tried a password, in the audit row written before it is checked (the actor's label, which the count below reads). */
const attemptLabel = (address: string) => `a sign-in as ${address.slice(0, 100)}`;

/**
 * The times of the latest tries as `address` (at most `limit`, oldest first) within the window and
 * since the account last signed in, on every host: the store's `session.attempt` audit rows.
 */
async function triesOf(db: Db, address: string, limit: number, now = Date.now()): Promise<number[]> {
  const windowStart = new Date(now - WINDOW_MS).toISOString();
  const lastSignIn = (await findUserByEmail(db, address))?.lastSignInAt ?? null;
  const since = lastSignIn !== null && lastSignIn > windowStart ? lastSignIn : windowStart;
  const rows = await db
    .select({ at: auditLog.at })
    .from(auditLog)
    .where(
      and(
        gt(auditLog.at, since),
        eq(auditLog.action, "session.attempt"),
        eq(auditLog.actorLabel, attemptLabel(address)),
      ),
    )
    .orderBy(desc(auditLog.at))
    .limit(limit);
  return rows.map((r) => Date.parse(r.at)).reverse();
}

/** `GET /admin/session/methods`: the ways of signing in (password always; single sign-on when configured). */
export function signInMethods(config: Parameters<typeof oidcMethod>[0]): {
  password: true;
  oidc: ReturnType<typeof oidcMethod>;
} {
  return { password: true, oidc: oidcMethod(config) };
}
