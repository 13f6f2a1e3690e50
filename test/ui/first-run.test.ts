import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { startServing, type Serving } from "../helpers/serving";
import { cleanup, tempDir } from "../helpers/proc";
import { launchBrowser, openPage, until, type UiPage } from "../helpers/browser";
import { writeTinyGguf } from "../fixtures/gguf";

/**
 * A person who never read the docs, on a fresh `inferd serve` (fake GPUs and runtimes): signs in with
 * the printed admin token, follows the guided first run to a project, a llama.cpp workload on a GGUF
 * file (a wrong path flagged before saving), a live key and snippets that really answer, finds the
 * replica ready, uses the keyboard, and signs out. Every page is checked at desktop and phone width with no console errors.
 */
/** Hooks start (or stop) a server, runtimes and chromium on possibly busy cores. */
const HOOK_MS = 90_000;
let srv: Serving;
let browser: Browser;
let ui: UiPage;
let gguf: string;

beforeAll(async () => {
  [srv, browser] = await Promise.all([startServing(), launchBrowser()]);
  // startServing seeds a project; remove it so the server is as fresh as a first start.
  expect((await srv.admin(`/admin/projects/${srv.project}`, { method: "DELETE" })).status).toBeLessThan(300);
  gguf = join(tempDir("models"), "tiny-chat.gguf");
  writeTinyGguf(gguf);
  ui = await openPage(browser, srv.url);
}, HOOK_MS);
afterAll(async () => {
  await browser?.close();
  await srv?.stop();
  await cleanup();
}, HOOK_MS);

