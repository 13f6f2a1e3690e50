import { Elysia } from "elysia";
import { z } from "zod";
import type { AppDeps } from "../app";
import { jsonBody } from "../http";
import { createSession, endSession, redeemLoginCode, SESSION_COOKIE } from "../auth/service";

const SessionCreate = z.strictObject({ token: z.string().min(1).max(1000) });

/** Admin routes of the appliance itself: dashboard sign-in/out and what this server is. */
export const adminRoutes = (deps: AppDeps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["admin"] } })
    .post("/session", ({ body, set }) => {
      const s = createSession(deps, body.token);
      set.headers["set-cookie"] = `${SESSION_COOKIE}=${s.id}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${s.maxAgeSeconds}`;
      return { ok: true };
    }, { ...jsonBody(SessionCreate), detail: { summary: "Sign in to the dashboard with the admin token (sets an HttpOnly cookie)" } })
    .delete("/session", ({ request, set }) => {
      endSession(deps, request);
      set.headers["set-cookie"] = `${SESSION_COOKIE}=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0`;
      set.status = 204;
    }, { detail: { summary: "Sign out" } })

/** `GET /login?code=…`: the one-time sign-in link `inferd desktop` opens; sets the session and goes to the dashboard. */
export const loginRoute = (deps: AppDeps) =>
  new Elysia({ detail: { tags: ["admin"], hide: true } }).get("/login", ({ query }) => {
    const s = redeemLoginCode(deps, String(query.code ?? ""));
    return new Response(null, {
      status: 302,
      headers: { location: "/?signed_in=1", "set-cookie": `${SESSION_COOKIE}=${s.id}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${s.maxAgeSeconds}` },
    });
  });
