import { Elysia } from "elysia";
import { asc, eq } from "drizzle-orm";
import { z } from "zod";
import type { AppDeps } from "../deps";
import { deliveryAttempts } from "../db/schema";
import { jsonBody } from "../http";
import { resolveWorkload } from "../workloads/service";
import { postWebhook } from "./post";
import { deliveryHeaders } from "./sign";
import { addWebhook, deleteWebhook, listWebhooks, webhookRow } from "./service";
import { randomUUID } from "node:crypto";

/** What this module uses of the app's dependencies. */
type Deps = Pick<AppDeps, "db" | "webhooks">;

const WebhookCreate = z.strictObject({ url: z.string().min(1).max(2048) });

/** Admin routes for webhook destinations: add (secret shown once), list, delete, test ping, attempts. */
export const webhookRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["admin"] } })
    .post("/workloads/:id/webhooks", async ({ params, body, set }) => {
      const w = await resolveWorkload(deps.db, params.id);
      const hook = await addWebhook(deps.db, w.id, body.url, deps.webhooks.policy);
      set.status = 201;
      return hook;
    }, { ...jsonBody(WebhookCreate), detail: { summary: "Add a webhook destination (https, public address); the secret is shown once" } })
    .get("/workloads/:id/webhooks", async ({ params }) => listWebhooks(deps.db, (await resolveWorkload(deps.db, params.id)).id), {
      detail: { summary: "A workload's destinations (secret prefix only)" },
    })
    .delete("/webhooks/:id", ({ params }) => deleteWebhook(deps.db, params.id), { detail: { summary: "Remove a destination" } })
    .post("/webhooks/:id/test", async ({ params }) => {
      const hook = await webhookRow(deps.db, params.id);
      const body = JSON.stringify({ event: "ping", ts: new Date().toISOString(), webhook_id: hook.id, workload_id: hook.workloadId });
      const headers = deliveryHeaders({ secret: hook.secret, event: "ping", messageId: `ping_${randomUUID()}`, body });
      return postWebhook(hook.url, body, headers, deps.webhooks.policy, deps.webhooks.ca);
    }, { parse: "none", detail: { summary: "Send a signed ping and answer with what the receiver returned" } })
    .get("/deliveries/:id/attempts", async ({ params }) =>
      (await deps.db.select().from(deliveryAttempts).where(eq(deliveryAttempts.deliveryId, params.id)).orderBy(asc(deliveryAttempts.n)))
        .map((a) => ({ n: a.n, at: a.at, status_code: a.statusCode, error: a.error, duration_ms: a.durationMs })),
    { detail: { summary: "Every attempt of one delivery" } });