describe("first run in the browser", () => {
  test('sign-in offers the printed admin token under "Use the admin token"; a wrong one is refused, the right one sets an HttpOnly SameSite=Strict cookie', async () => {
    const { page } = ui;
    await ui.visit("/");
    await page.getByRole("heading", { name: "Sign in to inferd" }).waitFor();
    await page.getByText("Use the admin token").click();
    await ui.checkWidths("signin");
    await page.getByLabel("Admin token").fill("ik_admin_wrong");
    await page.getByRole("button", { name: "Sign in with the admin token" }).click();
    await page.getByRole("alert").filter({ hasText: "admin token is wrong" }).waitFor();
    // The browser logs the refused sign-in (401) itself; that one is expected.
    expect(ui.errors.splice(0)).toEqual([expect.stringContaining("401")]);
    await page.getByLabel("Admin token").fill(srv.adminToken);
    await page.getByRole("button", { name: "Sign in with the admin token" }).click();
    await page.getByRole("heading", { name: "Welcome to inferd" }).waitFor();
    const cookie = (await ui.context.cookies()).find((c) => c.name === "inferd_session")!;
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Strict" });
    await ui.checkWidths("overview-fresh");
  });

  test("the guided path: project, llama.cpp workload on a GGUF file, live key, snippets that work", async () => {
    const { page } = ui;
    await page.getByRole("link", { name: "Get started" }).first().click();
    await page.getByLabel("Project name").fill("Demo app");
    await page.getByRole("button", { name: "Create project" }).click();
    // Step 2: the built-in llama.cpp path is offered; Ollama says its daemon is not there.
    await page.getByText("No Ollama daemon answers").waitFor();
    expect(await page.getByRole("radio", { name: /^Ollama/ }).isDisabled()).toBe(true);
    // A starter download is offered first; this person has a GGUF file already.
    expect(await page.getByRole("radio", { name: /Download a starter model/ }).isChecked()).toBe(true);
    await page.getByRole("radio", { name: /A GGUF file on this machine/ }).check();
    const file = page.getByRole("textbox", { name: /^GGUF file/ });
    await file.fill(join(gguf, "..", "missing.gguf"));
    await page.getByTestId("model-note").filter({ hasText: "There is no file at this path on this machine" }).waitFor();
    expect(await file.getAttribute("aria-invalid")).toBe("true");
    await file.fill(gguf);
    await page
      .getByTestId("model-note")
      .filter({ hasText: /^A GGUF file of \d+ KiB on this machine\.$/ })
      .waitFor();
    const command = page.getByTestId("launch-command");
    await command.filter({ hasText: "--port" }).waitFor();
    expect(await command.textContent()).toContain(
      `llama-server -m ${gguf} -c 4096 --alias tiny-chat --host 127.0.0.1 --port`,
    );
    await ui.checkWidths("setup-workload");
    await page.getByRole("button", { name: "Create workload" }).click();
    await page.getByLabel("Key name").fill("first-app");
    await page.getByRole("button", { name: "Create key" }).click();
    const secret = (await page.getByTestId("secret").textContent())!;
    expect(secret).toStartWith("ik_live_");
    await page.getByText("you will not see it again").waitFor();
    const curl = (await page.locator("figure.code pre").first().textContent())!;
    // The project's base URL first, the workload's model name as `model`; the workload's own base second.
    expect(curl).toContain(`${srv.url}/endpoint/demo-app/v1/chat/completions`);
    expect(curl).toContain(`Bearer ${secret}`);
    const model = /"model":"([^"]+)"/.exec(curl)![1];
    expect(await page.locator("figure.code pre").nth(1).textContent()).toContain(
      `base_url="${srv.url}/endpoint/demo-app/v1"`,
    );
    expect(await page.getByTestId("workload-snippets").locator("figure.code pre").first().textContent()).toContain(
      `${srv.url}/endpoint/demo-app/chat/v1/chat/completions`,
    );
    await ui.checkWidths("setup-done");
    // The snippet's request answers once the runtime is up.
    await until(
      async () => {
        const r = await fetch(`${srv.url}/endpoint/demo-app/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
          body: JSON.stringify({ model, messages: [{ role: "user", content: "Say hello" }] }),
        });
        return r.status === 200 && (await r.json()).choices[0].message.content.includes("Say hello");
      },
      "the snippet's request to answer",
      30_000,
    );
    await page.getByRole("link", { name: "See the workload" }).click();
    await page.locator("table .badge", { hasText: "ready" }).waitFor();
    await ui.checkWidths("workload-first");
  });

  test("keyboard: skip link, navigation and visible focus", async () => {
    const { page } = ui;
    await ui.visit("/");
    await page.keyboard.press("Tab");
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Skip to content");
    const nav = page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Projects" });
    await nav.focus();
    const outline = await nav.evaluate((el) => getComputedStyle(el).outlineStyle);
    expect(outline).not.toBe("none");
    await page.keyboard.press("Enter");
    await page.getByRole("heading", { name: "Projects" }).waitFor();
    await page.getByRole("link", { name: "Demo app" }).waitFor();
    await ui.checkWidths("projects");
    ui.expectNoErrors("keyboard walk");
  });

  test("projects: one made from the list page, deleted from its own page", async () => {
    const { page } = ui;
    await page.getByLabel("Name").fill("Scratch");
    await page.getByRole("button", { name: "Create project" }).click();
    await page.getByRole("heading", { name: "Scratch" }).waitFor();
    await ui.checkWidths("project-empty");
    await page.getByRole("button", { name: "Delete project" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Delete project" }).click();
    await page.getByRole("heading", { name: "Projects" }).waitFor();
    await page.getByRole("link", { name: "Demo app" }).waitFor();
    expect(await page.getByRole("link", { name: "Scratch" }).count()).toBe(0);
  });

  test("on a phone the menu button opens the navigation", async () => {
    const { page } = ui;
    await page.setViewportSize({ width: 390, height: 844 });
    try {
      const link = page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Workers" });
      expect(await link.isVisible()).toBe(false);
      const menu = page.getByRole("button", { name: "Menu" });
      await menu.click();
      expect(await menu.getAttribute("aria-expanded")).toBe("true");
      await link.click();
      await page.getByRole("heading", { name: "Workers" }).waitFor();
      // The menu closes once the new page has rendered (an effect of the navigation).
      await link.waitFor({ state: "hidden" });
      expect(await menu.getAttribute("aria-expanded")).toBe("false");
    } finally {
      await page.setViewportSize({ width: 1280, height: 800 });
    }
    ui.expectNoErrors("phone menu");
  });

  test("sign-out ends the session on the server", async () => {
    const { page } = ui;
    const cookie = (await ui.context.cookies()).find((c) => c.name === "inferd_session")!;
    await page.getByRole("button", { name: "Sign out", exact: true }).click();
    await page.getByRole("heading", { name: "Sign in to inferd" }).waitFor();
    const r = await fetch(`${srv.url}/admin/info`, { headers: { cookie: `inferd_session=${cookie.value}` } });
    expect(r.status).toBe(401);
    ui.expectNoErrors("sign-out");
  });

  test("the desktop window's one-time /login link lands signed in, with no marker left in the address", async () => {
    const { loginCode } = await import("../../src/desktop");
    const fresh = await openPage(browser, srv.url);
    await fresh.page.goto(`/login?code=${await loginCode({ dataDir: srv.dataDir })}`);
    await fresh.page.getByRole("heading", { name: "Overview" }).waitFor();
    expect(new URL(fresh.page.url()).search).toBe("");
    fresh.expectNoErrors("login link");
    await fresh.context.close();
  });
});
