import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Browser } from "playwright-core";
import { servingPool, type Serving } from "../helpers/serving";
import { cleanup, tempDir, waitFor } from "../helpers/proc";
import { spawnAgent } from "../helpers/agents";
import { SCREENSHOTS } from "../helpers/browser";
import type { Page } from "playwright-core";
import { launchBrowser, openPage, PHONE, DESKTOP, signIn, textMatching, until, type UiPage } from "../helpers/browser";

/**
 * The dashboard's shell as a user meets it: where inferd listens (the loopback-only warning with the
 * exact restart command, snippets and join commands on the advertised host), the API docs offline,
 * navigation and accessibility (current section, focus on the heading, not-found pages, phones,
 * badge contrast), and the overview's banner, traffic summary and per-project counts.
 */
const HOOK_MS = 90_000;
const pool = servingPool();
let srv: Serving;
let advertised: Serving;
let browser: Browser;
let ui: UiPage;

beforeAll(async () => {
  [srv, advertised, browser] = await Promise.all([
    pool.serve(),
    pool.serve({ INFERD_ADVERTISE_HOST: "inferd.test", INFERD_LOCAL_AGENT: "0", INFERD_WORKER_TIMEOUT_MS: "2500" }),
    launchBrowser(),
  ]);
  ui = await openPage(browser, srv.url);
  await signIn(ui, srv.adminToken);
}, HOOK_MS);
afterAll(async () => {
  await browser?.close();
  await pool.stopAll();
  await cleanup();
}, HOOK_MS);

describe("where inferd listens", () => {
  test("loopback-only: workers and snippets say so plainly, with the exact restart command", async () => {
    const { page } = ui;
    await ui.visit("/workers");
    const warning = await textMatching(page.getByTestId("listen-warning"), /listens on/, "the loopback warning");
    expect(warning).toContain("inferd listens on 127.0.0.1 only: other machines cannot connect to it.");
    // The command inferd was started with (these tests run it as `bun src/main.ts`; the binary says `inferd`).
    expect(warning).toContain("restart it with bun src/main.ts serve --host 0.0.0.0 (or set INFERD_HOST=0.0.0.0)");
    await page.getByText("Add a worker").click();
    await page.getByLabel("Worker name").fill("gpu-box-2");
    await page.getByRole("button", { name: "Add worker" }).click();
    const port = new URL(srv.url).port;
    await textMatching(
      page.getByTestId("join").locator("pre code"),
      /^inferd agent join https:\/\/127\.0\.0\.1:\d+ --token /,
      "the join command",
    );
    const w = await srv.createWorkload({
      name: "lan",
      backend: "vllm",
      model_name: "lan-model",
      config: { command: "vllm serve lan-model" },
    });
    await ui.visit(`/workloads/${w.id}`);
    await page.getByTestId("listen-warning").waitFor();
    expect(await page.locator(".snippets pre code").first().textContent()).toContain(
      `http://127.0.0.1:${port}/endpoint/${srv.project}/v1/chat/completions`,
    );
    expect(await page.getByTestId("workload-snippets").locator("pre code").first().textContent()).toContain(
      `http://127.0.0.1:${port}/endpoint/${srv.project}/lan/v1`,
    );
    await ui.checkWidths("listen-loopback");
  });

  test("with --advertise-host the snippets and the join command use that host, and no warning shows", async () => {
    const other = await openPage(browser, advertised.url);
    await signIn(other, advertised.adminToken);
    const w = await advertised.createWorkload({
      name: "adv",
      backend: "vllm",
      model_name: "adv-model",
      config: { command: "vllm serve adv-model" },
    });
    await other.visit(`/workloads/${w.id}`);
    const port = new URL(advertised.url).port;
    await textMatching(
      other.page.getByTestId("listen-lan"),
      new RegExp(`reach inferd at http://inferd\\.test:${port}`),
      "the LAN address",
    );
    expect(await other.page.locator(".snippets pre code").first().textContent()).toContain(
      `curl http://inferd.test:${port}/endpoint/${advertised.project}/v1/chat/completions`,
    );
    expect(await other.page.getByTestId("workload-snippets").locator("pre code").first().textContent()).toContain(
      `curl http://inferd.test:${port}/endpoint/${advertised.project}/adv/v1/chat/completions`,
    );
    expect(await other.page.getByTestId("listen-warning").count()).toBe(0);
    await other.checkWidths("listen-advertised");
    await other.visit("/workers");
    await other.page.getByText("Add a worker").click();
    await other.page.getByLabel("Worker name").fill("gpu-box-3");
    await other.page.getByRole("button", { name: "Add worker" }).click();
    await textMatching(
      other.page.getByTestId("join").locator("pre code"),
      /^inferd agent join https:\/\/inferd\.test:\d+ --token /,
      "the join command",
    );
    await other.context.close();
  });
});

