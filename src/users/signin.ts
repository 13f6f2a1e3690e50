/**
 * Signing in with an e-mail and password, slowed against guessing: after 5 failures for one e-mail
 * or from one client address within 15 minutes, further tries answer 429 `too_many_attempts` with
 * `retry-after` until the oldest failure leaves the window. An e-mail's failures are read from the
 * store (the audit log's `session.denied` rows since the account last signed in), so every host of a
 * cluster counts them together and a restart forgets nothing; an address's are counted in this
 * process's memory (each host its own). Also: which ways of signing in the dashboard offers.
 */
import { and, desc, eq, gt } from "drizzle-orm";
import { AppError, unauthorized } from "../errors";
import { oidcMethod } from "../auth/oidc";
import { audit } from "../audit/service";
import { openSession, type AuthDeps } from "../auth/service";
import type { Db } from "../db";
import { auditLog } from "../db/schema";
import { checkPassword, findUserByEmail } from "./service";

/** Failures allowed per e-mail and per address within the window. */
export const MAX_FAILURES = 5;
/** The window failures are counted in. */
export const WINDOW_MS = 15 * 60_000;
/** Keys tracked at most (the oldest are dropped first), so a flood of addresses cannot grow memory without bound. */
const MAX_KEYS = 10_000;

/** Failed sign-ins per client address in a sliding window, with an injected clock. */
export class SignInLimiter {
  private failures = new Map<string, number[]>();

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
   * failures, or `elsewhere` (failure times counted outside this memory, e.g. the store's; oldest first) has.
   */
  check(keys: string[], elsewhere: number[] = []): void {
    let wait = 0;
    for (const list of [...keys.map((key) => this.recent(key)), elsewhere]) {
      if (list.length >= MAX_FAILURES) wait = Math.max(wait, list[list.length - MAX_FAILURES] + WINDOW_MS - this.now());
    }
    if (wait > 0) {
      const seconds = Math.max(1, Math.ceil(wait / 1000));
      throw new AppError(429, "too_many_attempts", `too many failed sign-ins; try again in ${seconds} seconds`, { "retry-after": String(seconds) });
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

const limiters = new WeakMap<AuthDeps["db"], SignInLimiter>();

/** The limiter of a server (one per store handle, so test servers in one process do not share counts). */
function limiterOf(deps: AuthDeps): SignInLimiter {
  let l = limiters.get(deps.db);
  if (!l) limiters.set(deps.db, (l = new SignInLimiter()));
  return l;
}

/**
 * Signs a local user in: checks the limits, the e-mail and the password (one answer, 401
 * `invalid_credentials`, for a wrong either), and opens a session. Failures are counted and audited.
 */
export async function signInWithPassword(deps: AuthDeps, email: string, password: string, client: { address: string | null; userAgent: string | null }): Promise<{ id: string; maxAgeSeconds: number }> {
  const limiter = limiterOf(deps);
  const address = email.trim().toLowerCase();
  const keys = client.address ? [`ip:${client.address}`] : [];
  limiter.check(keys, await failuresOf(deps.db, address));
  const user = await checkPassword(deps.db, address, password);
  if (!user) {
    limiter.fail(keys);
    await audit(deps.db, "session.denied", { type: "session" }, { email: address.slice(0, 320) }, { type: "anonymous", label: deniedLabel(address) });
    throw unauthorized("invalid_credentials", "the e-mail or password is wrong");
  }
  return openSession(deps, { method: "password", user: { id: user.id, email: user.email }, userAgent: client.userAgent });
}

/** Who a denied password sign-in was, in its audit row (the actor's label, which the count below reads). */
const deniedLabel = (address: string) => `a sign-in as ${address.slice(0, 100)} with a wrong e-mail or password`;

/**
 * The times of the latest failed sign-ins as `address` (at most MAX_FAILURES, oldest first) within the
 * window and since the account last signed in, on every host: the store's `session.denied` audit rows.
 */
async function failuresOf(db: Db, address: string, now = Date.now()): Promise<number[]> {
  const windowStart = new Date(now - WINDOW_MS).toISOString();
  const lastSignIn = (await findUserByEmail(db, address))?.lastSignInAt ?? null;
  const since = lastSignIn !== null && lastSignIn > windowStart ? lastSignIn : windowStart;
  const rows = await db
    .select({ at: auditLog.at })
    .from(auditLog)
    .where(and(gt(auditLog.at, since), eq(auditLog.action, "session.denied"), eq(auditLog.actorLabel, deniedLabel(address))))
    .orderBy(desc(auditLog.at))
    .limit(MAX_FAILURES);
  return rows.map((r) => Date.parse(r.at)).reverse();
}

/** `GET /admin/session/methods`: the ways of signing in (password always; single sign-on when configured). */
export function signInMethods(config: Parameters<typeof oidcMethod>[0]): { password: true; oidc: ReturnType<typeof oidcMethod> } {
  return { password: true, oidc: oidcMethod(config) };
}
