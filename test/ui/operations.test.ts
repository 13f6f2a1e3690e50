import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Browser } from "playwright-core";
import { startServing, type Serving } from "../helpers/serving";
import { cleanup, tempDir } from "../helpers/proc";
import { launchBrowser, openPage, signIn, textMatching, until, type UiPage } from "../helpers/browser";
import { makeTestPki } from "../fixtures/tls";
import { startReceiver, type Receiver } from "../fixtures/receiver";
import { startDns, type DnsServer } from "../fixtures/dns";

/**
 * Keys, webhooks, workers and telemetry in the browser against a real `inferd serve` (fake vLLM,
 * 2 fake GPUs, real HTTPS webhook receivers): create a key (secret once) and revoke it with its
 * usage shown, add and test-ping destinations and follow a job's deliveries, watch GPUs live, add
 * and delete a worker, and see the charts. Every page at desktop and phone width, no console errors.
 */
/** Hooks start (or stop) a server, runtimes and chromium on possibly busy cores. */
const HOOK_MS = 90_000;
let srv: Serving;
let browser: Browser;
let ui: UiPage;
let ok: Receiver;
let failing: Receiver;
let dns: DnsServer;
let workload: { id: string; slug: string };

beforeAll(async () => {
  const pki = makeTestPki(tempDir("pki"), ["localhost"]);
  [ok, failing, dns] = await Promise.all([
    startReceiver({ pki, behaviour: () => ({ status: 200, body: "thanks" }) }),
    startReceiver({ pki, behaviour: () => ({ status: 500, body: "down" }) }),
    startDns({ records: { localhost: ["127.0.0.1"] } }),
  ]);
  [srv, browser] = await Promise.all([
    startServing({
      INFERD_ALLOW_PRIVATE_WEBHOOKS: "1",
      INFERD_WEBHOOK_CA_FILE: pki.caFile,
      INFERD_WEBHOOK_DNS_SERVERS: dns.server,
    }),
    launchBrowser(),
  ]);
  workload = await srv.createWorkload({
    name: "jobs",
    backend: "vllm",
    model_name: "job-model",
    config: { command: "vllm serve job-model" },
  });
  ui = await openPage(browser, srv.url);
  await signIn(ui, srv.adminToken);
  await srv.waitState(workload.id);
}, HOOK_MS);
afterAll(async () => {
  await browser?.close();
  await srv?.stop();
  await Promise.all([ok?.close(), failing?.close(), dns?.close()]);
  await cleanup();
}, HOOK_MS);

const chat = (token: string) =>
  srv.data(workload.slug, "/v1/chat/completions", { token, body: { messages: [{ role: "user", content: "hi" }] } });

