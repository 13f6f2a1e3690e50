import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { startFakeHub, type FakeHub } from "../fixtures/hf-hub";
import { ggufRepo } from "../fixtures/hf-repos";
import { writeTinyGguf } from "../fixtures/gguf";
import { cleanup, runInferd, startInferd, tempDir, waitFor, type Inferd } from "../helpers/proc";
import { launchBrowser, openPage, signIn, textMatching, until, WAIT_MS, type UiPage } from "../helpers/browser";

/**
 * Models in the browser against a real `inferd serve` whose Hugging Face endpoint is the fake hub
 * (throttled so downloads take a while) and with no llama-server on PATH, so inferd's built-in
 * llama.cpp runtime serves the tiny generated GGUFs: the first run's starter model downloaded with
 * progress to a workload that answers; pulling, cancelling and deleting on the Models page; a file
 * found on this machine put to use; a replica downloading its model with the percentage under its badge;
 * which project a model was pulled for and when an unused one goes (page and `inferd model list`);
 * the project page's limits on workloads, replicas and model storage.
 */
/** Hooks start (or stop) a server, the hub and chromium on possibly busy cores. */
const HOOK_MS = 90_000;
const STARTER = "Qwen/Qwen2.5-0.5B-Instruct-GGUF";
const BIG = "inferd-test/Big-GGUF";
const MiB = 1 << 20;
let hub: FakeHub;
let srv: Inferd;
let browser: Browser;
let ui: UiPage;

const api = (path: string, init: { method?: string; body?: unknown } = {}) =>
  fetch(`${srv.url}${path}`, {
    method: init.method ?? (init.body ? "POST" : "GET"),
    headers: { authorization: `Bearer ${srv.adminToken}`, "content-type": "application/json" },
    body: init.body ? JSON.stringify(init.body) : undefined,
  });

beforeAll(async () => {
  const src = tempDir("hub-src");
  hub = await startFakeHub({
    repos: {
      [STARTER]: ggufRepo(join(src, "starter"), {
        files: ["qwen2.5-0.5b-instruct-q4_k_m.gguf"],
        sizes: { "qwen2.5-0.5b-instruct-q4_k_m.gguf": 3 * MiB },
      }),
      [BIG]: ggufRepo(join(src, "big"), {
        name: "Big",
        files: ["Big-Q4_K_M.gguf", "Big-Q8_0.gguf", "Big-Q5_K_M.gguf"],
        sizes: { "Big-Q4_K_M.gguf": 6 * MiB, "Big-Q8_0.gguf": 8 * MiB, "Big-Q5_K_M.gguf": 8 * MiB },
      }),
    },
  });
  // A GGUF another tool left behind, where llama.cpp's own cache is.
  const cache = tempDir("llama-cache");
  writeTinyGguf(join(cache, "found-model-Q8_0.gguf"), { seed: 7 });
  [srv, browser] = await Promise.all([
    startInferd({
      env: {
        INFERD_LOCAL_AGENT: "1",
        INFERD_TELEMETRY_INTERVAL_MS: "300",
        INFERD_LOG_LEVEL: "warn",
        HF_ENDPOINT: hub.url,
        LLAMA_CACHE: cache,
      },
    }),
    launchBrowser(),
  ]);
  ui = await openPage(browser, srv.url);
  await signIn(ui, srv.adminToken);
}, HOOK_MS);
afterAll(async () => {
  await browser?.close();
  await srv?.stop().catch(() => 0);
  await hub?.stop();
  await cleanup();
}, HOOK_MS);

/** Waits until a progress bar has shown two different values (it moves). */
async function expectMoving(bar: ReturnType<UiPage["page"]["getByRole"]>, what: string): Promise<void> {
  const seen = new Set<string>();
  await until(async () => {
    const v = await bar.getAttribute("aria-valuenow").catch(() => null);
    if (v !== null) seen.add(v);
    return seen.size >= 2;
  }, `${what} to move`);
}

