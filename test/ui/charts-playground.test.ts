import { beforeAll, describe, expect, test } from "bun:test";
import type { Locator } from "playwright-core";
import { HOOK_MS, servedUi } from "../helpers/ui-suite";
import { textMatching, until } from "../helpers/browser";

/**
 * Truthful charts and the playground in the browser against a real `inferd serve` (fake vLLM, one
 * fake 80 GB GPU idling at 15 %): the charts end with a complete bucket (the value drawn last is the
 * server's last complete one), GPU axes are fixed (0–100 %, 0 to the memory total, shown), one time
 * range drives GPU and workload charts, p99 is dashed in its p50's colour, errors/s and time to first
 * token are charted. The playground: Enter sends and Shift+Enter adds a line, parameters reach the
 * runtime, answers are Markdown with nothing of their HTML run, tokens/s and time to first token per
 * answer, an error in place of the empty bubble; embeddings and rerank workloads get their own.
 */
let chat: { id: string; slug: string };
let embed: { id: string; slug: string };
let rerank: { id: string; slug: string };

/** One H100 whose readings do not move: the old charts autoscaled these to 0–20 % and 0–2 GiB. */
const GPUS = JSON.stringify([
  { name: "NVIDIA H100 80GB HBM3", memory_total: 81559, memory_used: 2048, utilization: 15 },
]);
const world = servedUi({ FAKE_GPUS: GPUS, FAKE_FIRST_TOKEN_MS: "40", FAKE_TOKEN_MS: "5" });

beforeAll(async () => {
  const { srv } = world;
  // A small context (64 tokens) so a large max_tokens is refused by the runtime itself.
  chat = await srv.createWorkload({
    name: "charts",
    backend: "vllm",
    model_name: "charts",
    config: { command: "vllm serve charts --max-model-len 64" },
  });
  embed = await srv.createWorkload({
    name: "vectors",
    backend: "vllm",
    model_name: "vectors",
    task_type: "embedding",
    config: { command: "vllm serve vectors" },
  });
  rerank = await srv.createWorkload({
    name: "ranker",
    backend: "vllm",
    model_name: "ranker",
    task_type: "reranker",
    config: { command: "vllm serve ranker" },
  });
  await Promise.all([chat, embed, rerank].map((w) => srv.waitState(w.id)));
}, HOOK_MS);

/** Steady traffic until stopped: a streamed chat every ~150 ms and every fifth request refused by the runtime. */
function traffic() {
  let on = true;
  const run = (async () => {
    for (let i = 0; on; i++) {
      const body =
        i % 5 === 4
          ? { prompt: "no messages" }
          : { stream: true, messages: [{ role: "user", content: `steady ${i}` }] };
      await (await world.srv.data(chat.slug, "/v1/chat/completions", { body })).text();
      await Bun.sleep(150);
    }
  })();
  return { stop: () => ((on = false), run) };
}

const attr = async (l: Locator, name: string) => Number(await l.getAttribute(name));

