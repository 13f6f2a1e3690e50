/**
 * Settings in cluster mode: two `inferd serve` hosts on one real PostgreSQL (started by the test). A
 * change made on one host is stored once and in force on the other at once (signalled), without a
 * restart of either; a Reset on the other host returns both to their flags.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { cleanup, waitFor } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";
import { stopTestPostgres, testPostgres } from "./helpers/postgres";

const TOKEN = "ik_admin_settings-cluster-0123456789abcdef012345678";
let a: Serving;
let b: Serving;

const delivery = async (s: Serving) =>
  (await (await s.admin("/admin/webhooks/delivery")).json()) as {
    retry_schedule: string;
    allow_private_webhooks: boolean;
  };
const sourceOf = async (s: Serving, key: string) =>
  ((await (await s.admin("/admin/settings")).json()).settings as { key: string; source: string }[]).find(
    (v) => v.key === key,
  )!.source;

beforeAll(async () => {
  const url = await (await testPostgres()).createDatabase();
  const env = { INFERD_DATABASE_URL: url, INFERD_ADMIN_TOKEN: TOKEN, FAKE_GPUS: "1x NVIDIA L4:23034" };
  a = await startServing(env);
  b = await startServing(env);
}, 120_000);
afterAll(async () => {
  await Promise.all([a, b].map((s) => s?.stop().catch(() => 0)));
  await cleanup();
  await stopTestPostgres();
});

test("a change on one host is in force on the other without a restart, and so is its Reset", async () => {
  expect(await delivery(b)).toMatchObject({ retry_schedule: "1m,5m,15m,1h,6h", allow_private_webhooks: false });
  const r = await a.admin("/admin/settings", {
    method: "PATCH",
    body: { webhookRetrySchedule: "5s,10s", allowPrivateWebhooks: true },
  });
  expect(r.status).toBe(200);
  await waitFor(async () => (await delivery(b)).retry_schedule === "5s,10s", {
    what: "host b to pick up the schedule",
    timeoutMs: 15_000,
  });
  expect(await delivery(b)).toMatchObject({ allow_private_webhooks: true });
  expect((await (await b.admin("/admin/info")).json()).allow_private_webhooks).toBe(true);
  expect(await sourceOf(b, "webhookRetrySchedule")).toBe("dashboard");

  expect(
    (
      await b.admin("/admin/settings", {
        method: "PATCH",
        body: { webhookRetrySchedule: null, allowPrivateWebhooks: null },
      })
    ).status,
  ).toBe(200);
  await waitFor(async () => (await delivery(a)).retry_schedule === "1m,5m,15m,1h,6h", {
    what: "host a to pick up the reset",
    timeoutMs: 15_000,
  });
  expect(await delivery(a)).toMatchObject({ allow_private_webhooks: false });
  expect(await sourceOf(a, "webhookRetrySchedule")).toBe("default");
}, 60_000);