describe("API docs", () => {
  test("/docs renders the API's operations with every non-loopback request aborted, linked from the sidebar", async () => {
    const docs = await openPage(browser, srv.url);
    const outside: string[] = [];
    await docs.context.route("**/*", (route) => {
      const host = new URL(route.request().url()).hostname;
      if (host === "127.0.0.1" || host === "localhost" || host === "[::1]") return route.continue();
      outside.push(route.request().url());
      return route.abort();
    });
    await signIn(docs, srv.adminToken);
    await docs.page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "API docs" }).click();
    await docs.page.waitForURL("**/docs");
    await docs.page.locator(".opblock").first().waitFor();
    // Swagger UI renders only the operations near the view (about 20 at a time): walk down the page a
    // little less than a screen at a time, each step once what is in view has rendered, and note
    // every operation seen.
    const seen = new Set<string>();
    for (let y = 0; !(seen.has("/admin/projects") && seen.size > 20); y += 400) {
      const height = await docs.page.evaluate(
        (to) => (window.scrollTo(0, to), document.documentElement.scrollHeight),
        y,
      );
      if (y > height) break;
      await until(
        () =>
          docs.page.evaluate(() =>
            [...document.querySelectorAll(".opblock")].some(
              (el) => el.getBoundingClientRect().bottom > 0 && el.getBoundingClientRect().top < innerHeight,
            ),
          ),
        "the operations in view",
      );
      for (const path of await docs.page.locator(".opblock-summary-path").allTextContents()) seen.add(path);
    }
    expect(seen.has("/admin/projects")).toBe(true);
    expect(seen.size).toBeGreaterThan(20);
    await docs.page.evaluate(() => window.scrollTo(0, 0));
    await textMatching(docs.page.locator(".info .title"), /inferd/, "the API's title");
    expect(outside).toEqual([]);
    await docs.checkWidths("docs-offline");
    await docs.context.close();
  });
});

/** The focused element's tag and text. */
const focused = (page: Page) =>
  page.evaluate(() => `${document.activeElement?.tagName} ${document.activeElement?.textContent?.trim()}`);

/** Contrast ratio (WCAG) of every badge colour pair on the page, from the computed CSS. */
const badgeContrasts = (page: Page) =>
  page.evaluate(() => {
    const states = new Set<string>();
    const visit = (rules: CSSRuleList) => {
      for (const r of rules) {
        if (r instanceof CSSStyleRule) for (const m of r.selectorText.matchAll(/\.state-([\w-]+)/g)) states.add(m[1]);
        else if ("cssRules" in r) visit((r as CSSGroupingRule).cssRules);
      }
    };
    for (const sheet of document.styleSheets) visit(sheet.cssRules);
    const host = document.createElement("div");
    document.getElementById("main")!.append(host);
    const rgb = (c: string) => (c.match(/[\d.]+/g) ?? []).slice(0, 4).map(Number);
    const lum = ([r, g, b]: number[]) => {
      const f = (v: number) => ((v /= 255) <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4);
      return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
    };
    const background = (el: Element | null): number[] => {
      for (; el; el = el.parentElement) {
        const c = rgb(getComputedStyle(el).backgroundColor);
        if (c.length === 3 || (c.length === 4 && c[3] > 0)) return c;
      }
      return [255, 255, 255];
    };
    const out: { state: string; ratio: number; color: string; background: string }[] = [];
    for (const state of ["", ...states]) {
      const badge = document.createElement("span");
      badge.className = `badge ${state ? `state-${state}` : ""}`;
      badge.textContent = state || "plain";
      host.append(badge);
      const fg = rgb(getComputedStyle(badge).color);
      const bg = background(badge);
      const [a, b] = [lum(fg), lum(bg)];
      out.push({
        state: state || "(plain)",
        ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05),
        color: getComputedStyle(badge).color,
        background: `rgb(${bg.join(", ")})`,
      });
    }
    host.remove();
    return out;
  });

