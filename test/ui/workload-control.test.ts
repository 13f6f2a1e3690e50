import { describe, expect, test } from "bun:test";
import { symlinkSync } from "node:fs";
import { join } from "node:path";
import { tempDir } from "../helpers/proc";
import { PHONE, DESKTOP, SCREENSHOTS, textMatching, until } from "../helpers/browser";
import { servedUi } from "../helpers/ui-suite";
import { FIXTURE_BIN } from "../fixtures";

/**
 * Controlling a workload in the browser against a real `inferd serve` with fake runtimes and GPUs: a
 * runtime that cannot launch writes why into its log and Retry brings it back; the log viewer's
 * search, timestamps and phone layout; form errors under the field they name, once; and only the
 * endpoints and tabs a workload's task type can use.
 */
// Runtimes take 5 s to load, so their progress bar can be seen; two crashes make "failed".
const world = servedUi({ FAKE_LOAD_MS: "5000", INFERD_MAX_CRASHES: "2", FAKE_GPU_USAGE_DIR: tempDir("gpu-usage") });

/** Leaves the workload's pages (whose polls would get 404s), then deletes it. */
async function removeWorkload(id: string): Promise<void> {
  await world.ui.visit("/projects");
  expect((await world.srv.admin(`/admin/workloads/${id}`, { method: "DELETE" })).status).toBeLessThan(300);
}

describe("controlling a workload in the browser", () => {
  test("a runtime that cannot launch says why in its log (not an empty 'Connecting…'); Retry brings it back once the program is there", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    const dir = tempDir("later-bin");
    const w = await srv.createWorkload({
      name: "later",
      backend: "vllm",
      model_name: "m",
      config: { command: `${join(dir, "vllm")} serve m` },
    });
    await ui.visit(`/workloads/${w.id}`);
    const status = page.getByTestId("replica-status");
    await status.locator(".badge", { hasText: "failed" }).waitFor({ timeout: 30_000 });
    await textMatching(status.locator(".reason"), /command not found/, "the failure's reason");
    // The overview offers the same under the badge.
    await ui.visit("/");
    await page
      .getByTestId("replica-status")
      .filter({ hasText: "command not found" })
      .getByRole("button", { name: "Retry" })
      .waitFor();
    await page
      .getByTestId("replica-status")
      .filter({ hasText: "command not found" })
      .getByRole("link", { name: "See its logs" })
      .click();
    const rows = page.locator(".xterm-rows");
    await textMatching(rows, /\[inferd\] failed: command not found: .*vllm/, "the launch failure in the log");
    await page.getByText("Following live").waitFor();
    // The live stream opens at once, even with no output to send (bytes=0: no tail), with a comment.
    const ctrl = new AbortController();
    const live = await fetch(`${srv.url}/admin/workloads/${w.id}/logs?follow=1&bytes=0`, {
      headers: { authorization: `Bearer ${srv.adminToken}` },
      signal: ctrl.signal,
    });
    expect(new TextDecoder().decode((await live.body!.getReader().read()).value)).toBe(": connected\n\n");
    ctrl.abort();
    await page.getByRole("alert").filter({ hasText: "This replica failed: command not found" }).waitFor();
    await ui.checkWidths("logs-failed");
    symlinkSync(join(FIXTURE_BIN, "vllm"), join(dir, "vllm"));
    await page.getByRole("button", { name: "Retry" }).click();
    await textMatching(rows, /Uvicorn running on/, "the runtime's output after Retry");
    await page.locator(".toolbar .badge", { hasText: "ready" }).waitFor({ timeout: 30_000 });
    expect(await page.getByRole("button", { name: "Retry" }).count()).toBe(0);
    ui.expectNoErrors("retry from the log");
    await removeWorkload(w.id);
  });

  test("a replica coming up shows, under its badge, how long it has been starting, the runtime's last line and its percentage as a bar (whole on a phone)", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    const w = await srv.createWorkload({
      name: "slow",
      backend: "vllm",
      model_name: "m",
      config: { command: "vllm serve m" },
    });
    await ui.visit(`/workloads/${w.id}`);
    const status = page.getByTestId("replica-status");
    await status.locator(".badge", { hasText: "starting" }).waitFor();
    await textMatching(status.locator(".since"), /^for \d+ s$/, "the time in its state");
    await textMatching(status.locator(".last-line"), /Loading safetensors checkpoint shards: +\d+%/, "the last line");
    // Line and bar read together (both change as the runtime loads).
    const seen = await status.evaluate((el) => ({
      line: el.querySelector(".last-line")?.textContent ?? "",
      pct: el.querySelector("[role=progressbar][aria-label='Runtime progress']")?.getAttribute("aria-valuenow"),
    }));
    expect(Number(seen.pct)).toBe(Number(/(\d+)%/.exec(seen.line)![1]));
    await page.setViewportSize(PHONE);
    const cut = await status.locator(".last-line").evaluate((el) => el.scrollWidth > el.clientWidth + 1);
    expect(cut).toBe(false);
    await page.screenshot({ path: join(SCREENSHOTS, "replica-starting-phone.png"), fullPage: true });
    await page.setViewportSize(DESKTOP);
    await status.locator(".badge", { hasText: "ready" }).waitFor({ timeout: 30_000 });
    expect(await status.locator(".last-line").count()).toBe(0);
    ui.expectNoErrors("progress under the badge");
    await removeWorkload(w.id);
  });

  test("the log viewer: one frame, search with next/previous and a count, timestamps, the progress bar whole on a phone", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    const w = await srv.createWorkload({
      name: "viewer",
      backend: "vllm",
      model_name: "Qwen/Qwen3-8B",
      config: { command: "vllm serve Qwen/Qwen3-8B" },
    });
    await srv.waitState(w.id);
    // A few requests so "POST /v1/chat/completions" appears more than once.
    for (let i = 0; i < 3; i++)
      expect(
        (
          await srv.data("viewer", "/v1/chat/completions", {
            body: { messages: [{ role: "user", content: `hi ${i}` }] },
          })
        ).status,
      ).toBe(200);
    await ui.visit(`/workloads/${w.id}/logs`);
    const rows = page.locator(".xterm-rows");
    await textMatching(rows, /Uvicorn running on/, "the runtime's output");
    // Our box and xterm's own element: one frame, and xterm fills the box (no dark side bars).
    const frames = await page.evaluate(() => {
      const box = document.querySelector("[data-testid=terminal]")!;
      const xterm = box.querySelector(".xterm")!;
      const bordered = [box, ...box.querySelectorAll("*")].filter(
        (el) => parseFloat(getComputedStyle(el).borderTopWidth) > 0,
      ).length;
      return {
        bordered,
        boxClass: box.className,
        gap: box.clientWidth - parseFloat(getComputedStyle(box).paddingLeft) * 2 - (xterm as HTMLElement).offsetWidth,
      };
    });
    expect(frames.bordered).toBe(1);
    expect(frames.boxClass).not.toContain("terminal");
    expect(frames.gap).toBeLessThan(20);

    const search = page.getByRole("searchbox", { name: "Search the log" });
    await search.fill("POST /v1/chat/completions");
    await search.press("Enter");
    const count = page.getByTestId("search-status");
    const first = await textMatching(count, /^\d+ of [3-9]$/, "the match count");
    await page.screenshot({ path: join(SCREENSHOTS, "logs-search-desktop.png") });
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
    await until(
      async () => !/\d\d:\d\d:\d\d \(APIServer/.test((await rows.textContent()) ?? ""),
      "the times gone again",
    );

    // On a phone the loading bar (about 110 columns) stays on one line: the box scrolls sideways, the page does not.
    await page.setViewportSize(PHONE);
    await ui.visit(`/workloads/${w.id}/logs`);
    await textMatching(rows, /Uvicorn running on/, "the output on a phone");
    const bar = await page.evaluate(
      () =>
        [...document.querySelectorAll(".xterm-rows > div")]
          .map((r) => r.textContent ?? "")
          .find((t) => t.includes("Loading safetensors")) ?? "",
    );
    expect(bar).toMatch(/Loading safetensors checkpoint shards: 100% Completed \|█+\| \d+\/\d+/);
    expect(await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(1);
    await page.setViewportSize(DESKTOP);
    await ui.checkWidths("logs-viewer");
    await removeWorkload(w.id);
  });
});