describe("operating inferd in the browser", () => {
  test("overview and projects show what runs", async () => {
    const { page } = ui;
    await ui.visit("/");
    await page.locator("table .badge", { hasText: "ready" }).waitFor();
    expect(await page.getByRole("link", { name: "serving/jobs" }).count()).toBe(1);
    await ui.checkWidths("overview");
    await ui.visit(`/projects/${srv.project}`);
    await page.getByRole("link", { name: "jobs" }).waitFor();
    await ui.checkWidths("project-workloads");
  });

  test("keys: an endpoint-scoped live key, secret shown once, usage counted, revoked", async () => {
    const { page } = ui;
    await ui.visit(`/projects/${srv.project}/keys`);
    await page.getByLabel("Name").fill("browser-app");
    await page.getByRole("radio", { name: /Only some endpoints/ }).check();
    await page.getByRole("checkbox", { name: `${srv.project}/${workload.slug}` }).check();
    await page.getByRole("button", { name: "Create key" }).click();
    const secret = (await page.getByTestId("secret").textContent())!;
    expect(secret).toStartWith("ik_live_");
    await page.getByText("you will not see this again").waitFor();
    await ui.checkWidths("keys-created");
    await page.getByRole("button", { name: "I have copied it" }).click();
    expect(await page.getByTestId("secret").count()).toBe(0);
    expect((await chat(secret)).status).toBe(200);
    const row = page.getByRole("row").filter({ hasText: "browser-app" });
    expect(await row.getByRole("cell").nth(2).textContent()).toBe(`${srv.project}/${workload.slug} `);
    await textMatching(row.getByRole("cell").nth(3), /^1$/, "the key's usage to count the request");
    await row.getByRole("button", { name: "Revoke" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Revoke key" }).click();
    await row.getByText("revoked").waitFor();
    expect((await chat(secret)).status).toBe(401);
    await ui.checkWidths("keys");
  });

  test("webhooks: add (secret once), test ping with the receiver's answer, deliveries per job", async () => {
    const { page } = ui;
    await ui.visit(`/workloads/${workload.id}/webhooks`);
    await page.getByText("Private and loopback receivers are allowed").waitFor();
    for (const [r, path] of [
      [ok, "/ok"],
      [failing, "/down"],
    ] as const) {
      await page.getByLabel("Destination URL").fill(r.url(path));
      await page.getByRole("button", { name: "Add destination" }).click();
      expect(await page.getByTestId("secret").textContent()).toStartWith("whsec_");
      await page.getByRole("button", { name: "I have copied it" }).click();
    }
    const okCard = page.locator("li.hook", { hasText: "/ok" });
    await okCard.getByRole("button", { name: "Send test ping" }).click();
    await textMatching(okCard.getByTestId("ping-result"), /Delivered · HTTP 200 · \d+ ms\s*thanks/, "the ping result");
    expect(JSON.parse((await ok.waitForRequests(1))[0].rawBody)).toMatchObject({
      event: "ping",
      workload_id: workload.id,
    });
    const downCard = page.locator("li.hook", { hasText: "/down" });
    await downCard.getByRole("button", { name: "Send test ping" }).click();
    await textMatching(downCard.getByTestId("ping-result"), /Failed · HTTP 500/, "the failed ping");
    const submit = await srv.data(workload.slug, "/jobs", {
      body: { kind: "chat", body: { messages: [{ role: "user", content: "a job" }] } },
    });
    expect(submit.status).toBe(202);
    const { job_id } = await submit.json();
    const job = page.locator("ul.jobs > li", { hasText: job_id });
    await job
      .getByRole("row")
      .filter({ hasText: "/ok" })
      .filter({ hasText: "delivered" })
      .filter({ hasText: "200" })
      .waitFor();
    const down = job.getByRole("row").filter({ hasText: "/down" });
    await textMatching(down, /pending.*500.*in \d+ (s|min)/, "the failed delivery's next attempt");
    await down.getByText("1", { exact: true }).click();
    await textMatching(down.locator(".attempts"), /#1 .* HTTP 500/, "the attempts list");
    await ui.checkWidths("webhooks");
  });

  test("workers: GPUs live, add a worker with its join command, delete it", async () => {
    const { page } = ui;
    await ui.visit("/workers");
    const gpus = page.getByTestId("gpu");
    await until(async () => (await gpus.count()) === 2, "two GPUs");
    const util = gpus.first().getByRole("meter", { name: "Utilisation" });
    const first = await util.getAttribute("aria-valuenow");
    await until(async () => (await util.getAttribute("aria-valuenow")) !== first, "the GPU utilisation to update live");
    await page.getByText("serving/jobs").waitFor();
    await page.getByText("Add a worker").click();
    await page.getByLabel("Worker name").fill("gpu-box-2");
    await page.getByRole("button", { name: "Add worker" }).click();
    const join = await textMatching(page.getByTestId("join").locator("pre"), /\S/, "the join command");
    expect(join).toContain("join");
    await page.getByTestId("join").getByRole("button", { name: "Copy Join command" }).click();
    await page.getByTestId("join").getByRole("button", { name: "Copied" }).waitFor();
    const card = page.getByRole("listitem", { name: "Worker gpu-box-2" });
    await card.waitFor();
    await ui.checkWidths("workers");
    // The local worker cannot be deleted, so it offers no button; the new one can.
    expect(
      await page
        .getByRole("listitem", { name: /^Worker (?!gpu-box-2)/ })
        .getByRole("button", { name: "Delete worker" })
        .count(),
    ).toBe(0);
    await card.getByRole("button", { name: "Delete worker" }).click();
    await card.getByRole("dialog").getByRole("button", { name: "Delete worker" }).click();
    await card.waitFor({ state: "detached" });
    ui.expectNoErrors("workers");
  });

  test("telemetry: GPU and workload charts over time", async () => {
    const { page } = ui;
    await ui.visit("/telemetry");
    await until(async () => (await page.locator(".chart canvas").count()) >= 6, "six charts");
    await page.getByRole("figure", { name: /^GPU utilisation · .* Latest: GPU 0: \d+%, GPU 1: \d+%/ }).waitFor();
    await page.getByRole("figure", { name: /^Requests per second\. Latest: jobs/ }).waitFor();
    await ui.checkWidths("telemetry");
  });
});
