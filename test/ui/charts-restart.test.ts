import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Browser } from "playwright-core";
import { axisWidth, duration } from "../../ui/components/chart";
import { withGaps } from "../../ui/pages/telemetry";
import { BUCKET_MS, completeUntil } from "../../src/usage/series";
import { launchBrowser, openPage, signIn, until, type UiPage } from "../helpers/browser";
import { HOOK_MS } from "../helpers/ui-suite";
import { cleanup, waitFor } from "../helpers/proc";
import { startServing, type Serving } from "../helpers/serving";

/**
 * The charts after a restart, in the browser against a real `inferd serve` (fake vLLM answering in
 * 10.5 s, so p99 passes 10 s): the traffic from before the restart is still charted, the latency
 * axis is in seconds, and a workload without traffic in the range has no legend row.
 */
let srv: Serving;
let browser: Browser;
let ui: UiPage;
let busy: { id: string; slug: string };
let stoppedAt = 0;
let restartedAt = 0;

beforeAll(async () => {
  srv = await startServing({ FAKE_DELAY_MS: "10500" });
  busy = await srv.createWorkload({
    name: "busy",
    backend: "vllm",
    model_name: "busy",
    config: { command: "vllm serve busy" },
  });
  const idle = await srv.createWorkload({
    name: "idle",
    backend: "vllm",
    model_name: "idle",
    config: { command: "vllm serve idle" },
  });
  await Promise.all([busy, idle].map((w) => srv.waitState(w.id)));
  // Two slow answers (10.5 s each), counted once their bucket is complete.
  await Promise.all(
    [1, 2].map((n) =>
      srv
        .data(busy.slug, "/v1/chat/completions", { body: { messages: [{ role: "user", content: `slow ${n}` }] } })
        .then((r) => r.text()),
    ),
  );
  await waitFor(
    async () => {
      const a = await (await srv.admin(`/admin/metrics/series?minutes=5&workload=${busy.id}`)).json();
      return a.workloads[0].points.some((p: { rps: number | null }) => (p.rps ?? 0) > 0) || undefined;
    },
    { what: "the slow requests charted", timeoutMs: 40_000, intervalMs: 250 },
  );
  stoppedAt = Date.now();
  await srv.stop();
  // Down for a whole bucket at least, so the chart has a gap to draw.
  await waitFor(() => completeUntil() >= completeUntil(stoppedAt) + 2 * BUCKET_MS || undefined, {
    what: "a whole bucket to pass while down",
    timeoutMs: 30_000,
    intervalMs: 200,
  });
  [srv, browser] = await Promise.all([
    startServing({ FAKE_DELAY_MS: "10500", ...srv.storeEnv }, [], srv.dataDir),
    launchBrowser(),
  ]);
  restartedAt = Date.now();
  ui = await openPage(browser, srv.url);
  await signIn(ui, srv.adminToken);
}, 150_000);

afterAll(async () => {
  await browser?.close();
  await srv?.stop();
  await cleanup();
}, HOOK_MS);

describe("charts after a restart", () => {
  test("the earlier traffic is charted, latency in s past 10 s, no legend row for the idle workload", async () => {
    const { page } = ui;
    await ui.visit("/telemetry");
    const rps = page.getByRole("figure", { name: /^Requests per second\./ });
    await rps.waitFor();
    // Only traffic from before the restart exists: the busy workload's row is there, the idle one's is not.
    await rps.locator(".u-legend tr", { hasText: "busy" }).waitFor();
    expect(await page.locator(".u-legend tr", { hasText: "idle" }).count()).toBe(0);
    // The last latency charted is the slow answers' from before the restart, in seconds.
    const latency = page.getByRole("figure", {
      name: /^Latency p50 \(solid\) \/ p99 \(dashed\)\. Latest: busy p50: 1\d\.\d s, busy p99: 1\d\.\d s$/,
    });
    await latency.waitFor();
    await until(
      async () => ((await latency.getAttribute("data-y-ticks")) ?? "").split("|").filter(Boolean).length > 1,
      "the latency axis drawn",
    );
    const ticks = (await latency.getAttribute("data-y-ticks"))!.split("|");
    for (const t of ticks) expect(t).toMatch(/^\d+(\.\d)? s$/);
    // The time the server was down is a gap (null), asked of the same answer the page draws.
    const answer = await (await srv.admin("/admin/metrics/series?minutes=15")).json();
    const points: { t: string; rps: number | null }[] = answer.workloads.find(
      (w: { id: string }) => w.id === busy.id,
    ).points;
    const down = points.find((p) => Date.parse(p.t) === completeUntil(stoppedAt) + BUCKET_MS)!;
    expect(down.rps).toBeNull();
    await page.getByText("a break in a line is time the server was down").waitFor();
    // Every value axis is wider than its longest label, as the browser measures it.
    const clipped = await page.locator("figure.chart").evaluateAll((figs) =>
      figs.flatMap((f) => {
        const ctx = document.createElement("canvas").getContext("2d")!;
        ctx.font =
          '12px system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", sans-serif';
        const axis = f.querySelectorAll<HTMLElement>(".u-axis")[1];
        const widest = Math.max(
          0,
          ...(f.getAttribute("data-y-ticks") ?? "").split("|").map((l) => ctx.measureText(l).width),
        );
        if (!axis) return [`${f.getAttribute("aria-label")}: no value axis`];
        return widest + 15 > axis.getBoundingClientRect().width
          ? [`${f.getAttribute("aria-label")}: ${widest}px of labels in ${axis.getBoundingClientRect().width}px`]
          : [];
      }),
    );
    expect(clipped).toEqual([]);
    await page.getByLabel("Time range").selectOption({ label: "last 5 minutes" });
    // A few buckets after the restart, so the line on the right of the gap shows.
    const shown = completeUntil(restartedAt) / 1000 + 30;
    await until(
      async () =>
        Number(await rps.getAttribute("data-x-max")) >= shown &&
        Number(await latency.getAttribute("data-x-max")) - Number(await latency.getAttribute("data-x-min")) <= 300,
      "the 5-minute window, 30 s past the restart",
      45_000,
    );
    await ui.checkWidths("charts-restarted");
  }, 60_000);
});

describe("axis labels", () => {
  test("milliseconds below 10 s, seconds from there; the axis is as wide as its longest label", () => {
    expect([0, 2500, 5000, 7500].map((v) => duration(v, 7500))).toEqual(["0 ms", "2500 ms", "5000 ms", "7500 ms"]);
    expect([0, 5000, 10_000, 15_000].map((v) => duration(v, 15_000))).toEqual(["0 s", "5 s", "10 s", "15 s"]);
    expect(duration(12_345, 12_345)).toBe("12.3 s");
    expect(duration(0.26, 1)).toBe("0.3 ms");
    const perChar = (l: string) => l.length * 7;
    expect(axisWidth(["0 ms", "2500 ms"], perChar)).toBe(69);
    expect(axisWidth(["0 s", "5 s"], perChar)).toBe(41);
  });

  test("GPU samples with a hole get a break in the line", () => {
    expect(withGaps([0, 5, 10, 60, 65])).toEqual({ x: [0, 5, 10, 35, 60, 65], at: [0, 1, 2, null, 3, 4] });
    expect(withGaps([0, 0.3, 0.6, 0.9])).toEqual({ x: [0, 0.3, 0.6, 0.9], at: [0, 1, 2, 3] });
  });
});
