/**
 * One UI test file's world: a real `inferd serve` (fake runtimes and GPUs) and Debian's chromium with
 * a signed-in page, started before the file's tests and stopped after them.
 */
import { afterAll, beforeAll } from "bun:test";
import type { Browser } from "playwright-core";
import { startServing, type Serving } from "./serving";
import { cleanup } from "./proc";
import { launchBrowser, openPage, signIn, type UiPage } from "./browser";

/** Hooks start (or stop) a server, runtimes and chromium on possibly busy cores. */
export const HOOK_MS = 90_000;

/**
 * Registers the hooks; the returned object's `srv` and `ui` are set once `beforeAll` has run.
 * @example const world = servedUi({ FAKE_LOAD_MS: "2000" }); test("…", () => world.ui.visit("/"));
 */
export function servedUi(env: Record<string, string> = {}): { srv: Serving; ui: UiPage } {
  const world = {} as { srv: Serving; ui: UiPage };
  let browser: Browser | undefined;
  beforeAll(async () => {
    [world.srv, browser] = await Promise.all([startServing(env), launchBrowser()]);
    world.ui = await openPage(browser, world.srv.url);
    await signIn(world.ui, world.srv.adminToken);
  }, HOOK_MS);
  afterAll(async () => {
    await browser?.close();
    await world.srv?.stop();
    await cleanup();
  }, HOOK_MS);
  return world;
}
