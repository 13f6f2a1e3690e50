import { Elysia } from "elysia";
import type { Db } from "../db";
import type { Config } from "../config";
import type { UsageRecorder } from "../usage/recorder";
import { jsonBody } from "../http";
import { createSession, endAllSessions, endSession, redeemLoginCode, sessionCookie } from "../auth/service";
import { overHttps } from "../call";
import { SessionCreate } from "../users/schema";
import { clientOf, signInMethods, signInWithPassword } from "../users/signin";

/** What this module uses of the app's dependencies. */
interface Deps {
  db: Db;
  config: Config;
  adminToken: string;
  metricsToken?: string;
  usage: UsageRecorder;
}

/** Admin routes of the appliance itself: dashboard sign-in/out and what this server is. */
export const adminRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["admin"] } })
    .get("/session/methods", () => signInMethods(deps.config), {
      detail: {
        summary:
          "How the dashboard can be signed in to: password always, single sign-on when configured (open, no credential)",
      },
    })
    .post(
      "/session",
      async ({ body, set, request, server }) => {
        const s =
          "token" in body
            ? await createSession(deps, body.token)
            : await signInWithPassword(deps, body.email, body.password, clientOf(server, request));
        set.headers["set-cookie"] = sessionCookie(s.id, s.maxAgeSeconds, overHttps(request));
        return { ok: true };
      },
      {
        ...jsonBody(SessionCreate),
        detail: {
          summary:
            "Sign in to the dashboard with the admin token ({token}) or a local user's {email, password} (sets an HttpOnly cookie; 5 failures per e-mail or address in 15 minutes: 429 too_many_attempts)",
        },
      },
    )
    .delete(
      "/session",
      async ({ request, set }) => {
        await endSession(deps, request);
        set.headers["set-cookie"] = sessionCookie("", 0, overHttps(request));
        set.status = 204;
      },
      { detail: { summary: "Sign out" } },
    )
    .delete(
      "/sessions",
      async ({ request, set }) => {
        const ended = await endAllSessions(deps);
        set.headers["set-cookie"] = sessionCookie("", 0, overHttps(request));
        return { ended };
      },
      { detail: { summary: "Sign out everywhere: ends every dashboard session" } },
    );

/** `GET /login?code=…`: the one-time sign-in link `inferd desktop` opens; sets the session and goes to the dashboard. */
export const loginRoute = (deps: Deps) =>
  new Elysia({ detail: { tags: ["admin"], hide: true } }).get("/login", async ({ query, request }) => {
    const s = await redeemLoginCode(deps, String(query.code ?? ""));
    return new Response(null, {
      status: 302,
      headers: { location: "/?signed_in=1", "set-cookie": sessionCookie(s.id, s.maxAgeSeconds, overHttps(request)) },
    });
  });
