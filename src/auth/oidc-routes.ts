/**
 * The single sign-on routes (open: no credential): `GET /auth/oidc/start` sends the browser to the
 * provider, `GET /auth/oidc/callback` takes it back, opens a session for the user and goes on to
 * the local `return_to`. Any failure goes to `/signin?error=<plain words>` with a log line, never a
 * 500; without `--oidc-issuer` both answer 404 `oidc_not_configured`.
 */
import { Elysia } from "elysia";
import type { AppDeps } from "../deps";
import { viaTls } from "../agents/routes";
import { log } from "../log";
import { openSession, sessionCookie } from "./service";
import { createOidcFlow, notConfigured, oidcConfigured, safeReturnTo, SignInFailed } from "./oidc";

/** What this module uses of the app's dependencies. */
type Deps = Pick<AppDeps, "db" | "config" | "adminToken" | "usage">;

/** Whether the browser reached us over HTTPS (our TLS port, or a TLS-terminating proxy saying so). */
const overHttps = (request: Request) => viaTls.has(request) || request.headers.get("x-forwarded-proto") === "https";

/** A 302 to `location`, with extra headers. */
const redirect = (location: string, headers: Record<string, string> = {}) => new Response(null, { status: 302, headers: { location, "cache-control": "no-store", ...headers } });

/** A failure's cause for the log: the library's error name, code, message and what it compared (never a token). */
function causeOf(e: unknown): string | undefined {
  if (!(e instanceof Error)) return e === undefined ? undefined : String(e);
  const { code, cause } = e as { code?: string; cause?: { claim?: string; error?: string } };
  const what = cause?.claim ? ` (claim ${cause.claim})` : cause?.error ? ` (${cause.error})` : "";
  return `(${e.name}${code ? ` ${code}` : ""}: ${e.message}${what})`;
}

/** The sign-in page showing why single sign-on failed (the cause is logged). */
function failed(step: string, e: unknown): Response {
  const f = e instanceof SignInFailed ? e : new SignInFailed("single sign-on failed; try again", e);
  log.warn(`single sign-on ${step} failed: ${f.message}`, causeOf(f.detail));
  return redirect(`/signin?error=${encodeURIComponent(f.message)}`);
}

/** `GET /auth/oidc/start?return_to=/path` and `GET /auth/oidc/callback` (settings read once: they need a restart). */
export function oidcRoutes(deps: Deps) {
  const settings = { ...deps.config };
  const flow = oidcConfigured(settings) ? createOidcFlow({ db: deps.db, settings }) : undefined;
  return new Elysia({ prefix: "/auth/oidc", detail: { tags: ["admin"] } })
    .get("/start", async ({ request, query }) => {
      if (!flow) throw notConfigured(settings);
      try {
        return redirect((await flow.begin(request, safeReturnTo(query.return_to), overHttps(request))).href);
      } catch (e) {
        return failed("start", e);
      }
    }, { detail: { summary: "Single sign-on: go to the OpenID Connect provider (authorization code with PKCE); `return_to` is a local path to come back to" } })
    .get("/callback", async ({ request }) => {
      if (!flow) throw notConfigured(settings);
      try {
        const { user, returnTo } = await flow.complete(request, overHttps(request));
        const session = await openSession(deps, { method: "oidc", user, userAgent: request.headers.get("user-agent") });
        log.info(`single sign-on: ${user.email} signed in as ${user.role}${user.created ? " (new user)" : ""}`);
        return redirect(returnTo, { "set-cookie": sessionCookie(session.id, session.maxAgeSeconds, overHttps(request)) });
      } catch (e) {
        return failed("callback", e);
      }
    }, { detail: { summary: "Single sign-on: the provider's answer; opens a session and goes to `return_to` (failures: /signin?error=…)" } });
}
