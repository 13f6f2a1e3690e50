import { and, asc, count, eq, isNull, sql } from "drizzle-orm";
import type { Db } from "../db";
import { batch, exec, first, type Statement } from "../db/raw";
import { deliveries, webhooks } from "../db/schema";
import { conflict, notFound } from "../errors";
import { newId, nowIso } from "../ids";
import { checkUrlShape, resolveChecked, type AddressPolicy } from "./address";
import { newSigningSecret } from "./sign";
import { audit } from "../audit/service";

/** Destinations per workload (the contract's limit). */
export const MAX_WEBHOOKS = 10;

/** A destination as listed: the secret's prefix only. */
export interface WebhookView {
  id: string;
  workload_id: string;
  url: string;
  secret_prefix: string;
  created_at: string;
}

type Row = typeof webhooks.$inferSelect;

/** A condition on destinations that have not been deleted. */
export const live = (cond: ReturnType<typeof eq>) => and(cond, isNull(webhooks.deletedAt));
const view = (w: Row): WebhookView => ({
  id: w.id,
  workload_id: w.workloadId,
  url: w.url,
  secret_prefix: w.secretPrefix,
  created_at: w.createdAt,
});

/**
 * Adds a destination after checking its URL (https, no credentials, a public address unless private
 * ones are allowed). Returns it with its signing secret — the only time the secret is shown.
 */
export async function addWebhook(
  db: Db,
  workloadId: string,
  rawUrl: string,
  policy: AddressPolicy,
): Promise<WebhookView & { secret: string }> {
  const url = checkUrlShape(rawUrl);
  await resolveChecked(url, policy);
  const n =
    (
      await first(
        db
          .select({ n: count() })
          .from(webhooks)
          .where(live(eq(webhooks.workloadId, workloadId))),
      )
    )?.n ?? 0;
  if (n >= MAX_WEBHOOKS) throw conflict(`a workload has at most ${MAX_WEBHOOKS} webhook destinations`, "webhook_limit");
  const secret = newSigningSecret();
  const row: Row = {
    id: newId("whk"),
    workloadId,
    url: url.toString(),
    secret,
    secretPrefix: secret.slice(0, 12),
    createdAt: nowIso(),
    deletedAt: null,
  };
  await db.insert(webhooks).values(row);
  await audit(
    db,
    "webhook.create",
    { type: "webhook", id: row.id, label: row.url },
    { workload_id: workloadId, url: row.url, secret_prefix: row.secretPrefix },
  );
  return { ...view(row), secret };
}

/** A workload's destinations, oldest first. */
export async function listWebhooks(db: Db, workloadId: string): Promise<WebhookView[]> {
  return (
    await db
      .select()
      .from(webhooks)
      .where(live(eq(webhooks.workloadId, workloadId)))
      .orderBy(asc(webhooks.createdAt))
  ).map(view);
}

/** A destination with its secret (for signing), or 404. */
export async function webhookRow(db: Db, id: string): Promise<Row> {
  const w = await first(
    db
      .select()
      .from(webhooks)
      .where(live(eq(webhooks.id, id))),
  );
  if (!w) throw notFound(`webhook "${id}"`);
  return w;
}

/**
 * Removes a destination: its secret is wiped and its pending deliveries end as `cancelled` (a
 * delivery in flight finishes quietly). The row stays, so jobs still show where results went.
 */
export async function deleteWebhook(db: Db, id: string): Promise<WebhookView> {
  const w = await webhookRow(db, id);
  await batch(db, [
    db.update(webhooks).set({ deletedAt: nowIso(), secret: "" }).where(eq(webhooks.id, id)),
    db
      .update(deliveries)
      .set({ state: "cancelled", nextAttemptAt: null, lastError: "the destination was deleted" })
      .where(and(eq(deliveries.webhookId, id), eq(deliveries.state, "pending"))),
  ]);
  await audit(db, "webhook.delete", { type: "webhook", id, label: w.url }, { workload_id: w.workloadId });
  return view(w);
}

/** Removes deleted destinations no delivery refers to any more (their jobs were pruned). */
export function pruneDeletedWebhooks(db: Db): Promise<number> {
  return exec(
    db,
    sql`DELETE FROM webhooks WHERE deleted_at IS NOT NULL AND NOT EXISTS (SELECT 1 FROM deliveries WHERE deliveries.webhook_id = webhooks.id)`,
  );
}

/**
 * The writes that fan a job row's `event` out to its workload's destinations: one pending delivery
 * per destination, due now, and (for a destination deleted between this read and the commit of the
 * transaction they go into) its delivery cancelled. None when the workload has no destination.
 */
export async function deliveryStatements(
  db: Db,
  workloadId: string,
  jobId: string,
  event: string,
): Promise<Statement[]> {
  const now = nowIso();
  const dests = await db
    .select({ id: webhooks.id })
    .from(webhooks)
    .where(live(eq(webhooks.workloadId, workloadId)));
  if (!dests.length) return [];
  return [
    db.insert(deliveries).values(
      dests.map((d) => ({
        id: newId("dlv"),
        jobId,
        webhookId: d.id,
        event,
        state: "pending" as const,
        nextAttemptAt: Date.now(),
        createdAt: now,
      })),
    ),
    db
      .update(deliveries)
      .set({ state: "cancelled", nextAttemptAt: null, lastError: "the destination was deleted" })
      .where(
        and(
          eq(deliveries.jobId, jobId),
          eq(deliveries.state, "pending"),
          sql`${deliveries.webhookId} IN (SELECT id FROM webhooks WHERE deleted_at IS NOT NULL)`,
        ),
      ),
  ];
}