describe("navigation and accessibility", () => {
  test("the sidebar marks Projects on a workload's pages; focus moves to the page heading after each navigation", async () => {
    const { page } = ui;
    await ui.visit("/");
    const nav = page.getByRole("navigation", { name: "Main" });
    await nav.getByRole("link", { name: "Workers" }).click();
    await until(async () => (await focused(page)) === "H1 Workers", "focus on the Workers heading");
    const w = await srv.createWorkload({
      name: "nav",
      backend: "vllm",
      model_name: "nav-model",
      config: { command: "vllm serve nav-model" },
    });
    await nav.getByRole("link", { name: "Projects" }).click();
    await until(async () => (await focused(page)) === "H1 Projects", "focus on the Projects heading");
    await page.getByRole("link", { name: "Serving", exact: true }).click();
    await page.getByRole("link", { name: "nav", exact: true }).click();
    await until(async () => (await focused(page)) === "H1 nav", "focus on the workload's heading");
    expect(await nav.getByRole("link", { name: "Projects" }).getAttribute("aria-current")).toBe("page");
    expect(await nav.locator("[aria-current=page]").count()).toBe(1);
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Logs" }).click();
    await until(async () => (await focused(page)) === "H1 nav", "focus on the heading of the Logs tab");
    expect(await nav.getByRole("link", { name: "Projects" }).getAttribute("aria-current")).toBe("page");
    await ui.visit(`/workloads/${w.id}`);
  });

  test("an unknown URL shows a not-found page, and a missing workload or project offers a way back", async () => {
    const { page } = ui;
    await ui.visit("/no/such/page");
    await page.getByRole("heading", { name: "Not found", level: 1 }).waitFor();
    expect(await page.getByTestId("not-found").textContent()).toContain(
      "Nothing lives at /no/such/page in the dashboard.",
    );
    expect(await page.locator("body").textContent()).not.toContain('"error"');
    await ui.checkWidths("not-found");
    for (const path of ["/workloads/wl_missing", "/workloads/wl_missing/logs", "/projects/nope/keys"]) {
      await ui.visit(path);
      await page.getByRole("heading", { name: "Not found", level: 1 }).waitFor();
      expect(await page.getByTestId("not-found").textContent()).toMatch(
        /There is no (workload wl_missing|project nope) \(it may have been deleted\)\./,
      );
      // The browser logs the 404 answers of the admin API itself; those are expected.
      expect(ui.errors.splice(0).every((e) => e.includes("404"))).toBe(true);
    }
    await ui.checkWidths("not-found-workload");
    // A workload deleted while its page is open turns into the same page (its polls stop).
    const doomed = await srv.createWorkload({
      name: "doomed",
      backend: "vllm",
      model_name: "doomed-model",
      config: { command: "vllm serve doomed-model" },
    });
    await ui.visit(`/workloads/${doomed.id}`);
    await page.getByRole("heading", { name: "doomed", level: 1 }).waitFor();
    expect((await srv.admin(`/admin/workloads/${doomed.id}`, { method: "DELETE" })).status).toBeLessThan(300);
    await textMatching(
      page.getByTestId("not-found"),
      new RegExp(`There is no workload ${doomed.id} any more \\(it was deleted\\)\\.`),
      "the deleted workload's page",
    );
    ui.errors.splice(0); // the 404s of the polls that found it gone
    await page.getByRole("link", { name: "All projects" }).click();
    await until(async () => (await focused(page)) === "H1 Projects", "the projects page after the way back");
  });

  test("on a phone: workload tabs all show (Edit too), the keys table scrolls in its box with a hint, the page never sideways", async () => {
    const { page } = ui;
    const w = (await (await srv.admin(`/admin/projects/${srv.project}/workloads`)).json()).find(
      (x: { slug: string }) => x.slug === "nav",
    );
    await page.setViewportSize(PHONE);
    try {
      await ui.visit(`/workloads/${w.id}`);
      const edit = page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Edit" });
      const box = (await edit.boundingBox())!;
      expect(box.x).toBeGreaterThanOrEqual(0);
      expect(box.x + box.width).toBeLessThanOrEqual(PHONE.width);
      expect(await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(
        1,
      );
      await page.screenshot({ path: `${SCREENSHOTS}/phone-workload-tabs.png` });
      await ui.visit(`/projects/${srv.project}/keys`);
      const wrap = page
        .locator(".table-wrap")
        .filter({ has: page.getByRole("button", { name: "Revoke" }) })
        .first();
      await until(
        async () => (await wrap.getAttribute("class"))?.includes("overflows") ?? false,
        "the keys table marked as wider than its box",
      );
      expect(await wrap.evaluate((el) => getComputedStyle(el, "::before").content)).toContain(
        "Scroll sideways for more",
      );
      expect(await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(
        1,
      );
      await page.screenshot({ path: `${SCREENSHOTS}/phone-keys-hint.png` });
      const revoke = page.getByRole("button", { name: "Revoke" }).first();
      await revoke.scrollIntoViewIfNeeded();
      const r = (await revoke.boundingBox())!;
      expect(r.x + r.width).toBeLessThanOrEqual(PHONE.width);
      expect(r.x).toBeGreaterThanOrEqual(0);
    } finally {
      await page.setViewportSize(DESKTOP);
    }
  });

  test("a worker added but never joined says waiting to join, not offline", async () => {
    const { page } = ui;
    await ui.visit("/workers");
    const card = page.getByRole("listitem", { name: "Worker gpu-box-2" });
    await card.getByText("waiting to join", { exact: true }).waitFor();
    expect(await card.locator(".badge").first().textContent()).toBe("waiting to join");
    expect(await card.locator(".state-offline").count()).toBe(0);
    // The overview counts it apart, not as a worker that is down.
    await ui.visit("/");
    const stat = ui.page.locator(".stat", { hasText: "workers online" });
    await textMatching(stat, /^\s*\d+\/\d+\s*workers online · 1 waiting to join\s*$/, "the workers stat");
  });

  test("every badge colour pair reaches 4.5:1 contrast, light and dark", async () => {
    const { page } = ui;
    for (const scheme of ["light", "dark"] as const) {
      await page.emulateMedia({ colorScheme: scheme });
      await ui.visit("/workers");
      const pairs = await badgeContrasts(page);
      expect(pairs.length).toBeGreaterThan(10);
      const low = pairs.filter((p) => p.ratio < 4.5);
      expect(low).toEqual([]);
      await page.screenshot({ path: `${SCREENSHOTS}/badges-${scheme}.png` });
    }
    await page.emulateMedia({ colorScheme: "light" });
  });
});

describe("overview and projects", () => {
  test("the projects list shows each project's workloads and live keys", async () => {
    const { page } = ui;
    const made = await (await srv.admin("/admin/projects", { body: { name: "Counts", slug: "counts" } })).json();
    const keys = await Promise.all(
      ["a", "b"].map(async (name) =>
        (await srv.admin(`/admin/projects/${made.slug}/keys`, { body: { name, type: "live" } })).json(),
      ),
    );
    expect((await srv.admin(`/admin/keys/${keys[0].id}`, { method: "DELETE" })).status).toBe(200);
    expect(
      (
        await srv.admin(`/admin/projects/${made.slug}/workloads`, {
          body: { name: "one", backend: "ollama", model_name: "llama3" },
        })
      ).status,
    ).toBe(201);
    const listed = await (await srv.admin("/admin/projects")).json();
    expect(listed.find((p: { slug: string }) => p.slug === "counts")).toMatchObject({
      workload_count: 1,
      key_count: 1,
    });
    /** The workload and key cells of a project's row, as shown. */
    const counts = async (name: string) => {
      const row = page.getByTestId("project-row").filter({ has: page.getByRole("link", { name, exact: true }) });
      await row.waitFor();
      return [await row.locator("td").nth(2).textContent(), await row.locator("td").nth(3).textContent()];
    };
    await ui.visit("/projects");
    expect(await counts("Counts")).toEqual(["1", "1 live key"]);
    const serving = listed.find((p: { slug: string }) => p.slug === srv.project);
    expect(serving.key_count).toBe(2);
    expect(await counts("Serving")).toEqual([String(serving.workload_count), "2 live keys"]);
    await page
      .getByTestId("project-row")
      .filter({ hasText: "Counts" })
      .getByRole("link", { name: "1 live key" })
      .click();
    await page.getByRole("heading", { name: "Counts", level: 1 }).waitFor();
    expect(page.url()).toEndWith("/projects/counts/keys");
    await ui.visit("/projects");
    await ui.checkWidths("projects-counts");
  });

  test("the overview sums the last hour's requests, errors and tokens", async () => {
    const { page } = ui;
    const w = await srv.createWorkload({
      name: "traffic",
      backend: "vllm",
      model_name: "traffic-model",
      config: { command: "vllm serve traffic-model --max-model-len 64" },
    });
    await srv.waitState(w.id);
    for (let i = 0; i < 3; i++)
      expect(
        (
          await srv.data(w.slug, "/v1/chat/completions", {
            body: { model: "default", messages: [{ role: "user", content: `hello ${i}` }] },
          })
        ).status,
      ).toBe(200);
    const tooLong = await srv.data(w.slug, "/v1/chat/completions", {
      body: { model: "default", messages: [{ role: "user", content: "word ".repeat(400) }] },
    });
    expect(tooLong.status).toBe(400);
    const totals = await waitFor(
      async () => {
        const s = await (await srv.admin("/admin/metrics/series?minutes=60")).json();
        const sum = (f: (p: Record<string, number>) => number) =>
          Math.round(
            s.workloads
              .flatMap((x: { points: Record<string, number>[] }) => x.points)
              .reduce((n: number, p: Record<string, number>) => n + f(p) * s.interval_s, 0),
          );
        const t = {
          requests: sum((p) => p.rps),
          errors: sum((p) => p.errors_per_s),
          tokens: sum((p) => p.tokens_per_s),
        };
        return t.requests === 4 ? t : undefined;
      },
      { what: "four requests in the series" },
    );
    expect(totals.errors).toBe(1);
    expect(totals.tokens).toBeGreaterThan(0);
    await ui.visit("/");
    const traffic = page.getByTestId("traffic");
    await textMatching(traffic, /(^|\D)4 requests/, "the last hour's requests");
    const text = (await traffic.textContent())!;
    expect(text).toContain("Last hour");
    expect(text).toContain("1 error");
    expect(text).toContain(`${totals.tokens.toLocaleString("en-US")} tokens`);
    await ui.checkWidths("overview-traffic");
  });

  test("a failed replica and an offline worker show in a banner with links to act on them", async () => {
    const other = await openPage(browser, advertised.url);
    await signIn(other, advertised.adminToken);
    const { page } = other;
    const created = await (await advertised.admin("/admin/workers", { body: { name: "flaky" } })).json();
    const [, , , joinUrl, , token] = (created.join_command as string).split(" ");
    const agent = spawnAgent(
      ["join", joinUrl.replace("inferd.test", "127.0.0.1"), "--token", token],
      tempDir("agent-flaky"),
    );
    try {
      const broken = await advertised.createWorkload({
        name: "broken",
        backend: "vllm",
        model_name: "m",
        config: { command: "no-such-vllm-binary serve m" },
      });
      await advertised.waitState(broken.id, "failed", 60_000);
      await other.visit("/");
      const banner = page.getByTestId("attention");
      await textMatching(banner, /broken: a replica failed on flaky/, "the failed replica in the banner");
      expect(await banner.getByRole("heading", { name: "Needs attention" }).count()).toBe(1);
      expect(await banner.getByRole("link", { name: "Logs" }).getAttribute("href")).toBe(
        `/workloads/${broken.id}/logs`,
      );
      expect(await banner.getByRole("link", { name: "Open workload" }).getAttribute("href")).toBe(
        `/workloads/${broken.id}`,
      );
      await other.checkWidths("overview-attention-failed");
      agent.proc.kill("SIGKILL");
      await agent.proc.exited;
      await textMatching(banner, /flaky: worker offline, last seen/, "the offline worker in the banner");
      await other.checkWidths("overview-attention-offline");
      await banner.getByRole("link", { name: "Workers" }).click();
      await page.getByRole("heading", { name: "Workers", level: 1 }).waitFor();
    } finally {
      agent.proc.kill("SIGKILL");
      await other.context.close();
    }
  });
});
