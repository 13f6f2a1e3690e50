import { Elysia } from "elysia";
import { z } from "zod";
import type { AppDeps } from "../deps";
import { jsonBody } from "../http";
import { createSession, endAllSessions, endSession, redeemLoginCode, sessionCookie } from "../auth/service";
import { viaTls } from "../agents/routes";

/** What this module uses of the app's dependencies. */
type Deps = Pick<AppDeps, "db" | "adminToken" | "usage" | "metricsToken">;

/** Whether the browser reached us over HTTPS (our TLS port, or a TLS-terminating proxy saying so). */
const overHttps = (request: Request) => viaTls.has(request) || request.headers.get("x-forwarded-proto") === "https";

const SessionCreate = z.strictObject({ token: z.string().min(1).max(1000) });

/** Admin routes of the appliance itself: dashboard sign-in/out and what this server is. */
export const adminRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["admin"] } })
    .post("/session", async ({ body, set, request }) => {
      const s = await createSession(deps, body.token);
      set.headers["set-cookie"] = sessionCookie(s.id, s.maxAgeSeconds, overHttps(request));
      return { ok: true };
    }, { ...jsonBody(SessionCreate), detail: { summary: "Sign in to the dashboard with the admin token (sets an HttpOnly cookie)" } })
    .delete("/session", async ({ request, set }) => {
      await endSession(deps, request);
      set.headers["set-cookie"] = sessionCookie("", 0, overHttps(request));
      set.status = 204;
    }, { detail: { summary: "Sign out" } })
    .delete("/sessions", async ({ request, set }) => {
      const ended = await endAllSessions(deps);
      set.headers["set-cookie"] = sessionCookie("", 0, overHttps(request));
      return { ended };
    }, { detail: { summary: "Sign out everywhere: ends every dashboard session" } })

/** `GET /login?code=…`: the one-time sign-in link `inferd desktop` opens; sets the session and goes to the dashboard. */
export const loginRoute = (deps: Deps) =>
  new Elysia({ detail: { tags: ["admin"], hide: true } }).get("/login", async ({ query, request }) => {
    const s = await redeemLoginCode(deps, String(query.code ?? ""));
    return new Response(null, {
      status: 302,
      headers: { location: "/?signed_in=1", "set-cookie": sessionCookie(s.id, s.maxAgeSeconds, overHttps(request)) },
    });
  });
