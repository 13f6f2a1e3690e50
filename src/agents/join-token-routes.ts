import { Elysia } from "elysia";
import { z } from "zod";
import type { Db } from "../db";
import type { HostCert } from "../tls/hostcert";
import { jsonBody } from "../http";
import { createJoinToken, JOIN_TOKEN_TTL, listJoinTokens, revokeJoinToken } from "./join-tokens";

/** What this module uses of the app's dependencies. */
interface Deps {
  db: Db;
  hostCert: HostCert;
  /** The HTTPS URL agents join. */
  joinUrl(): string;
}

/** `POST /admin/workers/join-tokens`: reusable (a pool of agents) or one-time, and for how long. */
export const JoinTokenCreate = z.strictObject({
  reusable: z.boolean().optional(),
  expires_in_s: z.number().int().min(JOIN_TOKEN_TTL.minS).max(JOIN_TOKEN_TTL.maxS).optional(),
});

/** Admin routes for join tokens: make one (shown once, with its join command), list them (no secrets), revoke one. */
export const joinTokenRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin/workers/join-tokens", detail: { tags: ["admin"] } })
    .post(
      "",
      async ({ body, set }) => {
        const made = await createJoinToken(
          deps.db,
          { reusable: body.reusable ?? false, expiresInS: body.expires_in_s ?? JOIN_TOKEN_TTL.defaultS },
          deps.hostCert.fingerprint,
        );
        set.status = 201;
        return { ...made, join_command: `inferd agent join ${deps.joinUrl()} --token ${made.token}` };
      },
      {
        ...jsonBody(JoinTokenCreate),
        detail: {
          summary:
            "Make a join token (shown once): reusable for a pool of agents, each joining as a new worker, or one-time; it expires after expires_in_s (default 24 h)",
        },
      },
    )
    .get("", () => listJoinTokens(deps.db), {
      detail: { summary: "Join tokens with their state and uses (never the secret)" },
    })
    .delete("/:id", ({ params }) => revokeJoinToken(deps.db, params.id), {
      detail: { summary: "Revoke a join token: no agent joins with it from now on (workers that joined keep working)" },
    });