describe("charts tell the truth", () => {
  test("telemetry: complete buckets only, fixed GPU axes with the total, one time range, p99 dashed, errors/s and TTFT", async () => {
    const { page } = world.ui;
    const load = traffic();
    const started = Date.now();
    try {
      await world.ui.visit("/telemetry");
      const util = page.getByRole("figure", { name: /^GPU utilisation · / });
      const mem = page.getByRole("figure", { name: /^GPU memory used · .*of 79\.6 GiB per GPU/ });
      await util.waitFor();
      expect(await util.getAttribute("data-y-max")).toBe("100");
      expect(await mem.getAttribute("data-y-max")).toBe("79.6");
      await page.getByRole("figure", { name: /^GPU utilisation · .* Latest: GPU 0: 15%/ }).waitFor();

      // The value drawn last is the server's last complete bucket, not a dip into the one filling.
      const rps = page.getByRole("figure", { name: /^Requests per second\./ });
      let drawn = 0;
      await until(
        async () => {
          const a = await (await world.srv.admin(`/admin/metrics/series?minutes=15&workload=${chat.id}`)).json();
          const last = a.workloads[0].points.at(-1);
          const end = Date.parse(a.complete_until) / 1000;
          const label = (await rps.getAttribute("aria-label")) ?? "";
          drawn = last.rps;
          // A bucket the steady traffic filled from its start: had the one still filling been drawn, it would dip.
          // The idle embeddings and rerank workloads have no line (the label lists the chat workload alone).
          return (
            Date.parse(last.t) >= started &&
            (await attr(rps, "data-x-max")) === end &&
            (await attr(rps, "data-x-last")) === end - 10 &&
            last.rps > 0 &&
            label.endsWith(`Latest: charts: ${last.rps}`)
          );
        },
        "the chart's last point to be the server's last complete bucket, full of traffic",
        40_000,
      );
      expect(drawn).toBeGreaterThan(1);

      await page.getByRole("figure", { name: /^Errors per second\. Latest: charts: (0\.\d+|[1-9][\d.]*)$/ }).waitFor();
      await page
        .getByRole("figure", {
          name: /^Time to first token p50 \(solid\) \/ p99 \(dashed\)\. Latest: charts p50: \d+ ms/,
        })
        .waitFor();

      // p50 solid, p99 dashed, in one colour (the legend shows the same).
      const latency = page.getByRole("figure", { name: /^Latency p50/ });
      const marker = (name: string) =>
        latency
          .locator(".u-legend tr", { hasText: name })
          .locator(".u-marker")
          .evaluate((el) => [getComputedStyle(el).borderTopStyle, getComputedStyle(el).borderTopColor]);
      const [p50, p99] = [await marker("charts p50"), await marker("charts p99")];
      expect(p50[0]).toBe("solid");
      expect(p99[0]).toBe("dashed");
      expect(p99[1]).toBe(p50[1]);

      // One selector: every chart, GPU and workload, spans the same window, and follows it.
      const figures = page.locator("figure.chart");
      const windows = async () =>
        new Set(
          await figures.evaluateAll((fs) =>
            fs.map((f) => `${f.getAttribute("data-x-min")}-${f.getAttribute("data-x-max")}`),
          ),
        );
      expect(await figures.count()).toBe(8);
      expect((await windows()).size).toBe(1);
      await page.getByLabel("Time range").selectOption({ label: "last 5 minutes" });
      await until(async () => {
        const w = [...(await windows())];
        const [min, max] = (w[0] ?? "").split("-").map(Number);
        return (await figures.count()) === 8 && w.length === 1 && max - min <= 300;
      }, "every chart on the 5-minute window");
      await world.ui.checkWidths("charts-telemetry");
    } finally {
      await load.stop();
    }
  }, 120_000);

  test("the workload page charts its own traffic on complete buckets", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/workloads/${chat.id}`);
    const activity = page.getByRole("region", { name: "Activity" });
    const rps = activity.getByRole("figure", { name: /^Requests per second\. Latest: this workload: / });
    await rps.waitFor();
    expect((await attr(rps, "data-x-max")) - (await attr(rps, "data-x-last"))).toBe(10);
    expect(await activity.locator("figure.chart").count()).toBe(6);
    await world.ui.checkWidths("charts-workload");
  });
});

describe("the playground", () => {
  const bubbles = () => world.ui.page.locator(".chat > li");

  test("chat: Enter sends, Shift+Enter adds a line; parameters reach the runtime; Markdown answer with tokens/s and time to first token", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/workloads/${chat.id}/playground`);
    const box = page.getByRole("textbox", { name: "Message" });
    await box.fill("first line");
    await box.press("Shift+Enter");
    await box.pressSequentially("**bold** and `code`");
    expect(await box.inputValue()).toBe("first line\n**bold** and `code`");
    expect(await bubbles().count()).toBe(0);
    await box.press("Enter");
    expect(await page.locator(".msg.user .text").first().textContent()).toBe("first line\n**bold** and `code`");
    const answer = page.locator(".msg.assistant").first();
    await answer.locator("strong", { hasText: "bold" }).waitFor();
    expect(await answer.locator("code").textContent()).toBe("code");
    expect(await box.inputValue()).toBe("");
    const stats = await textMatching(answer.getByTestId("answer-stats"), /tokens\/s/, "the answer's stats");
    const m = /^(\d+) tokens · ([\d.]+) tokens\/s · first token (\d+) ms · [\d.]+ s$/.exec(stats)!;
    expect(m).not.toBeNull();
    expect(Number(m[1])).toBe(7);
    expect(Number(m[2])).toBeGreaterThan(0);
    expect(Number(m[3])).toBeGreaterThanOrEqual(40);

    // Parameters: system prompt, temperature and max tokens go with the request; 3 tokens cut the answer.
    await page.getByText("Parameters").click();
    await page.getByLabel("System prompt").fill("Be brief.");
    await page.getByLabel("Temperature").fill("0.3");
    await page.getByLabel("Max tokens").fill("3");
    const sent = page.waitForRequest((r) => r.url().endsWith(`/admin/workloads/${chat.id}/chat`));
    await box.fill("one two three four");
    await box.press("Enter");
    const body = (await sent).postDataJSON();
    expect(body).toMatchObject({ temperature: 0.3, max_tokens: 3, stream: true });
    expect(body.messages[0]).toEqual({ role: "system", content: "Be brief." });
    expect(body.messages.at(-1)).toEqual({ role: "user", content: "one two three four" });
    await textMatching(
      page.locator(".msg.assistant").nth(1).getByTestId("answer-stats"),
      /^3 tokens · /,
      "three tokens",
    );
    expect(await page.locator(".msg.assistant").nth(1).locator(".md").textContent()).toBe("You said: one\n");
    await world.ui.checkWidths("playground-chat");
  });

  test("chat: an error takes the place of the empty bubble", async () => {
    const { page } = world.ui;
    await page.getByLabel("Max tokens").fill("100000");
    await page.getByRole("textbox", { name: "Message" }).fill("too long an answer");
    await page.getByRole("textbox", { name: "Message" }).press("Enter");
    const failed = page.locator(".msg.assistant.failed");
    await failed.waitFor();
    expect(await failed.textContent()).toContain("maximum context length is 64 tokens");
    expect(await page.locator(".msg.assistant", { hasText: "…" }).count()).toBe(0);
    expect(await page.getByRole("status").textContent()).toBe("Failed");
    await until(() => world.ui.errors.length > 0, "the refused request to be logged");
    expect(world.ui.errors.splice(0)).toEqual([expect.stringContaining("400")]);
    // The failed turn is not sent back as history.
    await page.getByLabel("Max tokens").fill("");
    const sent = page.waitForRequest((r) => r.url().endsWith(`/admin/workloads/${chat.id}/chat`));
    await page.getByRole("textbox", { name: "Message" }).fill("again");
    await page.getByRole("button", { name: "Send" }).click();
    expect((await sent).postDataJSON().messages.filter((x: { role: string }) => x.role === "assistant")).toHaveLength(
      2,
    );
    await page.locator(".msg.assistant", { hasText: "You said: again" }).waitFor();
    world.ui.expectNoErrors("the chat error");
  });

  test("chat: HTML in an answer is never inserted or run", async () => {
    const { page } = world.ui;
    await page.getByRole("button", { name: "Clear" }).click();
    const evil = `<img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script> <b>x</b> [js](javascript:window.__pwned=3) [site](https://example.com/)`;
    await page.getByRole("textbox", { name: "Message" }).fill(evil);
    await page.getByRole("textbox", { name: "Message" }).press("Enter");
    const answer = page.locator(".msg.assistant").first();
    await answer.getByTestId("answer-stats").waitFor();
    expect(await answer.locator(".md").textContent()).toContain("You said:");
    // The model's raw HTML is shown as the characters it wrote, never parsed into elements.
    expect(await answer.locator(".md").textContent()).toContain(
      `<img src=x onerror="window.__pwned=1"> <script>window.__pwned=2</script> <b>x</b>`,
    );
    expect(await page.locator(".chat img, .chat script, .chat b, .chat [onerror]").count()).toBe(0);
    const js = answer.locator("a", { hasText: "js" });
    expect(await js.getAttribute("href")).toBeNull();
    const site = answer.getByRole("link", { name: "site" });
    expect(await site.getAttribute("href")).toBe("https://example.com/");
    expect(await site.getAttribute("rel")).toBe("noopener noreferrer nofollow");
    await js.click();
    expect(await page.evaluate(() => (window as { __pwned?: number }).__pwned)).toBeUndefined();
    // What the user typed shows as typed, as text.
    expect(await page.locator(".msg.user .text").textContent()).toBe(evil);
    world.ui.expectNoErrors("the unsafe answer");
  });

  test("embeddings: texts in, dimensions, a preview of each vector and their cosine similarity", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/workloads/${embed.id}/playground`);
    expect(await page.getByRole("textbox", { name: "Message" }).count()).toBe(0);
    await page
      .getByLabel("Texts, one per line")
      .fill("The cat sat on the mat.\nA dog slept on the rug.\nThe cat sat on the mat.");
    await page.getByRole("button", { name: "Embed" }).click();
    expect(await textMatching(page.getByTestId("embed-summary"), /vectors/, "the summary")).toBe(
      "3 vectors · 8 dimensions · 18 tokens",
    );
    const rows = page.getByRole("table", { name: "Vectors" }).locator("tbody tr");
    expect(await rows.count()).toBe(3);
    expect(await rows.first().locator("code").textContent()).toMatch(/^\[(-?\d\.\d{4}, ){5}-?\d\.\d{4}, …\]$/);
    const sim = page.getByRole("table", { name: "Cosine similarity" });
    const cell = (r: number, c: number) => sim.locator("tbody tr").nth(r).locator("td").nth(c).textContent();
    expect(await cell(0, 0)).toBe("1.000");
    expect(await cell(0, 2)).toBe("1.000");
    expect(Number(await cell(0, 1))).toBeLessThan(1);
    await world.ui.checkWidths("playground-embeddings");
  });

  test("rerank: a query and documents in, the documents ranked by score (a job-only workload, tried without a job)", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/workloads/${rerank.id}/playground`);
    await page.getByLabel("Query").fill("where do cats sleep");
    await page
      .getByLabel("Documents, one per line")
      .fill("The stock market fell.\ncats sleep on mats\nDogs like walks and cats");
    await page.getByRole("button", { name: "Rank" }).click();
    const rows = page.getByRole("table", { name: "Ranking" }).locator("tbody tr");
    await rows.first().waitFor();
    expect(await rows.allTextContents()).toEqual([
      "1 0.5000cats sleep on mats",
      "2 0.2000Dogs like walks and cats",
      "3 0.0000The stock market fell.",
    ]);
    await world.ui.checkWidths("playground-rerank");
    // The data plane still takes this reranker only as async jobs.
    const sync = await world.srv.data(rerank.slug, "/v1/rerank", { body: { query: "q", documents: ["d"] } });
    expect(sync.status).toBe(400);
    expect((await sync.json()).error.code).toBe("async_only");
  });

  test("the playground routes check their bodies and need the admin", async () => {
    const bad = await world.srv.admin(`/admin/workloads/${embed.id}/embeddings`, { body: { input: [] } });
    expect(bad.status).toBe(400);
    expect((await bad.json()).error).toMatchObject({ field: "input" });
    const none = await world.srv.admin(`/admin/workloads/nope/rerank`, { body: { query: "q", documents: ["d"] } });
    expect(none.status).toBe(404);
    const anon = await fetch(`${world.srv.url}/admin/workloads/${embed.id}/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input: "x" }),
    });
    expect(anon.status).toBe(401);
    const ok = await world.srv.admin(`/admin/workloads/${embed.id}/embeddings`, { body: { input: ["a", "b"] } });
    expect((await ok.json()).data).toHaveLength(2);
  });
});