describe("workload form errors", () => {
  test("each error once, in plain words, under the field it names (aria-describedby); a taken slug marks the slug; others go in one summary at the top", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    await srv.createWorkload({
      name: "Taken",
      slug: "taken",
      backend: "vllm",
      model_name: "m",
      config: { command: "vllm serve m" },
    });
    await ui.visit(`/projects/${srv.project}/workloads/new`);
    await page.getByRole("radio", { name: /^vLLM A Hugging Face/ }).check();
    await page.getByLabel("Name", { exact: true }).fill("Second");
    await page.getByRole("textbox", { name: /^Slug/ }).fill("taken");
    const command = page.getByRole("textbox", { name: /^Command/ });
    await command.fill(`vllm serve "m`);
    const note = page.locator("#error-config-command");
    await textMatching(note, /^The command has an unclosed double quote$/, "the refusal under the command");
    const described = async (loc: typeof command) =>
      page.locator(`#${await loc.getAttribute("aria-describedby")}`).textContent();
    expect(await described(command)).toBe("The command has an unclosed double quote");
    expect(await command.getAttribute("aria-invalid")).toBe("true");
    // The preview's 400 is logged by the browser; that one is expected.
    await until(() => ui.errors.length > 0, "the refused preview to be logged");
    ui.errors.splice(0);
    await page.getByRole("button", { name: "Create workload" }).click();
    await page.getByRole("alert").or(note).first().waitFor();
    await until(() => ui.errors.length > 0, "the refused save to be logged");
    ui.errors.splice(0);
    const body = async () => (await page.locator("main").textContent()) ?? "";
    expect((await body()).split("unclosed double quote").length - 1).toBe(1);
    expect(await body()).not.toContain("config.command");
    expect(await page.getByTestId("form-error").count()).toBe(0);

    await command.fill("vllm serve m");
    await until(async () => (await note.count()) === 0, "the command's note to go once fixed");
    await page.getByRole("button", { name: "Create workload" }).click();
    const slug = page.getByRole("textbox", { name: /^Slug/ });
    await until(async () => (await slug.getAttribute("aria-invalid")) === "true", "the slug marked invalid");
    expect(await described(slug)).toBe('Workload slug "taken" is already taken');
    expect(await page.evaluate(() => document.activeElement?.getAttribute("name"))).toBe("slug");
    expect(await page.getByTestId("form-error").count()).toBe(0);
    expect(ui.errors.splice(0)).toEqual([expect.stringContaining("409")]);
    await ui.checkWidths("form-errors");

    // An error no field shows (the project went away meanwhile) is one summary at the top of the form.
    expect((await srv.admin("/admin/projects", { body: { name: "Fleeting", slug: "fleeting" } })).status).toBe(201);
    await ui.visit("/projects/fleeting/workloads/new");
    await page.getByLabel("Name", { exact: true }).fill("Orphan");
    expect((await srv.admin("/admin/projects/fleeting", { method: "DELETE" })).status).toBeLessThan(300);
    await page.getByRole("textbox", { name: /^Model name/ }).fill("m");
    await page.getByRole("button", { name: "Create workload" }).click();
    const summary = page.getByTestId("form-error");
    await textMatching(summary, /project .*not found/i, "the summary");
    const order = await page.evaluate(() => {
      const form = document.querySelector("form")!;
      return [...form.querySelectorAll("[data-testid=form-error], input, textarea")].indexOf(
        form.querySelector("[data-testid=form-error]")!,
      );
    });
    expect(order).toBe(0);
    expect(await page.locator(".note.error").count()).toBe(1);
    ui.errors.splice(0);
  });
});

