import { beforeAll, describe, expect, test } from "bun:test";
import type { Locator } from "playwright-core";
import { HOOK_MS, servedUi } from "../helpers/ui-suite";
import { until } from "../helpers/browser";
import { headroom } from "../../ui/components/chart";
import { combine, splitSeries, type BucketSummary } from "../../src/usage/series";

/**
 * The charts tell the truth (issue 37, item 14), in a real browser against a real `inferd serve`
 * (fake vLLM): the value axis leaves room above the peak (the highest point is never cut at the top
 * edge), the time axis starts where the server started (no empty hour before it), legends name
 * workloads and keys in words (not `project/slug` or key ids), and the request charts split by key
 * and by priority class, so each key's share of the traffic can be seen.
 */
const world = servedUi({ FAKE_FIRST_TOKEN_MS: "10", FAKE_TOKEN_MS: "2" });

let chat: { id: string; slug: string };
let alpha: { id: string; prefix: string; secret: string };
let bravo: { id: string; prefix: string; secret: string };

/** A live key of the test project, with limits (a priority) when given. */
async function key(name: string, limits?: Record<string, unknown>) {
  const r = await world.srv.admin(`/admin/projects/${world.srv.project}/keys`, {
    body: { name, type: "live", ...(limits ? { limits } : {}) },
  });
  expect(r.status).toBe(201);
  return (await r.json()) as { id: string; prefix: string; secret: string };
}

/** `n` chat requests with a key's secret, a few at a time; every one answered 200. */
async function burst(secret: string, n: number) {
  for (let i = 0; i < n; i += 4) {
    const statuses = await Promise.all(
      Array.from({ length: Math.min(4, n - i) }, (_, j) =>
        world.srv
          .data(chat.slug, "/v1/chat/completions", {
            token: secret,
            body: { messages: [{ role: "user", content: `burst ${i + j}` }] },
          })
          .then(async (r) => (await r.text(), r.status)),
      ),
    );
    expect(statuses.every((s) => s === 200)).toBe(true);
  }
}

/** The requests of each line of a split answer, added up over its points (rate × bucket width). */
async function splitTotals(by: string): Promise<Record<string, number>> {
  const a = await (await world.srv.admin(`/admin/metrics/split?by=${by}&minutes=15`)).json();
  return Object.fromEntries(
    a.splits.map((s: { label: string; points: { rps: number | null }[] }) => [
      s.label,
      Math.round(s.points.reduce((n, p) => n + (p.rps ?? 0) * a.interval_s, 0)),
    ]),
  );
}

const num = async (l: Locator, name: string) => Number((await l.getAttribute(name)) ?? Number.NaN);
const legend = (figure: Locator) => figure.locator(".u-legend tr").allTextContents();

beforeAll(async () => {
  chat = await world.srv.createWorkload({
    name: "chat",
    backend: "vllm",
    model_name: "chat",
    config: { command: "vllm serve chat" },
  });
  [alpha, bravo] = await Promise.all([key("alpha"), key("bravo", { priority: "batch" })]);
  await world.srv.waitState(chat.id);
  await Promise.all([burst(alpha.secret, 12), burst(bravo.secret, 6)]);
  // Counted once their bucket is complete (at most 10 s on).
  await until(
    async () => {
      const t = await splitTotals("key");
      return Object.values(t).reduce((a, b) => a + b, 0) >= 18;
    },
    "the burst charted",
    40_000,
  );
}, HOOK_MS);

