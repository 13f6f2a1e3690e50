/**
 * The single sign-on routes (open: no credential): `GET /auth/oidc/start` sends the browser to the
 * provider with the sign-in's cookie, `GET /auth/oidc/callback` takes it back (with that cookie),
 * opens a session for the user and goes on to the local `return_to`. Any failure goes to
 * `/signin?error=<plain words>` with a log line, never a 500; without `--oidc-issuer` both answer
 * 404 `oidc_not_configured`.
 */
import { Elysia } from "elysia";
import type { Db } from "../db";
import type { Config } from "../config";
import type { UsageRecorder } from "../usage/recorder";
import { overHttps } from "../call";
import { log } from "../log";
import { openSession, sessionCookie } from "./service";
import {
  createOidcFlow,
  LOGIN_MS,
  notConfigured,
  oidcConfigured,
  pendingCookieKey,
  PENDING_COOKIE,
  safeReturnTo,
  SignInFailed,
} from "./oidc";

/** What this module uses of the app's dependencies. */
interface Deps {
  db: Db;
  config: Config;
  adminToken: string;
  usage: UsageRecorder;
}

/** A 302 to `location`, with extra Set-Cookie values. */
function redirect(location: string, cookies: string[] = []): Response {
  const headers = new Headers({ location, "cache-control": "no-store" });
  for (const c of cookies) headers.append("set-cookie", c);
  return new Response(null, { status: 302, headers });
}

/**
 * The sign-in cookie: only sent back to `/auth/oidc` (SameSite=Lax: on the provider's top-level
 * redirect too), HttpOnly, ten minutes; empty and Max-Age=0 clears it.
 */
const pendingCookie = (value: string, secure: boolean) =>
  `${PENDING_COOKIE}=${value}; Path=/auth/oidc; HttpOnly; SameSite=Lax; Max-Age=${value ? LOGIN_MS / 1000 : 0}${secure ? "; Secure" : ""}`;

/** A failure's cause for the log: the library's error name, code, message and what it compared (never a token). */
function causeOf(e: unknown): string | undefined {
  if (!(e instanceof Error)) return e === undefined ? undefined : String(e);
  const { code, cause } = e as { code?: string; cause?: { claim?: string; error?: string } };
  const what = cause?.claim ? ` (claim ${cause.claim})` : cause?.error ? ` (${cause.error})` : "";
  return `(${e.name}${code ? ` ${code}` : ""}: ${e.message}${what})`;
}

/** The sign-in page showing why single sign-on failed (the cause is logged); `cookies` go with it. */
function failed(step: string, e: unknown, cookies: string[] = []): Response {
  const f = e instanceof SignInFailed ? e : new SignInFailed("single sign-on failed; try again", e);
  log.warn(`single sign-on ${step} failed: ${f.message}`, causeOf(f.detail));
  return redirect(`/signin?error=${encodeURIComponent(f.message)}`, cookies);
}

/** `GET /auth/oidc/start?return_to=/path` and `GET /auth/oidc/callback` (settings read once: they need a restart). */
export function oidcRoutes(deps: Deps) {
  const settings = { ...deps.config };
  const flow = oidcConfigured(settings)
    ? createOidcFlow({ db: deps.db, settings, cookieKey: pendingCookieKey(deps.adminToken) })
    : undefined;
  return new Elysia({ prefix: "/auth/oidc", detail: { tags: ["admin"] } })
    .get(
      "/start",
      async ({ request, query }) => {
        if (!flow) throw notConfigured(settings);
        try {
          const { url, cookie } = await flow.begin(request, safeReturnTo(query.return_to), overHttps(request));
          return redirect(url.href, [pendingCookie(cookie, overHttps(request))]);
        } catch (e) {
          return failed("start", e);
        }
      },
      {
        detail: {
          summary:
            "Single sign-on: go to the OpenID Connect provider (authorization code with PKCE); `return_to` is a local path to come back to",
        },
      },
    )
    .get(
      "/callback",
      async ({ request }) => {
        if (!flow) throw notConfigured(settings);
        const cleared = pendingCookie("", overHttps(request));
        try {
          const { user, returnTo } = await flow.complete(request, overHttps(request));
          const session = await openSession(deps, {
            method: "oidc",
            user,
            userAgent: request.headers.get("user-agent"),
          });
          log.info(`single sign-on: ${user.email} signed in as ${user.role}${user.created ? " (new user)" : ""}`);
          return redirect(returnTo, [cleared, sessionCookie(session.id, session.maxAgeSeconds, overHttps(request))]);
        } catch (e) {
          return failed("callback", e, [cleared]);
        }
      },
      {
        detail: {
          summary:
            "Single sign-on: the provider's answer; opens a session and goes to `return_to` (failures: /signin?error=…)",
        },
      },
    );
}
