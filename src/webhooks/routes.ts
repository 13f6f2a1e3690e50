import { Elysia } from "elysia";
import { asc, eq } from "drizzle-orm";
import { z } from "zod";
import type { Db } from "../db";
import type { Config } from "../config";
import type { AddressPolicy } from "./address";
import { deliveryAttempts } from "../db/schema";
import { jsonBody } from "../http";
import { resolveWorkload } from "../workloads/service";
import { postWebhook } from "./post";
import { deliveryHeaders } from "./sign";
import { addWebhook, deleteWebhook, listWebhooks, webhookRow } from "./service";
import { randomUUID } from "node:crypto";
import { parseSchedule } from "./schedule";
import { SETTINGS } from "../config";

/** What this module uses of the app's dependencies. */
interface Deps {
  db: Db;
  config: Config;
  /** Which receivers may be reached, and the extra CAs their certificates may chain to. */
  webhooks: { policy: AddressPolicy; ca: string[] | undefined };
}

/**
 * How deliveries go now: the retry schedule and private-receiver rule in force (flag, environment or
 * the Settings page), and what is kept of a destination's signing secret.
 */
export function deliveryPolicy(config: Pick<Config, "webhookRetrySchedule" | "allowPrivateWebhooks">) {
  const delays = parseSchedule(config.webhookRetrySchedule);
  return {
    retry_schedule: config.webhookRetrySchedule,
    retry_delays_ms: delays,
    /** Attempts before a delivery is terminal: the first and one per delay. */
    attempts: delays.length + 1,
    allow_private_webhooks: config.allowPrivateWebhooks,
    flags: {
      retry_schedule: SETTINGS.webhookRetrySchedule.flag,
      allow_private_webhooks: SETTINGS.allowPrivateWebhooks.flag,
    },
    /**
     * The signing secret is stored in plain text in the store (HMAC signing needs the secret itself,
     * a hash would not do), readable by whoever can read the data dir or the database; the API shows
     * it once, when the destination is added, then only its prefix. Deleting the destination wipes it.
     */
    secret_storage: "plaintext" as const,
  };
}

const WebhookCreate = z.strictObject({ url: z.string().min(1).max(2048) });

/** Admin routes for webhook destinations: add (secret shown once), list, delete, test ping, attempts. */
export const webhookRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["admin"] } })
    .get("/webhooks/delivery", () => deliveryPolicy(deps.config), {
      detail: {
        summary:
          "How deliveries go now: the retry schedule and private-receiver rule in force (including a change on the Settings page), and how signing secrets are kept (plain text, shown once)",
      },
    })
    .post(
      "/workloads/:id/webhooks",
      async ({ params, body, set }) => {
        const w = await resolveWorkload(deps.db, params.id);
        const hook = await addWebhook(deps.db, w.id, body.url, deps.webhooks.policy);
        set.status = 201;
        return hook;
      },
      {
        ...jsonBody(WebhookCreate),
        detail: { summary: "Add a webhook destination (https, public address); the secret is shown once" },
      },
    )
    .get(
      "/workloads/:id/webhooks",
      async ({ params }) => listWebhooks(deps.db, (await resolveWorkload(deps.db, params.id)).id),
      {
        detail: { summary: "A workload's destinations (secret prefix only)" },
      },
    )
    .delete("/webhooks/:id", ({ params }) => deleteWebhook(deps.db, params.id), {
      detail: { summary: "Remove a destination" },
    })
    .post(
      "/webhooks/:id/test",
      async ({ params }) => {
        const hook = await webhookRow(deps.db, params.id);
        const body = JSON.stringify({
          event: "ping",
          ts: new Date().toISOString(),
          webhook_id: hook.id,
          workload_id: hook.workloadId,
        });
        const headers = deliveryHeaders({
          secret: hook.secret,
          event: "ping",
          messageId: `ping_${randomUUID()}`,
          body,
        });
        return postWebhook(hook.url, body, headers, deps.webhooks.policy, deps.webhooks.ca);
      },
      { parse: "none", detail: { summary: "Send a signed ping and answer with what the receiver returned" } },
    )
    .get(
      "/deliveries/:id/attempts",
      async ({ params }) =>
        (
          await deps.db
            .select()
            .from(deliveryAttempts)
            .where(eq(deliveryAttempts.deliveryId, params.id))
            .orderBy(asc(deliveryAttempts.n))
        ).map((a) => ({ n: a.n, at: a.at, status_code: a.statusCode, error: a.error, duration_ms: a.durationMs })),
      { detail: { summary: "Every attempt of one delivery" } },
    );