describe("controls that fit the task type", () => {
  test("a forecasting workload shows its own switch and jobs, the rest folded under Other endpoints, and no Playground tab; a chat workload keeps its playground", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    const forecast = await srv.createWorkload({
      name: "Forecaster",
      task_type: "forecast",
      backend: "vllm",
      model_name: "m",
      config: { command: "vllm serve m" },
    });
    await ui.visit(`/workloads/${forecast.id}`);
    await page.getByRole("heading", { name: "Forecaster" }).waitFor();
    const endpoints = page.locator("section", { has: page.getByRole("heading", { name: "Endpoints" }) });
    expect(await endpoints.getByRole("switch", { name: "Forecast" }).isVisible()).toBe(true);
    expect(await endpoints.getByRole("switch", { name: /^Async jobs/ }).isVisible()).toBe(true);
    const chat = endpoints.getByRole("switch", { name: "Chat completions and Messages" });
    expect(await chat.isVisible()).toBe(false);
    const tabs = page.getByRole("navigation", { name: "Sections" });
    expect(await tabs.getByRole("link").allTextContents()).toEqual([
      "Overview",
      "Logs",
      "Requests",
      "Webhooks & jobs",
      "Edit",
    ]);
    await ui.checkWidths("workload-forecast");
    // Folded, not gone: the other switches still work.
    await endpoints.getByText("Other endpoints").click();
    await page.getByText("Time-series forecasting workloads do not use these").waitFor();
    for (const name of [
      "Chat completions and Messages",
      "Embeddings",
      "Rerank",
      "Audio (speech, transcription)",
      "Images",
    ])
      expect(await endpoints.getByRole("switch", { name }).isVisible()).toBe(true);
    await chat.uncheck();
    await until(
      async () => !((await srv.workload(forecast.id)) as unknown as { endpoints: { chat: boolean } }).endpoints.chat,
      "chat switched off",
    );

    const chatty = await srv.createWorkload({
      name: "Chatty",
      backend: "vllm",
      model_name: "m",
      config: { command: "vllm serve m" },
    });
    await ui.visit(`/workloads/${chatty.id}`);
    await page.getByRole("heading", { name: "Chatty" }).waitFor();
    expect(await tabs.getByRole("link").allTextContents()).toEqual([
      "Overview",
      "Playground",
      "Logs",
      "Requests",
      "Webhooks & jobs",
      "Edit",
    ]);
    expect(await endpoints.getByRole("switch", { name: "Chat completions and Messages" }).isVisible()).toBe(true);
    expect(await endpoints.getByRole("switch", { name: "Images" }).isVisible()).toBe(false);
    ui.expectNoErrors("task type controls");
  });
});
