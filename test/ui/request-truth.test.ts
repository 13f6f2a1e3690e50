import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { tempDir, waitFor } from "../helpers/proc";
import { textMatching, until } from "../helpers/browser";
import { servedUi } from "../helpers/ui-suite";
import { writeTinyGguf } from "../fixtures/gguf";

/**
 * The dashboard shows what happened to every request (issue 37, items 1–4 and 9), in a real browser
 * against a real `inferd serve` with fake llama-server and vLLM runtimes: a failed request leads with
 * the runtime's own reason and its failing span is red; a key's refusals are on the Keys page and in
 * the project's requests; a request that fell back says from where to where, and the Stop dialog of
 * a workload with a fallback says so; a playground try leads to its record; the project's requests
 * are found by id, the filter lives in the address, rows open on a click, replicas are named by
 * their worker and a whole answer has no TTFT; a captured chat opens in the playground.
 */
const world = servedUi();

/** A tiny GGUF for the fake llama-server (it checks the file's magic). */
function gguf(): string {
  const path = join(tempDir("gguf"), "tiny.gguf");
  writeTinyGguf(path);
  return path;
}

/** Waits until the project's request list (API) has a row matching `q` (records are written about once a second). */
async function recorded(q: string): Promise<{ id: string; request_id: string }> {
  let row: { id: string; request_id: string } | undefined;
  await waitFor(
    async () => {
      const r = await world.srv.admin(`/admin/projects/${world.srv.project}/requests?${q}`);
      row = ((await r.json()) as { requests: { id: string; request_id: string }[] }).requests[0];
      return row ? true : undefined;
    },
    { what: `a record matching ${q}` },
  );
  return row!;
}