describe("charts tell the truth", () => {
  test("the value axis fits the peak, time starts with the server, legends are names", async () => {
    const { page } = world.ui;
    const info = await (await world.srv.admin("/admin/info")).json();
    const started = Date.parse(info.started_at) / 1000;
    await world.ui.visit("/telemetry");
    await page.getByLabel("Time range").selectOption({ label: "last hour" });
    const rps = page.getByRole("figure", { name: /^Requests per second\./ });
    await rps.waitFor();
    await until(
      async () => (await num(rps, "data-y-peak")) > 0 && !!(await rps.getAttribute("data-y-top")),
      "the peak drawn",
    );
    // The axis ends above the peak, at the round number the chart picks for it: the highest point is whole.
    const peak = await num(rps, "data-y-peak");
    expect(await num(rps, "data-y-top")).toBe(headroom(peak));
    expect(await num(rps, "data-y-top")).toBeGreaterThan(peak);
    // Every chart starts in the bucket the server started in, not an hour back.
    await until(
      async () => (await num(rps, "data-x-max")) - (await num(rps, "data-x-min")) < 3600,
      "a window shorter than the hour",
    );
    const starts = await page
      .locator("figure.chart")
      .evaluateAll((fs) => fs.map((f) => Number(f.getAttribute("data-x-min"))));
    for (const s of starts) {
      expect(s).toBeGreaterThanOrEqual(Math.floor(started / 10) * 10 - 10);
      expect(s).toBeLessThanOrEqual(started + 10);
    }
    // Legends name the workload as its people do: "chat", its p50 and p99, never "serving/chat".
    await until(async () => (await legend(rps)).some((t) => t.startsWith("chat")), "the workload's legend row");
    const latency = page.getByRole("figure", { name: /^Latency p50/ });
    const rows = await legend(latency);
    expect(rows.some((t) => t.startsWith("chat p50"))).toBe(true);
    expect(rows.some((t) => t.startsWith("chat p99"))).toBe(true);
    expect((await page.locator("figure.chart .u-legend").allTextContents()).join(" ")).not.toContain("serving/");
    await world.ui.checkWidths("truth-charts-telemetry");
  }, 120_000);

  test("one line per key and per priority class: each key's share of the requests", async () => {
    const { page } = world.ui;
    // The server's split adds up to what was sent: 12 with alpha, 6 with bravo (batch).
    const byKey = await splitTotals("key");
    expect(byKey[`alpha (${alpha.prefix}…)`]).toBe(12);
    expect(byKey[`bravo (${bravo.prefix}…)`]).toBe(6);
    const byClass = await splitTotals("priority");
    expect(Object.entries(byClass).map(([l, n]) => `${l.split(" ")[0]}=${n}`)).toEqual(["Interactive=12", "Batch=6"]);

    await world.ui.visit("/telemetry");
    await page.getByLabel("One line per").selectOption("key");
    const keyRps = page.getByRole("figure", { name: /^Requests per second by key\./ });
    await keyRps.waitFor();
    await until(async () => {
      const rows = (await legend(keyRps)).join("|");
      return rows.includes(`alpha (${alpha.prefix}…)`) && rows.includes(`bravo (${bravo.prefix}…)`);
    }, "a legend row per key, by its name");
    for (const title of ["Tokens per second by key", "Errors per second by key", "Mean latency by key"])
      await page.getByRole("figure", { name: new RegExp(`^${title}\\.`) }).waitFor();
    await world.ui.checkWidths("truth-charts-by-key");

    await page.getByLabel("One line per").selectOption("priority");
    const classRps = page.getByRole("figure", { name: /^Requests per second by priority\./ });
    await classRps.waitFor();
    await until(async () => {
      const rows = await legend(classRps);
      return (
        rows.some((t) => /^Interactive\W/.test(t)) &&
        rows.some((t) => t.startsWith("Batch (jobs and batch-priority keys)"))
      );
    }, "a legend row per priority class, in words");
    await world.ui.checkWidths("truth-charts-by-priority");

    // The workload's own page splits the same way.
    await world.ui.visit(`/workloads/${chat.id}`);
    await page.getByLabel("One line per").selectOption("key");
    const own = page.getByRole("figure", { name: /^Requests per second by key\./ });
    await until(
      async () => (await legend(own)).join("|").includes(`alpha (${alpha.prefix}…)`),
      "the key split on the workload page",
    );
    world.ui.expectNoErrors("the workload page split by key");

    // A split the server does not know is a 400 naming the field, never a 500.
    const bad = await world.srv.admin("/admin/metrics/split?by=nope");
    expect(bad.status).toBe(400);
    expect(JSON.stringify(await bad.json())).toContain("by");
  }, 120_000);

  test("the pure parts: the axis's top, the split of a bucket, summaries of two hosts added", () => {
    expect([headroom(0), headroom(7.3), headroom(1.8), headroom(100), headroom(0.05)]).toEqual([1, 8, 2, 120, 0.06]);
    const a = { requests: 2, errors: 1, tokens: 20, ms: 100 };
    const lines = splitSeries(
      [
        { t: 0, up: false, splits: {} },
        { t: 10_000, up: true, splits: { "sync:k1": a, "job:k1": a, "sync:k2": a } },
      ],
      (k) => (k.startsWith("job:") || k === "sync:k2" ? "batch" : "interactive"),
    );
    expect([...lines.keys()]).toEqual(["interactive", "batch"]);
    expect(lines.get("batch")).toEqual([
      { t: "1970-01-01T00:00:00.000Z", rps: null, errors_per_s: null, tokens_per_s: null, mean_ms: null },
      { t: "1970-01-01T00:00:10.000Z", rps: 0.4, errors_per_s: 0.2, tokens_per_s: 4, mean_ms: 50 },
    ]);
    const part = (splits: BucketSummary["splits"]) => ({ ...combine([], "sum"), splits });
    expect(combine([part({ "sync:k1": a }), part({ "sync:k1": a, "sync:k2": a })], "sum").splits).toEqual({
      "sync:k1": { requests: 4, errors: 2, tokens: 40, ms: 200 },
      "sync:k2": a,
    });
  });
});
