import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { cleanup, repoRoot, sourceBin, tempDir, waitFor } from "./helpers/proc";
import { freePort } from "./fixtures";

/**
 * `inferd desktop` under a real X server (Xvfb): it starts the server, opens the dashboard signed in
 * in a chromeless Chromium app window, and a screenshot of that window is saved.
 */
const procs: ReturnType<typeof Bun.spawn>[] = [];
let browser: Browser | undefined;
afterAll(async () => {
  await browser?.close().catch(() => {});
  for (const p of procs.reverse()) p.kill("SIGTERM");
  await Promise.all(procs.map((p) => p.exited));
  await cleanup();
});

describe("inferd desktop", () => {
  test("opens the dashboard, signed in, in an app window under Xvfb", async () => {
    expect(existsSync("/usr/bin/Xvfb")).toBe(true);
    const display = 90 + Math.floor(Math.random() * 100);
    const xvfb = Bun.spawn(["Xvfb", `:${display}`, "-screen", "0", "1280x800x24", "-nolisten", "tcp"], {
      stdout: "ignore",
      stderr: "ignore",
    });
    procs.push(xvfb);
    await waitFor(() => existsSync(`/tmp/.X11-unix/X${display}`) || undefined, { what: "Xvfb up" });

    const cdp = await freePort();
    const dataDir = tempDir("desktop");
    let out = "";
    const app = Bun.spawn([...sourceBin(), "desktop", "--port", "0", "--data-dir", dataDir, "--no-local-agent"], {
      cwd: repoRoot,
      env: {
        ...process.env,
        DISPLAY: `:${display}`,
        INFERD_BROWSER: "/usr/bin/chromium",
        INFERD_BROWSER_ARGS: `--no-sandbox --disable-gpu --no-first-run --disable-background-networking --disable-component-update --disable-sync --remote-debugging-port=${cdp} --user-data-dir=${tempDir("desktop-profile")}`,
      },
      stdout: "pipe",
      stderr: "pipe",
    });
    procs.push(app);
    void (async () => {
      for await (const c of app.stdout as unknown as AsyncIterable<Uint8Array>) out += new TextDecoder().decode(c);
    })();
    await waitFor(() => out.includes("opening the dashboard") || undefined, {
      what: "desktop opening the window",
      timeoutMs: 30_000,
      detail: () => out,
    });
    browser = await waitFor(() => chromium.connectOverCDP(`http://127.0.0.1:${cdp}`).catch(() => undefined), {
      what: "the app window's browser",
      timeoutMs: 30_000,
    });
    const page = await waitFor(
      () =>
        browser!
          .contexts()
          .flatMap((c) => c.pages())
          .find((p) => new URL(p.url()).pathname === "/"),
      { what: "the dashboard page", timeoutMs: 30_000 },
    );
    await page.waitForLoadState("load");
    const signedIn = await page.evaluate(async () => (await fetch("/admin/info")).status);
    expect(signedIn).toBe(200);
    expect(await page.title()).toMatch(/inferd/i);
    // The window opened signed in: the dashboard, not the sign-in form, is what a person sees.
    await page.waitForFunction(
      () => document.body.innerText.length > 0 && !document.body.innerText.includes("Sign in to inferd"),
      undefined,
      { timeout: 20_000 },
    );
    const dir = join(repoRoot, "test", "ui", "screenshots");
    mkdirSync(dir, { recursive: true });
    await page.screenshot({ path: join(dir, "desktop-window.png") });
    expect(existsSync(join(dir, "desktop-window.png"))).toBe(true);
  }, 90_000);
});
