/**
 * Browser tests' helpers: Debian's chromium driven by playwright-core, one browser per test file,
 * pages that record every console error and page error, screenshots at desktop and phone width.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser, type BrowserContext, type Locator, type Page } from "playwright-core";
import { tempDir } from "./proc";
import { waitFor } from "./proc";

/** Where screenshots go (git-ignored). */
export const SCREENSHOTS = join(import.meta.dir, "..", "ui", "screenshots");

/** The two widths every page is checked at. */
export const DESKTOP = { width: 1280, height: 800 };
export const PHONE = { width: 390, height: 844 };

/** Generous waits: two busy cores run the server, fake runtimes and chromium at once. */
export const WAIT_MS = 20_000;

const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

/** Launches Debian's chromium headless (Playwright gives it a fresh temporary profile). */
export function launchBrowser(): Promise<Browser> {
  return chromium.launch({
    executablePath: "/usr/bin/chromium",
    args: ARGS,
    timeout: 60_000,
    downloadsPath: tempDir("downloads"),
  });
}

/** A page on `baseUrl` that collects console errors and uncaught page errors. */
export interface UiPage {
  context: BrowserContext;
  page: Page;
  /** Every console error and page error so far (cleared by `expectNoErrors`). */
  errors: string[];
  /** Goes to an app path and waits until the app has rendered it. */
  visit(path: string): Promise<void>;
  /** Fails when any console error or page error happened since the last check (then forgets them). */
  expectNoErrors(where: string): void;
  /** Screenshots the page at desktop and phone width, checking each for errors and sideways overflow. */
  checkWidths(name: string): Promise<void>;
}

/** Opens a fresh context (no cookies, no storage) with one page at desktop width. */
export async function openPage(browser: Browser, baseUrl: string): Promise<UiPage> {
  const context = await browser.newContext({ baseURL: baseUrl, viewport: DESKTOP, acceptDownloads: true });
  context.setDefaultTimeout(WAIT_MS);
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("console", (m) => {
    if (m.type() === "error") errors.push(`console.error: ${m.text()} (${m.location().url})`);
  });
  page.on("pageerror", (e) => errors.push(`page error: ${e.message}`));
  const ui: UiPage = {
    context,
    page,
    errors,
    visit: async (path) => {
      await page.goto(path);
      await page.locator("#app > *").first().waitFor();
    },
    expectNoErrors: (where) => {
      const found = errors.splice(0);
      if (found.length) throw new Error(`console errors on ${where}:\n${found.join("\n")}`);
    },
    checkWidths: async (name) => {
      mkdirSync(SCREENSHOTS, { recursive: true });
      for (const [label, size] of [
        ["desktop", DESKTOP],
        ["phone", PHONE],
      ] as const) {
        await page.setViewportSize(size);
        await settle(page);
        await page.screenshot({ path: join(SCREENSHOTS, `${name}-${label}.png`), fullPage: true });
        const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        if (overflow > 1) throw new Error(`${name} at ${label} width scrolls sideways by ${overflow}px`);
        ui.expectNoErrors(`${name} (${label})`);
      }
      await expectLabelled(page, name);
      await page.setViewportSize(DESKTOP);
    },
  };
  return ui;
}

/** Fails when a visible form control has no accessible name (label, aria-label or aria-labelledby). */
export async function expectLabelled(page: Page, where: string): Promise<void> {
  const unlabelled = await page.evaluate(() =>
    [...document.querySelectorAll<HTMLInputElement>("input, select, textarea")]
      .filter((el) => el.offsetParent !== null && !el.closest(".xterm"))
      .filter((el) => !el.labels?.length && !el.getAttribute("aria-label") && !el.getAttribute("aria-labelledby"))
      .map((el) => el.outerHTML.slice(0, 120)),
  );
  if (unlabelled.length) throw new Error(`form controls without a label on ${where}:\n${unlabelled.join("\n")}`);
}

/** Waits for layout to settle after a resize: two animation frames and no pending fonts. */
async function settle(page: Page): Promise<void> {
  await page.evaluate(() => new Promise<void>((r) => requestAnimationFrame(() => requestAnimationFrame(() => r()))));
}

/** Signs in through the sign-in form with the admin token (folded under "Use the admin token"). */
export async function signIn(ui: UiPage, token: string): Promise<void> {
  await ui.visit("/");
  await ui.page.getByText("Use the admin token").click();
  await ui.page.getByLabel("Admin token").fill(token);
  await ui.page.getByRole("button", { name: "Sign in with the admin token" }).click();
  await ui.page.getByRole("navigation", { name: "Main" }).waitFor();
}

/** Signs in through the sign-in form with a user's email and password. */
export async function signInAs(ui: UiPage, email: string, password: string): Promise<void> {
  await ui.visit("/");
  await ui.page.getByLabel("Email").fill(email);
  await ui.page.getByLabel("Password").fill(password);
  await ui.page.getByRole("button", { name: "Sign in", exact: true }).click();
  await ui.page.getByRole("navigation", { name: "Main" }).waitFor();
}

/**
 * Polls `check` until it returns true, or fails after `timeoutMs` naming `what`.
 * @example await until(async () => (await rows.count()) === 2, "two rows");
 */
export async function until(check: () => Promise<boolean> | boolean, what: string, timeoutMs = WAIT_MS): Promise<void> {
  await waitFor(async () => (await check()) || undefined, { what, timeoutMs, intervalMs: 100 });
}

/** The text of a locator once it matches `re` (polling), for values that change while we watch. */
export async function textMatching(loc: Locator, re: RegExp, what: string): Promise<string> {
  let text = "";
  await until(async () => re.test((text = (await loc.textContent().catch(() => "")) ?? "")), `${what} to match ${re}`);
  return text;
}
