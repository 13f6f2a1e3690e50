import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Browser, Locator } from "playwright-core";
import { startServing, type Serving } from "../helpers/serving";
import { cleanup } from "../helpers/proc";
import { launchBrowser, openPage, signIn, until, type UiPage } from "../helpers/browser";

/**
 * Truthful charts and the playground in the browser against a real `inferd serve` (fake vLLM, one
 * fake 80 GB GPU idling at 15 %): the charts end with a complete bucket (the value drawn last is the
 * server's last complete one), GPU axes are fixed (0–100 %, 0 to the memory total, shown), one time
 * range drives GPU and workload charts, p99 is dashed in its p50's colour, errors/s and time to first
 * token are charted.
 */
const HOOK_MS = 90_000;
let srv: Serving;
let browser: Browser;
let ui: UiPage;
let chat: { id: string; slug: string };

/** One H100 whose readings do not move: the old charts autoscaled these to 0–20 % and 0–2 GiB. */
const GPUS = JSON.stringify([{ name: "NVIDIA H100 80GB HBM3", memory_total: 81559, memory_used: 2048, utilization: 15 }]);

beforeAll(async () => {
  [srv, browser] = await Promise.all([startServing({ FAKE_GPUS: GPUS, FAKE_FIRST_TOKEN_MS: "40" }), launchBrowser()]);
  chat = await srv.createWorkload({ name: "charts", backend: "vllm", model_name: "charts", config: { command: "vllm serve charts" } });
  ui = await openPage(browser, srv.url);
  await signIn(ui, srv.adminToken);
  await srv.waitState(chat.id);
}, HOOK_MS);
afterAll(async () => {
  await browser?.close();
  await srv?.stop();
  await cleanup();
}, HOOK_MS);

/** Steady traffic until stopped: a streamed chat every ~150 ms and every fifth request refused by the runtime. */
function traffic() {
  let on = true;
  const run = (async () => {
    for (let i = 0; on; i++) {
      const body = i % 5 === 4 ? { prompt: "no messages" } : { stream: true, messages: [{ role: "user", content: `steady ${i}` }] };
      await (await srv.data(chat.slug, "/v1/chat/completions", { body })).text();
      await Bun.sleep(150);
    }
  })();
  return { stop: () => ((on = false), run) };
}

const attr = async (l: Locator, name: string) => Number(await l.getAttribute(name));

describe("charts tell the truth", () => {
  test("telemetry: complete buckets only, fixed GPU axes with the total, one time range, p99 dashed, errors/s and TTFT", async () => {
    const { page } = ui;
    const load = traffic();
    const started = Date.now();
    try {
      await ui.visit("/telemetry");
      const util = page.getByRole("figure", { name: /^GPU utilisation · / });
      const mem = page.getByRole("figure", { name: /^GPU memory used · .*of 79\.6 GiB per GPU/ });
      await util.waitFor();
      expect(await util.getAttribute("data-y-max")).toBe("100");
      expect(await mem.getAttribute("data-y-max")).toBe("79.6");
      await page.getByRole("figure", { name: /^GPU utilisation · .* Latest: GPU 0: 15%/ }).waitFor();

      // The value drawn last is the server's last complete bucket, not a dip into the one filling.
      const rps = page.getByRole("figure", { name: /^Requests per second\./ });
      let drawn = 0;
      await until(async () => {
        const a = await (await srv.admin(`/admin/metrics/series?minutes=15&workload=${chat.id}`)).json();
        const last = a.workloads[0].points.at(-1);
        const end = Date.parse(a.complete_until) / 1000;
        const label = (await rps.getAttribute("aria-label")) ?? "";
        drawn = last.rps;
        // A bucket the steady traffic filled from its start: had the one still filling been drawn, it would dip.
        return Date.parse(last.t) >= started && (await attr(rps, "data-x-max")) === end && (await attr(rps, "data-x-last")) === end - 10 && last.rps > 0 && label.endsWith(`serving/charts: ${last.rps}`);
      }, "the chart's last point to be the server's last complete bucket, full of traffic", 40_000);
      expect(drawn).toBeGreaterThan(1);

      await page.getByRole("figure", { name: /^Errors per second\. Latest: serving\/charts: (0\.\d+|[1-9][\d.]*)$/ }).waitFor();
      await page.getByRole("figure", { name: /^Time to first token p50 \(solid\) \/ p99 \(dashed\), ms\. Latest: serving\/charts p50: \d+/ }).waitFor();

      // p50 solid, p99 dashed, in one colour (the legend shows the same).
      const latency = page.getByRole("figure", { name: /^Latency p50/ });
      const marker = (name: string) => latency.locator(".u-legend tr", { hasText: name }).locator(".u-marker").evaluate((el) => [getComputedStyle(el).borderTopStyle, getComputedStyle(el).borderTopColor]);
      const [p50, p99] = [await marker("serving/charts p50"), await marker("serving/charts p99")];
      expect(p50[0]).toBe("solid");
      expect(p99[0]).toBe("dashed");
      expect(p99[1]).toBe(p50[1]);

      // One selector: every chart, GPU and workload, spans the same window, and follows it.
      const figures = page.locator("figure.chart");
      const windows = async () => new Set(await figures.evaluateAll((fs) => fs.map((f) => `${f.getAttribute("data-x-min")}-${f.getAttribute("data-x-max")}`)));
      expect(await figures.count()).toBe(8);
      expect((await windows()).size).toBe(1);
      await page.getByLabel("Time range").selectOption({ label: "last 5 minutes" });
      await until(async () => {
        const w = [...(await windows())];
        const [min, max] = (w[0] ?? "").split("-").map(Number);
        return (await figures.count()) === 8 && w.length === 1 && max - min === 300;
      }, "every chart on the 5-minute window");
      await ui.checkWidths("charts-telemetry");
    } finally {
      await load.stop();
    }
  }, 120_000);

  test("the workload page charts its own traffic on complete buckets", async () => {
    const { page } = ui;
    await ui.visit(`/workloads/${chat.id}`);
    const activity = page.getByRole("region", { name: "Activity" });
    const rps = activity.getByRole("figure", { name: /^Requests per second\. Latest: this workload: / });
    await rps.waitFor();
    expect((await attr(rps, "data-x-max")) - (await attr(rps, "data-x-last"))).toBe(10);
    expect(await activity.locator("figure.chart").count()).toBe(6);
    await ui.checkWidths("charts-workload");
  });
});
