import { beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Page } from "playwright-core";
import { HOOK_MS, servedUi } from "../helpers/ui-suite";
import { PHONE, SCREENSHOTS, textMatching, until } from "../helpers/browser";

/**
 * Layout at a wide desktop (1440×900) and a phone (390 px), against a real `inferd serve` (fake vLLM,
 * fake GPUs): the audit log with a long change does not scroll sideways and its diffs wrap; the
 * runtime's 160-column log stays inside its box; a key's limits dialog fits the screen; the quota
 * cards are spaced like every other card.
 */
const WIDE = { width: 1440, height: 900 };
const world = servedUi();
let workload: { id: string; slug: string };

/** A vLLM command with a long unbroken argument, as people paste them (a JSON chat-template option). */
const LONG_COMMAND = `vllm serve Qwen/Qwen3-8B --enable-log-requests --max-model-len 8192 --gpu-memory-utilization 0.85 --override-generation-config={"temperature":0.6,"top_p":0.95,"top_k":20,"min_p":0,"presence_penalty":1.5,"repetition_penalty":1.05,"max_new_tokens":32768}`;

/** A caller's request id of the longest kind kept (128 characters): the runtime logs it on a line well past 160 columns. */
const LONG_ID = `trace-${"0123456789abcdef".repeat(8)}`.slice(0, 128);

beforeAll(async () => {
  workload = await world.srv.createWorkload({
    name: "wide",
    backend: "vllm",
    model_name: "Qwen/Qwen3-8B",
    config: { command: LONG_COMMAND },
  });
  await world.srv.waitState(workload.id);
}, HOOK_MS);

/** Sideways overflow of the page, in pixels (0 when it does not scroll sideways). */
const pageOverflow = (page: Page) =>
  page.evaluate(() => document.scrollingElement!.scrollWidth - document.scrollingElement!.clientWidth);

/** Waits two frames so a resize has been laid out. */
const settle = (page: Page) =>
  page.evaluate(() => new Promise<void>((r) => requestAnimationFrame(() => requestAnimationFrame(() => r()))));

