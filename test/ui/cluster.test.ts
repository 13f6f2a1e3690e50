/**
 * The dashboard of a cluster (issue 21): two `inferd serve` hosts on one real PostgreSQL, Debian's
 * chromium signed in to host b. The Workers page lists both hosts with their heartbeats and marks the
 * one that leads and the one this dashboard is served by; each host's machine is named as whose it
 * is; the overview says how many hosts run and who leads. When the leader is killed, the page shows
 * it gone and the other host leading, without a reload.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Browser } from "playwright-core";
import { launchBrowser, openPage, signIn, textMatching, until, type UiPage } from "../helpers/browser";
import { stopTestPostgres, testPostgres } from "../helpers/postgres";
import { cleanup, tempDir } from "../helpers/proc";
import { startServing, type Serving } from "../helpers/serving";
import { HOOK_MS } from "../helpers/ui-suite";

const TOKEN = "ik_admin_cluster-ui-0123456789abcdef0123456789ab";
let a: Serving;
let b: Serving;
let browser: Browser;
let ui: UiPage;
/** The hosts' ids (from their own /admin/info). */
let idOf: Map<Serving, string>;

beforeAll(async () => {
  const url = await (await testPostgres()).createDatabase();
  const host = () =>
    startServing({
      INFERD_DATABASE_URL: url,
      INFERD_ADMIN_TOKEN: TOKEN,
      INFERD_WORKER_TIMEOUT_MS: "4000",
      FAKE_GPUS: "1x NVIDIA L4:23034",
      FAKE_GPU_USAGE_DIR: tempDir("gpu"),
    });
  a = await host();
  [b, browser] = await Promise.all([host(), launchBrowser()]);
  idOf = new Map(
    await Promise.all(
      [a, b].map(async (s) => [s, (await (await s.admin("/admin/info")).json()).cluster.host_id] as [Serving, string]),
    ),
  );
  ui = await openPage(browser, b.url);
  await signIn(ui, TOKEN);
}, HOOK_MS);
afterAll(async () => {
  await browser?.close();
  await Promise.all([a, b].map((s) => s?.stop().catch(() => 0)));
  await cleanup();
  await stopTestPostgres();
}, HOOK_MS);

describe("a cluster's dashboard", () => {
  test("Workers lists both hosts, the leader and this dashboard's host; each host's machine says whose it is", async () => {
    const { page } = ui;
    await ui.visit("/workers");
    const rows = page.getByRole("table", { name: "Hosts" }).getByTestId("host");
    await until(
      async () => (await rows.count()) === 2 && (await rows.filter({ hasText: "leader" }).count()) === 1,
      "two hosts, one leading",
    );
    const mine = rows.filter({ hasText: idOf.get(b)! });
    expect(await mine.textContent()).toContain("(this dashboard)");
    expect(await rows.filter({ hasText: idOf.get(a)! }).textContent()).not.toContain("(this dashboard)");
    for (const r of await rows.all()) expect(await r.getByText("online").count()).toBe(1);
    // Both hosts' own machines are workers here: b's is "this machine", a's is named by its host.
    const cards = page.locator("li.worker");
    await until(async () => (await cards.count()) === 2, "both machines listed");
    await textMatching(cards.filter({ hasText: "this machine" }), /this machine/, "b's machine");
    await textMatching(cards.filter({ hasText: "the machine of host" }), /the machine of host \S+/, "a's machine");
    await ui.checkWidths("cluster-workers");
    await ui.visit("/");
    await textMatching(
      page.locator("header.page-head"),
      /cluster of 2 hosts, led by \S+/,
      "the overview's cluster line",
    );
    ui.expectNoErrors("cluster overview");
  });

  test("when the leading host dies, the page shows it gone and the other host leading", async () => {
    const leader = (await (await b.admin("/admin/info")).json()).cluster.leader.id as string;
    const [dead, alive] = leader === idOf.get(a) ? [a, b] : [b, a];
    // The dashboard must stay up: when b leads, watch the page served by a instead.
    if (dead === b) {
      ui = await openPage(browser, a.url);
      await signIn(ui, TOKEN);
    }
    await ui.visit("/workers");
    await dead.kill9();
    const rows = ui.page.getByRole("table", { name: "Hosts" }).getByTestId("host");
    const deadRow = rows.filter({ hasText: idOf.get(dead)! });
    const aliveRow = rows.filter({ hasText: idOf.get(alive)! });
    await until(
      async () =>
        (await deadRow.getByText("offline").count()) === 1 && (await aliveRow.getByText("leader").count()) === 1,
      "the dead host offline and the other leading",
      40_000,
    );
    expect(await deadRow.getByText("leader").count()).toBe(0);
    ui.expectNoErrors("cluster workers after the leader died");
  });
});
