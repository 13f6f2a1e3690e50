import { Elysia } from "elysia";
import { asc, inArray } from "drizzle-orm";
import type { Db } from "../db";
import { jsonBody } from "../http";
import { AppError } from "../errors";
import { projects } from "../db/schema";
import { principalOf } from "../auth/service";
import { UserCreate, UserPatch } from "./schema";
import { createUser, deleteUser, getUser, listUsers, resolveUser, updateUser } from "./service";
import { clientOf, confirmOwnPassword } from "./signin";
import { endUserSession, endUserSessions, userSessions } from "./sessions";

/** What this module uses of the app's dependencies. */
interface Deps {
  db: Db;
}

/**
 * `/admin/me` (who is asking) and `/admin/users` (people, their roles, projects and sessions).
 * Who may call what is the access table's (src/users/access.ts): admins everything, a user their own
 * record and sessions.
 */
export const userRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["admin"] } })
    .get(
      "/me",
      async ({ request }) => {
        const who = principalOf(request);
        const mine =
          who.projectIds === "all"
            ? "all"
            : who.projectIds.size
              ? await deps.db
                  .select({ id: projects.id, slug: projects.slug, name: projects.name })
                  .from(projects)
                  .where(inArray(projects.id, [...who.projectIds]))
                  .orderBy(asc(projects.slug))
              : [];
        return {
          kind: who.kind,
          role: who.role,
          user: who.userId ? await getUser(deps.db, who.userId) : null,
          projects: mine,
          session_id: who.sessionId,
        };
      },
      { detail: { summary: "Who is asking: the admin token or a user, their role, their projects and their session" } },
    )
    .get("/users", () => listUsers(deps.db), {
      detail: { summary: "Every user with their role, projects and live sessions (admin)" },
    })
    .post(
      "/users",
      async ({ body, set }) => {
        set.status = 201;
        return createUser(deps.db, body);
      },
      {
        ...jsonBody(UserCreate),
        detail: {
          summary:
            "Add a user: e-mail, role, projects (slugs) and optionally a password of 12 characters or more (admin)",
        },
      },
    )
    .get("/users/:id", ({ params }) => getUser(deps.db, params.id), {
      detail: { summary: "A user (admin, or the user themself)" },
    })
    .patch(
      "/users/:id",
      async ({ params, body, request, server }) => {
        const who = principalOf(request);
        if (who.role !== "admin" && (body.role !== undefined || body.projects !== undefined)) {
          throw new AppError(
            403,
            "forbidden_role",
            `your role (${who.role}) cannot change your own role or projects; an admin can`,
          );
        }
        if (body.password !== undefined)
          await confirmOwnPassword(
            deps.db,
            who,
            await resolveUser(deps.db, params.id),
            body.current_password,
            clientOf(server, request),
          );
        return updateUser(deps.db, params.id, body, who.sessionId);
      },
      {
        ...jsonBody(UserPatch),
        detail: {
          summary:
            "Change a user's name, role, password or projects (admin); a user may change their own name, and their own password with `current_password`",
        },
      },
    )
    .delete(
      "/users/:id",
      async ({ params, set }) => {
        await deleteUser(deps.db, params.id);
        set.status = 204;
      },
      { detail: { summary: "Remove a user; their sessions end at once (admin)" } },
    )
    .get(
      "/users/:id/sessions",
      ({ params, request }) => userSessions(deps.db, params.id, principalOf(request).sessionId),
      {
        detail: {
          summary:
            "A user's live dashboard sessions: how each began, its browser, when it was last used (admin, or the user themself)",
        },
      },
    )
    .delete("/users/:id/sessions", async ({ params }) => ({ ended: await endUserSessions(deps.db, params.id) }), {
      detail: { summary: "End every session of a user (admin, or the user themself)" },
    })
    .delete(
      "/users/:id/sessions/:sid",
      async ({ params, set }) => {
        await endUserSession(deps.db, params.id, params.sid);
        set.status = 204;
      },
      { detail: { summary: "End one session of a user (admin, or the user themself)" } },
    );