describe("models in the browser", () => {
  test("first run: the starter model downloads with a progress bar, then the workload answers", async () => {
    const { page } = ui;
    hub.throttle(384 * 1024);
    await page.getByRole("link", { name: "Get started" }).first().click();
    await page.getByLabel("Project name").fill("Demo app");
    await page.getByRole("button", { name: "Create project" }).click();
    expect(await page.getByRole("radio", { name: /Download a starter model/ }).isChecked()).toBe(true);
    expect(await page.getByRole("textbox", { name: /^Hugging Face model/ }).inputValue()).toBe(`${STARTER}:Q4_K_M`);
    await page
      .getByTestId("model-note")
      .filter({ hasText: "Downloaded from Hugging Face before the runtime starts" })
      .waitFor();
    const command = await textMatching(page.getByTestId("launch-command"), /--port/, "the launch preview");
    // Without llama-server, the built-in runtime takes the same flags.
    expect(command).toContain(
      `llama-runner -hf ${STARTER}:Q4_K_M -c 4096 --alias Qwen2.5-0.5B-Instruct --host 127.0.0.1 --port`,
    );
    await page.getByText("llama-server is not installed here").waitFor();
    await ui.checkWidths("models-setup-starter");
    await page.getByRole("button", { name: "Create workload" }).click();
    await page.getByLabel("Key name").fill("first-app");
    await page.getByRole("button", { name: "Create key" }).click();
    const secret = (await page.getByTestId("secret").textContent())!;
    const status = page.getByTestId("replica-status");
    await status.locator(".badge", { hasText: "downloading" }).waitFor();
    await expectMoving(status.getByRole("progressbar", { name: "Model download" }), "the starter's download bar");
    await textMatching(status.locator(".download-text"), /MiB of 3\.0 MiB · \d+%/, "the bytes and percentage");
    await ui.checkWidths("models-setup-downloading");
    hub.throttle(null);
    await status.locator(".badge", { hasText: "ready" }).waitFor({ timeout: 60_000 });
    const r = await fetch(`${srv.url}/endpoint/demo-app/chat/v1/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
      body: JSON.stringify({ messages: [{ role: "user", content: "Say hello" }], max_tokens: 8 }),
    });
    expect(r.status).toBe(200);
    expect((await r.json()).choices[0].message.content.length).toBeGreaterThan(0);
    ui.expectNoErrors("first run with the starter model");
  }, 120_000);

  test("a pull started from the Models page shows a moving progress bar, then ready with the model's shape and fit", async () => {
    const { page } = ui;
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Models" }).click();
    const starter = page.getByRole("listitem", { name: `Model hf:${STARTER}:Q4_K_M` });
    await starter.getByRole("link", { name: "demo-app/chat" }).waitFor();
    expect(await page.getByRole("textbox", { name: /^Source/ }).inputValue()).toBe(`hf:${STARTER}:Q4_K_M`);
    hub.throttle(1024 * 1024);
    await page.getByRole("textbox", { name: /^Source/ }).fill(`hf:${BIG}:Q4_K_M`);
    await page.getByRole("button", { name: "Pull", exact: true }).click();
    const card = page.getByRole("listitem", { name: `Model hf:${BIG}:Q4_K_M` });
    await card.locator(".badge", { hasText: "downloading" }).waitFor();
    await expectMoving(card.getByRole("progressbar"), "the pull's progress bar");
    await textMatching(
      card.locator(".download-text"),
      /of 6\.0 MiB · \d+% · [\d.]+ (KiB|MiB)\/s/,
      "bytes, percentage and rate",
    );
    await ui.checkWidths("models-downloading");
    hub.throttle(null);
    await card.locator(".badge", { hasText: "ready" }).waitFor();
    await textMatching(card, /llama · .* parameters · F32 · context 2048 · 6\.0 MiB/, "the model's shape");
    await textMatching(
      card.getByTestId("estimate"),
      /^Needs ~[\d.]+ GiB for 2048 tokens of context/,
      "the memory estimate",
    );
    await card.getByText("Where it fits").click();
    const fit = card.getByTestId("fit");
    await textMatching(fit, /RAM \(no GPU\).*fits/, "the fit on this CPU-only worker");
    await ui.checkWidths("models");
  });

  test("cancel stops a download; pulling again resumes it; delete removes it", async () => {
    const { page } = ui;
    hub.throttle(256 * 1024);
    await page.getByRole("textbox", { name: /^Source/ }).fill(`hf:${BIG}:Q8_0`);
    await page.getByRole("button", { name: "Pull", exact: true }).click();
    const card = page.getByRole("listitem", { name: `Model hf:${BIG}:Q8_0` });
    await expectMoving(card.getByRole("progressbar"), "the download");
    await card.getByRole("button", { name: "Cancel download" }).click();
    await card.locator(".badge", { hasText: "cancelled" }).waitFor();
    expect(await card.getByRole("progressbar").count()).toBe(0);
    const stopped = hub.requests().filter((r) => r.path.includes("/repos/")).length;
    await card.getByRole("button", { name: "Resume download" }).click();
    await card.locator(".badge", { hasText: "downloading" }).waitFor();
    await until(
      () => hub.requests().filter((r) => r.path.includes("/repos/")).length > stopped,
      "the download to go on",
    );
    await card.getByRole("button", { name: "Cancel download" }).click();
    await card.locator(".badge", { hasText: "cancelled" }).waitFor();
    hub.throttle(null);
    await card.getByRole("button", { name: "Delete" }).click();
    await card.getByRole("dialog").getByRole("button", { name: "Delete model" }).click();
    await card.waitFor({ state: "detached" });
    ui.expectNoErrors("cancel and delete");
  });

  test("deleting a model a workload uses is refused, naming the workload", async () => {
    const { page } = ui;
    const starter = page.getByRole("listitem", { name: `Model hf:${STARTER}:Q4_K_M` });
    await starter.getByRole("button", { name: "Delete" }).click();
    await starter.getByRole("dialog").getByRole("button", { name: "Delete model" }).click();
    await starter.getByRole("alert").filter({ hasText: "is used by demo-app/chat" }).waitFor();
    // The browser logs the refused delete (409) itself; that one is expected.
    await until(() => ui.errors.length > 0, "the refusal to be logged");
    expect(ui.errors.splice(0)).toEqual([expect.stringContaining("409")]);
    expect(await starter.locator(".badge", { hasText: "ready" }).count()).toBe(1);
  });

  test("a GGUF found on this machine is put to use from the Models page", async () => {
    const { page } = ui;
    const row = page.getByRole("listitem", { name: "Found found-model-Q8_0.gguf" });
    expect(await row.textContent()).toContain("llama.cpp-cache · Q8_0 · 486 KiB");
    await row.getByRole("button", { name: "Use found-model-Q8_0.gguf" }).click();
    await row.getByText("In inferd's models").waitFor();
    const card = page.locator("li.model", { hasText: "found-model-Q8_0.gguf" });
    await card.locator(".badge", { hasText: "ready" }).waitFor();
    await textMatching(card, /llama · .* · context 2048/, "the found model's shape");
    await ui.checkWidths("models-found");
  });

  test("a replica downloading its model shows the percentage under its badge, on its page and the overview", async () => {
    const { page } = ui;
    hub.throttle(384 * 1024);
    const w = await (
      await api("/admin/projects/demo-app/workloads", {
        body: {
          name: "big",
          backend: "llamacpp",
          model_name: "big",
          config: { command: `llama-server -hf ${BIG}:Q5_K_M -c 512` },
        },
      })
    ).json();
    await ui.visit(`/workloads/${w.id}`);
    const status = page.getByTestId("replica-status");
    await status.locator(".badge", { hasText: "downloading" }).waitFor({ timeout: WAIT_MS });
    await textMatching(
      status.locator(".download-text"),
      /of 8\.0 MiB · \d+%/,
      "the replica's download under its badge",
    );
    await textMatching(status.locator(".since"), /^for \d+ s$/, "the time in this state");
    await textMatching(
      status.locator(".reason"),
      new RegExp(`^downloading hf:${BIG}:Q5_K_M$`),
      "why it is downloading",
    );
    await ui.checkWidths("workload-downloading");
    await ui.visit("/");
    const row = page.getByRole("row").filter({ hasText: "demo-app/big" });
    await expectMoving(row.getByRole("progressbar", { name: "Model download" }), "the overview's download bar");
    await ui.checkWidths("overview-downloading");
    hub.throttle(null);
    await api(`/admin/workloads/${w.id}`, { method: "DELETE" });
    await waitFor(
      async () =>
        ((await (await api("/admin/models")).json()) as { state: string }[]).every((m) => m.state !== "downloading") ||
        undefined,
      { what: "the pull to finish" },
    );
    ui.expectNoErrors("downloading replica");
  });

  test("a model pulled for a project says so, and an unused one when it goes; the CLI lists the same", async () => {
    const { page } = ui;
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Models" }).click();
    // The workload that pulled it is gone: collected in 24 h unless a workload names it again.
    const unused = page.getByRole("listitem", { name: `Model hf:${BIG}:Q5_K_M` });
    await textMatching(
      unused.getByTestId("pulled-for"),
      /^Pulled for demo-app · removed in 24 h unless a workload uses it$/,
      "the unused tenant model's removal",
    );
    await textMatching(
      page.getByRole("listitem", { name: `Model hf:${STARTER}:Q4_K_M` }).getByTestId("pulled-for"),
      /^Pulled for demo-app$/,
      "the used one's project",
    );
    // Pulled by hand on this page: the admin's, never collected.
    expect(
      await page
        .getByRole("listitem", { name: `Model hf:${BIG}:Q4_K_M` })
        .getByTestId("pulled-for")
        .count(),
    ).toBe(0);
    await ui.checkWidths("models-pulled-for");
    await unused.getByRole("link", { name: "demo-app" }).click();
    await page.getByTestId("caps").waitFor();
    const listed = await runInferd({ args: ["model", "list", "--data-dir", srv.dataDir] });
    expect(listed.stdout).toMatch(
      new RegExp(`hf:${BIG}:Q5_K_M .*pulled for demo-app, removed in 24 h unless a workload uses it`),
    );
    ui.expectNoErrors("models pulled for a project");
  });

  test("the project page edits its limits next to the token quotas, with what it uses against them", async () => {
    const { page } = ui;
    await ui.visit("/projects/demo-app");
    const caps = page.getByTestId("caps");
    await textMatching(caps.getByTestId("used-workloads"), /^1 \(no limit\)$/, "the workloads without a limit");
    await textMatching(
      caps.getByTestId("used-model-bytes"),
      /^11 MiB \(no limit\)$/,
      "the models pulled for the project (3 + 8 MiB)",
    );
    const field = (name: string) =>
      caps.getByRole("textbox", { name: new RegExp(`^${name.replace(/[()]/g, "\\$&")}`) });
    await field("Workloads").fill("1");
    await field("Replicas").fill("4");
    await field("Model storage (MiB)").fill("12.5");
    await caps.getByRole("button", { name: "Save project limits" }).click();
    await textMatching(caps.getByTestId("used-workloads"), /^1 of 1$/, "the workloads against the limit");
    await textMatching(
      caps.getByTestId("used-model-bytes"),
      /^11 MiB of 12\.5 MiB$/,
      "the model storage against the limit",
    );
    await textMatching(
      caps.getByTestId("used-replicas"),
      /running, policies up to 1 of 4$/,
      "the replicas against the limit",
    );
    expect((await (await api("/admin/projects/demo-app")).json()).limits).toMatchObject({
      max_workloads: 1,
      max_replicas: 4,
      model_bytes: 12.5 * MiB,
    });
    const more = await api("/admin/projects/demo-app/workloads", {
      body: {
        name: "one-more",
        backend: "llamacpp",
        model_name: "m",
        config: { command: `llama-server -hf ${BIG}:Q4_K_M` },
      },
    });
    expect(more.status).toBe(429);
    expect((await more.json()).error).toMatchObject({ code: "project_limit", limit: "max_workloads", value: 1 });
    expect(await field("Model storage (MiB)").inputValue()).toBe("12.5");
    await ui.checkWidths("project-limits");
    for (const f of ["Workloads", "Replicas", "Model storage (MiB)"]) await field(f).fill("");
    await caps.getByRole("button", { name: "Save project limits" }).click();
    await textMatching(caps.getByTestId("used-workloads"), /^1 \(no limit\)$/, "the limits removed");
    ui.expectNoErrors("project limits");
  });
});
