/**
 * Signing in with an e-mail and password, slowed against guessing: after 5 failures for one e-mail
 * or from one client address within 15 minutes, further tries answer 429 `too_many_attempts` with
 * `retry-after` until the oldest failure leaves the window. The counts live in this process's memory
 * (each host of a cluster counts its own). Also: which ways of signing in the dashboard offers.
 */
import { AppError, unauthorized } from "../errors";
import { oidcMethod } from "../auth/oidc";
import { audit } from "../audit/service";
import { openSession, type AuthDeps } from "../auth/service";
import { checkPassword } from "./service";

/** Failures allowed per e-mail and per address within the window. */
export const MAX_FAILURES = 5;
/** The window failures are counted in. */
export const WINDOW_MS = 15 * 60_000;
/** Keys tracked at most (the oldest are dropped first), so a flood of made-up e-mails cannot grow memory without bound. */
const MAX_KEYS = 10_000;

/** Failed sign-ins per e-mail and per client address in a sliding window, with an injected clock. */
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

  /** Throws 429 `too_many_attempts` (with retry-after in seconds) when any of the keys has used up its failures. */
  check(keys: string[]): void {
    let wait = 0;
    for (const key of keys) {
      const list = this.recent(key);
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

  /** Forgets an e-mail's failures (after it signed in). */
  clear(key: string): void {
    this.failures.delete(key);
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
  const keys = [`email:${address}`, ...(client.address ? [`ip:${client.address}`] : [])];
  limiter.check(keys);
  const user = await checkPassword(deps.db, address, password);
  if (!user) {
    limiter.fail(keys);
    await audit(deps.db, "session.denied", { type: "session" }, { email: address.slice(0, 320) }, { type: "anonymous", label: `a sign-in as ${address.slice(0, 100)} with a wrong e-mail or password` });
    throw unauthorized("invalid_credentials", "the e-mail or password is wrong");
  }
  limiter.clear(keys[0]);
  return openSession(deps, { method: "password", user: { id: user.id, email: user.email }, userAgent: client.userAgent });
}

/** `GET /admin/session/methods`: the ways of signing in (password always; single sign-on when configured). */
export function signInMethods(config: Parameters<typeof oidcMethod>[0]): { password: true; oidc: ReturnType<typeof oidcMethod> } {
  return { password: true, oidc: oidcMethod(config) };
}