describe("layout at 1440 px and on a phone", () => {
  test("the audit log with a long change: no sideways scroll, the diff wraps inside its cell", async () => {
    const { page } = world.ui;
    await page.setViewportSize(WIDE);
    await world.ui.visit("/audit");
    const row = page.getByTestId("audit-row").filter({ hasText: "workload.create" }).first();
    await row.waitFor();
    for (const [label, size] of [
      ["desktop", WIDE],
      ["phone", PHONE],
    ] as const) {
      await page.setViewportSize(size);
      await settle(page);
      await page.screenshot({ path: join(SCREENSHOTS, `layout-audit-${label}.png`), fullPage: label === "desktop" });
      expect({ label, overflow: await pageOverflow(page) }).toEqual({ label, overflow: 0 });
      if (label === "desktop") {
        // The table fits its box at 1440 px: nothing to scroll to, and the long change takes several lines.
        const box = await page.evaluate(() => {
          const wrap = document.querySelector(".table-wrap")!;
          const item = [...document.querySelectorAll("ul.diff li")].find((li) =>
            li.textContent!.includes("override-generation-config"),
          )!;
          return {
            hidden: wrap.scrollWidth - wrap.clientWidth,
            lines: Math.round(item.getBoundingClientRect().height / parseFloat(getComputedStyle(item).lineHeight)),
          };
        });
        expect(box.hidden).toBeLessThanOrEqual(1);
        expect(box.lines).toBeGreaterThan(1);
      }
    }
    world.ui.expectNoErrors("the audit log");
  });

  test("the 160-column log stays inside its box at 1440 px (the box may scroll, the page does not)", async () => {
    const { page } = world.ui;
    expect(
      (
        await world.srv.data(workload.slug, "/v1/chat/completions", {
          body: { messages: [{ role: "user", content: "a long id" }] },
          headers: { "x-request-id": LONG_ID },
        })
      ).status,
    ).toBe(200);
    await page.setViewportSize(WIDE);
    await world.ui.visit(`/workloads/${workload.id}/logs`);
    const rows = page.locator(".xterm-rows");
    await textMatching(rows, new RegExp(`Received request chatcmpl-${LONG_ID.slice(0, 40)}`), "the long request line");
    for (const [label, size] of [
      ["desktop", WIDE],
      ["phone", PHONE],
    ] as const) {
      await page.setViewportSize(size);
      await settle(page);
      await page.screenshot({ path: join(SCREENSHOTS, `layout-logs-${label}.png`) });
      const fit = await page.evaluate(() => {
        const box = document.querySelector<HTMLElement>("[data-testid=terminal]")!;
        const parent = box.parentElement!.getBoundingClientRect();
        const rect = box.getBoundingClientRect();
        const screen = box.querySelector(".xterm-screen")!.getBoundingClientRect();
        return {
          cols: Math.max(...[...box.querySelectorAll(".xterm-rows > div")].map((r) => r.textContent!.length)),
          right: rect.right - parent.right,
          left: parent.left - rect.left,
          screenWidth: screen.width,
          inner: box.clientWidth,
          scroll: box.scrollWidth,
        };
      });
      expect(fit.cols).toBeGreaterThanOrEqual(160);
      expect(fit.right).toBeLessThanOrEqual(1); // the box ends inside its parent
      expect(fit.left).toBeLessThanOrEqual(1);
      expect(await pageOverflow(page)).toBeLessThanOrEqual(0);
      // At 1440 px the 160 columns fit the box whole; on a phone the box scrolls sideways inside itself.
      if (label === "desktop") expect(fit.scroll - fit.inner).toBeLessThanOrEqual(1);
      else expect(fit.scroll).toBeGreaterThan(fit.inner);
    }
    world.ui.expectNoErrors("the logs");
  });

  test("a key's limits dialog fits the screen at phone and desktop width", async () => {
    const { page } = world.ui;
    for (const [label, size] of [
      ["desktop", WIDE],
      ["phone", PHONE],
    ] as const) {
      await page.setViewportSize(size);
      await world.ui.visit(`/projects/${world.srv.project}/keys`);
      const row = page.getByRole("row").filter({ hasText: /^live/ });
      await row.getByRole("button", { name: "Edit limits of live" }).click();
      const dialog = page.getByRole("dialog", { name: "Limits of live" });
      await dialog.getByLabel("Requests per minute").waitFor();
      await page.screenshot({ path: join(SCREENSHOTS, `layout-limits-${label}.png`) });
      const fit = await dialog.evaluate((d) => {
        const r = d.getBoundingClientRect();
        const inputs = [...d.querySelectorAll("input")].map((i) => i.getBoundingClientRect());
        return {
          left: r.left,
          right: window.innerWidth - r.right,
          top: r.top,
          bottom: window.innerHeight - r.bottom,
          sideways: d.scrollWidth - d.clientWidth,
          inputsInside: inputs.every((i) => i.left >= r.left && i.right <= r.right),
        };
      });
      expect({
        label,
        ...fit,
        left: fit.left >= 0,
        right: fit.right >= 0,
        top: fit.top >= 0,
        bottom: fit.bottom >= 0,
      }).toEqual({ label, ...fit, left: true, right: true, top: true, bottom: true, sideways: 0, inputsInside: true });
      await dialog.getByRole("button", { name: "Cancel" }).click();
    }
    world.ui.expectNoErrors("the limits dialog");
  });

  test("the quota cards are spaced like the other cards: same gap between cards, the form apart from the figures", async () => {
    const { page } = world.ui;
    await page.setViewportSize(WIDE);
    await world.ui.visit(`/projects/${world.srv.project}`);
    await page.getByTestId("used-today").waitFor();
    await page.getByTestId("used-workloads").waitFor();
    await page.getByTestId("quotas").screenshot({ path: join(SCREENSHOTS, "layout-quotas-desktop.png") });
    const spacing = await page.evaluate(() => {
      const card = (id: string) => document.querySelector<HTMLElement>(`[data-testid=${id}]`)!;
      const quotas = card("quotas");
      const caps = card("caps");
      const facts = quotas.querySelector(".facts")!.getBoundingClientRect();
      const form = quotas.querySelector("form")!.getBoundingClientRect();
      const actions = quotas.querySelector(".actions")!.getBoundingClientRect();
      const padding = parseFloat(getComputedStyle(quotas).paddingBottom);
      return {
        between: caps.getBoundingClientRect().top - quotas.getBoundingClientRect().bottom,
        margin: parseFloat(getComputedStyle(document.querySelector(".card")!).marginBottom),
        factsToForm: form.top - facts.bottom,
        actionsToEdge: quotas.getBoundingClientRect().bottom - actions.bottom - padding,
      };
    });
    expect(spacing.between).toBeCloseTo(spacing.margin, 0); // the gap every card has
    expect(spacing.factsToForm).toBeGreaterThanOrEqual(8); // the form does not touch the figures
    expect(Math.abs(spacing.actionsToEdge)).toBeLessThanOrEqual(1); // no extra space under the Save button
    await page.setViewportSize(PHONE);
    await settle(page);
    expect(await pageOverflow(page)).toBeLessThanOrEqual(0);
    await page.getByTestId("quotas").screenshot({ path: join(SCREENSHOTS, "layout-quotas-phone.png") });
    world.ui.expectNoErrors("the project page");
  });
});
