import { beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { HOOK_MS, servedUi } from "../helpers/ui-suite";
import { textMatching, until } from "../helpers/browser";

/**
 * The operations pages in the browser against a real `inferd serve` (fake vLLM, fake GPUs): a key's
 * limits edited in a dialog and enforced on the next request, a project's token quota with what it
 * used, the audit log with diffs, filters and older pages, and usage per workload/key with a CSV
 * download equal to the table. Each page at desktop and phone width, no console errors.
 */
const world = servedUi();
let workload: { id: string; slug: string };

beforeAll(async () => {
  workload = await world.srv.createWorkload({
    name: "metered",
    backend: "vllm",
    model_name: "metered-model",
    config: { command: "vllm serve metered-model" },
  });
  await world.srv.waitState(workload.id);
}, HOOK_MS);

const chat = () =>
  world.srv.data(workload.slug, "/v1/chat/completions", {
    body: { messages: [{ role: "user", content: "count me" }] },
  });
const liveKey = async () =>
  (
    (await (await world.srv.admin(`/admin/projects/${world.srv.project}/keys`)).json()) as {
      id: string;
      name: string;
      limits: Record<string, number | null>;
    }[]
  ).find((k) => k.name === "live")!;

describe("limits, quotas, audit log and usage in the dashboard", () => {
  test("a key's limits are edited in a dialog, refused at their field when wrong, and hold from the next request", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/projects/${world.srv.project}/keys`);
    const row = page.getByRole("row").filter({ hasText: /^live/ });
    await row.getByText("no limits").waitFor();
    await row.getByRole("button", { name: "Edit limits of live" }).click();
    const dialog = page.getByRole("dialog", { name: "Limits of live" });
    await dialog.getByLabel("Requests per minute").fill("ten");
    await dialog.getByText("Requests per minute: a whole number, or empty for no limit.").waitFor();
    expect(await dialog.getByRole("button", { name: "Save limits" }).isDisabled()).toBe(true);
    await dialog.getByLabel("Requests per minute").fill("0");
    await dialog.getByRole("button", { name: "Save limits" }).click();
    // The server's refusal sits under the field and is tied to it for screen readers.
    const field = dialog.getByLabel("Requests per minute");
    await until(async () => (await field.getAttribute("aria-invalid")) === "true", "the field marked invalid");
    const described = (await field.getAttribute("aria-describedby"))!;
    expect(await page.locator(`#${described}`).textContent()).toMatch(/1|greater|least/i);
    world.ui.errors.length = 0; // the browser logs the refused PATCH (400) we just provoked
    await field.fill("1");
    await dialog.getByLabel("Tokens per day").fill("1000000");
    await dialog.getByRole("button", { name: "Save limits" }).click();
    await textMatching(
      row.locator(".limits-text"),
      /^1 req\/min · 1,000,000 tokens\/day$/,
      "the key's limits in words",
    );
    expect((await liveKey()).limits).toMatchObject({ rpm: 1, tokens_per_day: 1_000_000, tpm: null });
    expect((await chat()).status).toBe(200);
    const refused = await chat();
    expect(refused.status).toBe(429);
    expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(0);
    await world.ui.checkWidths("keys-limits");
    // Emptied fields remove the limits: requests go through again at once.
    await row.getByRole("button", { name: "Edit limits of live" }).click();
    await dialog.getByLabel("Requests per minute").fill("");
    await dialog.getByLabel("Tokens per day").fill("");
    await dialog.getByRole("button", { name: "Save limits" }).click();
    await textMatching(row.locator(".limits-text"), /^no limits$/, "the limits removed");
    expect((await chat()).status).toBe(200);
  });

  test("a project's token quota: set on the project page with what it used, enforced past it", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/projects/${world.srv.project}`);
    const quotas = page.getByTestId("quotas");
    const usedToday = quotas.getByTestId("used-today");
    await textMatching(usedToday, /^[1-9][\d,]* tokens$/, "the tokens used today");
    await quotas.getByLabel("Tokens per day").fill("5000000");
    await quotas.getByRole("button", { name: "Save limits" }).click();
    await textMatching(usedToday, /^[1-9][\d,]* of 5,000,000 tokens$/, "used against the quota");
    expect((await chat()).status).toBe(200);
    // A quota below what was used today refuses the next request until the next UTC day.
    await quotas.getByLabel("Tokens per day").fill("1");
    await quotas.getByRole("button", { name: "Save limits" }).click();
    await textMatching(usedToday, /^[1-9][\d,]* of 1 token$/, "the lowered quota");
    const refused = await chat();
    expect(refused.status).toBe(429);
    expect((await refused.json()).error.code).toBe("quota_exceeded");
    await world.ui.checkWidths("project-quotas");
    await quotas.getByLabel("Tokens per day").fill("");
    await quotas.getByRole("button", { name: "Save limits" }).click();
    await textMatching(usedToday, /^[\d,]+ tokens$/, "the quota removed");
    expect((await chat()).status).toBe(200);
  });

  test("the audit log shows who changed what, filters by action and pages to older entries without gaps", async () => {
    const { page } = world.ui;
    const key = await liveKey();
    for (let i = 1; i <= 60; i++)
      expect(
        (await world.srv.admin(`/admin/keys/${key.id}`, { method: "PATCH", body: { limits: { max_concurrent: i } } }))
          .status,
      ).toBe(200);
    await world.ui.visit("/audit");
    const rows = page.getByTestId("audit-row");
    await rows.first().waitFor();
    expect(await rows.first().textContent()).toContain("max_concurrent: 59 → 60");
    expect(await rows.first().textContent()).toContain("key.limits");
    // Each change names the request that made it (its x-request-id), to match with the caller's logs.
    expect(await rows.first().getByTestId("audit-request-id").textContent()).toMatch(/^req_[0-9a-f]{32}$/);
    expect(await rows.count()).toBe(50);
    await page.getByRole("button", { name: "Older entries" }).click();
    const all = (await (await world.srv.admin("/admin/audit?limit=1000")).json()).entries as { id: number }[];
    await until(async () => (await rows.count()) === Math.min(all.length, 100), "the second page appended");
    // The quota the project page set is there with its numbers (token counts are not secrets).
    await world.ui.visit("/audit");
    await page.getByLabel("Action").fill("project");
    await page.getByRole("button", { name: "Filter" }).click();
    await until(
      async () => (await rows.count()) > 0 && (await rows.allTextContents()).every((t) => t.includes("project.")),
      "only project entries",
    );
    expect(await rows.allTextContents()).toEqual(
      expect.arrayContaining([expect.stringMatching(/tokens_per_day: none → [\d]+/)]),
    );
    await world.ui.checkWidths("audit");
    await page.getByLabel("Target").fill("no-such-thing");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.getByText("No entries match these filters.").waitFor();
  });

  test("usage per workload and key equals the traffic, with totals and the same rows as CSV", async () => {
    const { page } = world.ui;
    const w = await world.srv.workload(workload.id);
    await world.ui.visit("/usage");
    const row = page.getByTestId("usage-row").filter({ hasText: `${world.srv.project}/${workload.slug}` });
    const cells = row.getByRole("cell");
    await textMatching(cells.nth(2), new RegExp(`^${w.usage.requests}$`), "the workload's requests");
    expect(await cells.nth(4).textContent()).toBe(w.usage.input_tokens.toLocaleString("en-US"));
    expect(await cells.nth(5).textContent()).toBe(w.usage.output_tokens.toLocaleString("en-US"));
    await world.ui.checkWidths("usage");
    await page.getByLabel("Group by").selectOption("key");
    await page.getByTestId("usage-row").filter({ hasText: "live (" }).waitFor();
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("link", { name: "Download CSV" }).click(),
    ]);
    const csv = readFileSync((await download.path())!, "utf8")
      .trim()
      .split("\n");
    expect(csv[0]).toBe("day,key_id,key,requests,errors,input_tokens,output_tokens");
    const shown = await page.getByTestId("usage-row").count();
    expect(csv.length - 1).toBe(shown);
    const total = csv.slice(1).reduce((n, l) => n + Number(l.split(",").at(-4)), 0);
    expect(await page.getByTestId("usage-total").getByRole("cell").first().textContent()).toBe(
      total.toLocaleString("en-US"),
    );
  });
});