describe("the dashboard tells what happened to a request", () => {
  test("a runtime's 400 leads with its reason; the failing span is red; the list finds it by id, keeps the filter in the address", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    const w = await srv.createWorkload({
      name: "why-llama",
      backend: "llamacpp",
      model_name: "why-llama",
      config: { command: `llama-server -m ${gguf()} -np 2` },
    });
    await srv.waitState(w.id);
    const bad = await srv.data(w.slug, "/v1/chat/completions", {
      body: { model: "default" },
      headers: { "x-request-id": "why-400" },
    });
    expect(bad.status).toBe(400);
    const ok = await srv.data(w.slug, "/v1/chat/completions", {
      body: { messages: [{ role: "user", content: "fine" }] },
      headers: { "x-request-id": "why-ok" },
    });
    expect(ok.status).toBe(200);
    await recorded("q=why-ok");
    await recorded("q=why-400");

    // The project's requests, searched by the id the client got; the filter goes into the address.
    await ui.visit(`/projects/${srv.project}/requests`);
    await page.getByLabel("Request id, trace id or model").fill("why-400");
    await page.getByRole("button", { name: "Filter" }).click();
    const rows = page.getByTestId("request-row");
    await until(async () => (await rows.count()) === 1, "one row for the id");
    expect(new URL(page.url()).searchParams.get("q")).toBe("why-400");
    await textMatching(rows.first().getByTestId("request-reason"), /'messages' is required/, "the runtime's reason");
    await ui.checkWidths("request-truth-list");
    // A reload keeps the filter.
    await page.reload();
    await until(async () => (await rows.count()) === 1, "the filter kept after a reload");
    expect(await page.getByLabel("Request id, trace id or model").inputValue()).toBe("why-400");

    // A click on the row (not only the id) opens the request, which leads with why it failed.
    await rows.first().locator("td").nth(2).click();
    const outcome = page.getByTestId("request-outcome");
    await textMatching(outcome.getByTestId("request-reason"), /^'messages' is required$/, "the reason first");
    expect(await outcome.locator("h2").textContent()).toContain("invalid_request_error");
    const failed = page.locator("[data-testid=span-bar][data-failed=true]");
    expect(await failed.count()).toBe(1);
    expect(await failed.getAttribute("title")).toContain("upstream");
    // A whole answer has no first token: the TTFT says so rather than repeating the total.
    expect(await page.locator(".request-facts").textContent()).toContain("(not streamed)");
    await ui.checkWidths("request-truth-reason");

    // The successful one: TTFT is "–", the replica is named by its worker, not an asg_ id.
    await ui.visit(`/workloads/${w.id}/requests?status=ok`);
    await until(async () => (await rows.count()) >= 1, "the good request listed");
    const good = rows.filter({ hasText: "why-ok" });
    const cells = await good.locator("td").allTextContents();
    expect(cells.join(" ")).not.toContain("asg_");
    const workers = (await (await srv.admin("/admin/workers")).json()) as { name: string }[];
    expect(cells[cells.length - 1]).toBe(workers[0].name);
    expect(cells[cells.length - 3].trim()).toBe("–");
  });

  test("a key's refusals are on the Keys page and in the project's requests, with the reason", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    const w = await srv.createWorkload({
      name: "limited",
      backend: "vllm",
      model_name: "org/limited",
      config: { command: "vllm serve org/limited" },
    });
    await srv.waitState(w.id);
    const made = await srv.admin(`/admin/projects/${srv.project}/keys`, {
      method: "POST",
      body: { name: "bursty", type: "live", limits: { rpm: 2 } },
    });
    const key = (await made.json()) as { id: string; secret: string };
    const statuses = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        srv
          .data(w.slug, "/v1/chat/completions", {
            body: { messages: [{ role: "user", content: `burst ${i}` }] },
            token: key.secret,
          })
          .then((r) => r.status),
      ),
    );
    expect(statuses.filter((s) => s === 429).length).toBe(4);
    await recorded(`key=${key.id}&status=429`);

    await ui.visit(`/projects/${srv.project}/keys`);
    const refusals = page.getByTestId("key-refusal");
    await until(async () => (await refusals.count()) === 4, "four refusals on the Keys page");
    expect(await refusals.first().textContent()).toContain("this key may make 2 requests per minute");
    expect(await refusals.first().textContent()).toContain("bursty");
    await ui.checkWidths("request-truth-key-refusals");

    // "all of this key's" leads to the project's requests, filtered to the key's refusals.
    await refusals.first().getByRole("link", { name: "all of this key's" }).click();
    const rows = page.getByTestId("request-row");
    await until(async () => (await rows.count()) === 4, "the key's four refusals listed");
    expect(new URL(page.url()).searchParams.get("key")).toBe(key.id);
    expect(await rows.first().textContent()).toContain("refused");
    await ui.checkWidths("request-truth-refused-list");
  });

  test("a request that fell back says from where to where; Stop says the fallback answers", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    const backup = await srv.createWorkload({
      name: "backup",
      backend: "vllm",
      model_name: "org/backup",
      config: { command: "vllm serve org/backup" },
    });
    const main = await srv.createWorkload({
      name: "primary",
      backend: "vllm",
      model_name: "org/primary",
      fallbacks: [backup.slug],
      config: { command: "vllm serve org/primary" },
    });
    await Promise.all([srv.waitState(backup.id), srv.waitState(main.id)]);
    await ui.visit(`/workloads/${main.id}`);
    await page.getByRole("button", { name: "Stop" }).click();
    const dialog = page.getByRole("dialog");
    await textMatching(dialog, /fall back to backup/, "the Stop dialog names the fallback");
    expect(await dialog.textContent()).not.toContain("Requests get 503 meanwhile");
    await dialog.getByRole("button", { name: "Stop workload" }).click();
    await waitFor(
      async () => ((await srv.workload(main.id)).assignments.every((a) => a.state !== "ready") ? true : undefined),
      { what: "primary stopped" },
    );
    const r = await fetch(`${srv.url}/endpoint/${srv.project}/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${srv.live}`, "content-type": "application/json", "x-request-id": "fell-1" },
      body: JSON.stringify({ model: "org/primary", messages: [{ role: "user", content: "covered" }] }),
    });
    expect(r.status).toBe(200);
    const rec = await recorded("q=fell-1");
    await ui.visit(`/requests/${rec.id}`);
    const route = page.getByTestId("fell-back-route");
    await textMatching(route, /primary \(503 workload_unavailable\) → backup, which answered/, "the route it took");
    expect(await page.getByTestId("request-outcome").locator("h2").textContent()).toContain("Answered · 200");
    await ui.checkWidths("request-truth-fallback");
  });

  test("a playground try leads to its record; a captured chat opens in the playground", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    const w = await srv.createWorkload({
      name: "replay",
      backend: "vllm",
      model_name: "org/replay",
      config: { command: "vllm serve org/replay" },
    });
    await srv.waitState(w.id);
    await ui.visit(`/workloads/${w.id}/playground`);
    const box = page.getByRole("textbox", { name: "Message" });
    await box.fill("hello from the playground");
    await box.press("Enter");
    await page.locator(".msg.assistant .md").first().waitFor();
    await page.getByTestId("inspect-request").first().click();
    const outcome = page.getByTestId("request-outcome");
    await textMatching(outcome.locator("h2"), /Answered · 200/, "the playground try's record");
    expect(await page.locator("h2 .badge", { hasText: "playground" }).count()).toBe(1);
    await ui.checkWidths("request-truth-playground");

    // With capture on, a client's request opens in the playground with its messages and parameters.
    const until1h = new Date(Date.now() + 3_600_000).toISOString();
    expect(
      (await srv.admin(`/admin/workloads/${w.id}`, { method: "PATCH", body: { capture_until: until1h } })).status,
    ).toBe(200);
    const sent = await srv.data(w.slug, "/v1/chat/completions", {
      body: {
        temperature: 0.3,
        messages: [
          { role: "system", content: "Be brief." },
          { role: "user", content: "first question" },
          { role: "assistant", content: "first answer" },
          { role: "user", content: "replay me" },
        ],
      },
      headers: { "x-request-id": "replay-1" },
    });
    expect(sent.status).toBe(200);
    const rec = await recorded("q=replay-1");
    await ui.visit(`/workloads/${w.id}/requests/${rec.id}`);
    await page.getByTestId("open-in-playground").click();
    await until(async () => (await box.inputValue()) === "replay me", "the last message in the box");
    expect(await page.locator(".msg.user .text").allTextContents()).toEqual(["first question"]);
    expect(await page.getByLabel("Temperature").inputValue()).toBe("0.3");
    await ui.checkWidths("request-truth-replay");
  });
});
