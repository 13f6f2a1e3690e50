import { Elysia } from "elysia";
import type { Db } from "../db";
import type { UsageRecorder } from "../usage/recorder";
import { jsonBody } from "../http";
import { getProject } from "../projects/service";
import { KeyCreate } from "./schema";
import { createKey, listKeys, revokeKey, setKeyLimits } from "./service";
import { KeyPatch } from "../limits/schema";

/** What this module uses of the app's dependencies. */
interface Deps {
  db: Db;
  usage: UsageRecorder;
}

/** Admin routes for API keys: create (secret shown once), list with usage, revoke. */
export const keyRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["admin"] } })
    .post(
      "/projects/:project/keys",
      async ({ params, body, set }) => {
        const project = await getProject(deps.db, params.project);
        set.status = 201;
        return createKey(deps.db, project, body);
      },
      { ...jsonBody(KeyCreate), detail: { summary: "Create a key; the secret is in this response only" } },
    )
    .get(
      "/projects/:project/keys",
      async ({ params }) => {
        const project = await getProject(deps.db, params.project);
        await deps.usage.flush();
        return listKeys(deps.db, project.id);
      },
      { detail: { summary: "List a project's keys with usage (no secrets)" } },
    )
    .delete("/keys/:id", ({ params }) => revokeKey(deps.db, params.id), { detail: { summary: "Revoke a key" } })
    .patch("/keys/:id", ({ params, body }) => setKeyLimits(deps.db, params.id, body.limits), {
      ...jsonBody(KeyPatch),
      detail: {
        summary:
          "Set a key's limits (rpm, tpm, max_concurrent, tokens_per_day, tokens_per_month, priority, weight; null removes one)",
      },
    });
