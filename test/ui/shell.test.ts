import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Browser } from "playwright-core";
import { servingPool, type Serving } from "../helpers/serving";
import { cleanup } from "../helpers/proc";
import { launchBrowser, openPage, signIn, textMatching, type UiPage } from "../helpers/browser";

/**
 * The dashboard's shell as a user meets it: where inferd listens (the loopback-only warning with the
 * exact restart command, snippets and join commands on the advertised host), the API docs offline,
 * navigation and accessibility (current section, focus on the heading, not-found pages, phones,
 * badge contrast), and the overview's banner, traffic summary and per-project counts.
 */
const HOOK_MS = 90_000;
const pool = servingPool();
let srv: Serving;
let advertised: Serving;
let browser: Browser;
let ui: UiPage;

beforeAll(async () => {
  [srv, advertised, browser] = await Promise.all([pool.serve(), pool.serve({ INFERD_ADVERTISE_HOST: "inferd.test", INFERD_LOCAL_AGENT: "0" }), launchBrowser()]);
  ui = await openPage(browser, srv.url);
  await signIn(ui, srv.adminToken);
}, HOOK_MS);
afterAll(async () => {
  await browser?.close();
  await pool.stopAll();
  await cleanup();
}, HOOK_MS);

describe("where inferd listens", () => {
  test("loopback-only: workers and snippets say so plainly, with the exact restart command", async () => {
    const { page } = ui;
    await ui.visit("/workers");
    const warning = await textMatching(page.getByTestId("listen-warning"), /listens on/, "the loopback warning");
    expect(warning).toContain("inferd listens on 127.0.0.1 only: other machines cannot connect to it.");
    expect(warning).toContain("restart it with inferd serve --host 0.0.0.0 (or set INFERD_HOST=0.0.0.0)");
    await page.getByText("Add a worker").click();
    await page.getByLabel("Worker name").fill("gpu-box-2");
    await page.getByRole("button", { name: "Add worker" }).click();
    const port = new URL(srv.url).port;
    await textMatching(page.getByTestId("join").locator("pre code"), /^inferd agent join https:\/\/127\.0\.0\.1:\d+ --token /, "the join command");
    const w = await srv.createWorkload({ name: "lan", backend: "vllm", model_name: "lan-model", config: { command: "vllm serve lan-model" } });
    await ui.visit(`/workloads/${w.id}`);
    await page.getByTestId("listen-warning").waitFor();
    expect(await page.locator(".snippets pre code").first().textContent()).toContain(`http://127.0.0.1:${port}/endpoint/${srv.project}/lan/v1`);
    await ui.checkWidths("listen-loopback");
  });

  test("with --advertise-host the snippets and the join command use that host, and no warning shows", async () => {
    const other = await openPage(browser, advertised.url);
    await signIn(other, advertised.adminToken);
    const w = await advertised.createWorkload({ name: "adv", backend: "vllm", model_name: "adv-model", config: { command: "vllm serve adv-model" } });
    await other.visit(`/workloads/${w.id}`);
    const port = new URL(advertised.url).port;
    await textMatching(other.page.getByTestId("listen-lan"), new RegExp(`reach inferd at http://inferd\\.test:${port}`), "the LAN address");
    expect(await other.page.locator(".snippets pre code").first().textContent()).toContain(`curl http://inferd.test:${port}/endpoint/${advertised.project}/adv/v1/chat/completions`);
    expect(await other.page.getByTestId("listen-warning").count()).toBe(0);
    await other.checkWidths("listen-advertised");
    await other.visit("/workers");
    await other.page.getByText("Add a worker").click();
    await other.page.getByLabel("Worker name").fill("gpu-box-3");
    await other.page.getByRole("button", { name: "Add worker" }).click();
    await textMatching(other.page.getByTestId("join").locator("pre code"), /^inferd agent join https:\/\/inferd\.test:\d+ --token /, "the join command");
    await other.context.close();
  });
});

describe("API docs", () => {
  test("/docs renders the API's operations with every non-loopback request aborted, linked from the sidebar", async () => {
    const docs = await openPage(browser, srv.url);
    const outside: string[] = [];
    await docs.context.route("**/*", (route) => {
      const host = new URL(route.request().url()).hostname;
      if (host === "127.0.0.1" || host === "localhost" || host === "[::1]") return route.continue();
      outside.push(route.request().url());
      return route.abort();
    });
    await signIn(docs, srv.adminToken);
    await docs.page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "API docs" }).click();
    await docs.page.waitForURL("**/docs");
    await docs.page.locator(".opblock").first().waitFor();
    expect(await docs.page.locator(".opblock-summary-path", { hasText: /^\/admin\/projects$/ }).count()).toBeGreaterThan(0);
    expect(await docs.page.locator(".opblock").count()).toBeGreaterThan(20);
    await expect(docs.page.locator(".info .title").textContent()).resolves.toContain("inferd");
    expect(outside).toEqual([]);
    await docs.checkWidths("docs-offline");
    await docs.context.close();
  });
});
