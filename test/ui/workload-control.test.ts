import { describe, expect, test } from "bun:test";
import { symlinkSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../helpers/proc";
import { PHONE, DESKTOP, textMatching, until } from "../helpers/browser";
import { servedUi } from "../helpers/ui-suite";
import { FIXTURE_BIN } from "../fixtures";

/**
 * Controlling a workload in the browser against a real `inferd serve` with fake runtimes and GPUs: a
 * runtime that cannot launch writes why into its log and Retry brings it back; the log viewer's
 * search, timestamps and phone layout; form errors under the field they name, once; and only the
 * endpoints and tabs a workload's task type can use.
 */
// Runtimes take 2 s to load, so their progress bar can be seen; two crashes make "failed".
const world = servedUi({ FAKE_LOAD_MS: "2000", INFERD_MAX_CRASHES: "2", FAKE_GPU_USAGE_DIR: tempDir("gpu-usage") });

describe("controlling a workload in the browser", () => {
  test("a runtime that cannot launch says why in its log (not an empty 'Connecting…'); Retry brings it back once the program is there", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    const dir = tempDir("later-bin");
    const w = await srv.createWorkload({ name: "later", backend: "vllm", model_name: "m", config: { command: `${join(dir, "vllm")} serve m` } });
    await ui.visit(`/workloads/${w.id}`);
    const status = page.getByTestId("replica-status");
    await status.locator(".badge", { hasText: "failed" }).waitFor({ timeout: 30_000 });
    await textMatching(status.locator(".reason"), /command not found/, "the failure's reason");
    await page.getByRole("link", { name: "See its logs" }).click();
    const rows = page.locator(".xterm-rows");
    await textMatching(rows, /\[inferd\] failed: command not found: .*vllm/, "the launch failure in the log");
    await page.getByText("Following live").waitFor();
    await page.getByRole("alert").filter({ hasText: "This replica failed: command not found" }).waitFor();
    await ui.checkWidths("logs-failed");
    symlinkSync(join(FIXTURE_BIN, "vllm"), join(dir, "vllm"));
    await page.getByRole("button", { name: "Retry" }).click();
    await textMatching(rows, /Uvicorn running on/, "the runtime's output after Retry");
    await page.locator(".toolbar .badge", { hasText: "ready" }).waitFor({ timeout: 30_000 });
    expect(await page.getByRole("button", { name: "Retry" }).count()).toBe(0);
    ui.expectNoErrors("retry from the log");
    await srv.admin(`/admin/workloads/${w.id}`, { method: "DELETE" });
  });

  test("the log viewer: one frame, search with next/previous and a count, timestamps, the progress bar whole on a phone", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    const w = await srv.createWorkload({ name: "viewer", backend: "vllm", model_name: "Qwen/Qwen3-8B", config: { command: "vllm serve Qwen/Qwen3-8B" } });
    await srv.waitState(w.id);
    // A few requests so "POST /v1/chat/completions" appears more than once.
    for (let i = 0; i < 3; i++) expect((await srv.data("viewer", "/v1/chat/completions", { body: { messages: [{ role: "user", content: `hi ${i}` }] } })).status).toBe(200);
    await ui.visit(`/workloads/${w.id}/logs`);
    const rows = page.locator(".xterm-rows");
    await textMatching(rows, /Uvicorn running on/, "the runtime's output");
    // Our box and xterm's own element: one frame, and xterm fills the box (no dark side bars).
    const frames = await page.evaluate(() => {
      const box = document.querySelector("[data-testid=terminal]")!;
      const xterm = box.querySelector(".xterm")!;
      const bordered = [box, ...box.querySelectorAll("*")].filter((el) => parseFloat(getComputedStyle(el).borderTopWidth) > 0).length;
      return { bordered, boxClass: box.className, gap: box.clientWidth - parseFloat(getComputedStyle(box).paddingLeft) * 2 - (xterm as HTMLElement).offsetWidth };
    });
    expect(frames.bordered).toBe(1);
    expect(frames.boxClass).not.toContain("terminal");
    expect(frames.gap).toBeLessThan(20);

    const search = page.getByRole("searchbox", { name: "Search the log" });
    await search.fill("POST /v1/chat/completions");
    await search.press("Enter");
    const count = page.getByTestId("search-status");
    const first = await textMatching(count, /^\d+ of [3-9]$/, "the match count");
    await page.getByRole("button", { name: "Next" }).click();
    await until(async () => (await count.textContent()) !== first, "Next to move to another match");
    await page.getByRole("button", { name: "Previous" }).click();
    await textMatching(count, new RegExp(`^${first}$`), "Previous to come back");
    await search.fill("no such words anywhere");
    await search.press("Enter");
    await textMatching(count, /^No match$/, "no match");

    await page.getByRole("button", { name: "Timestamps" }).click();
    expect(await page.getByRole("button", { name: "Timestamps" }).getAttribute("aria-pressed")).toBe("true");
    await textMatching(rows, /\d\d:\d\d:\d\d .*Uvicorn running on/, "lines prefixed with their time");
    await page.getByRole("button", { name: "Timestamps" }).click();
    await until(async () => !/\d\d:\d\d:\d\d \(APIServer/.test((await rows.textContent()) ?? ""), "the times gone again");

    // On a phone the loading bar (about 110 columns) stays on one line: the box scrolls sideways, the page does not.
    await page.setViewportSize(PHONE);
    await ui.visit(`/workloads/${w.id}/logs`);
    await textMatching(rows, /Uvicorn running on/, "the output on a phone");
    const bar = await page.evaluate(() => [...document.querySelectorAll(".xterm-rows > div")].map((r) => r.textContent ?? "").find((t) => t.includes("Loading safetensors")) ?? "");
    expect(bar).toMatch(/Loading safetensors checkpoint shards: 100% Completed \|█+\| \d+\/\d+/);
    expect(await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(1);
    await page.setViewportSize(DESKTOP);
    await ui.checkWidths("logs-viewer");
    await srv.admin(`/admin/workloads/${w.id}`, { method: "DELETE" });
  });
});
