import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { startFakeHub, type FakeHub } from "../fixtures/hf-hub";
import { ggufRepo } from "../fixtures/hf-repos";
import { cleanup, startInferd, tempDir, type Inferd } from "../helpers/proc";
import { launchBrowser, openPage, signIn, WAIT_MS, type UiPage } from "../helpers/browser";

/**
 * The first day on a fresh `inferd serve` with no project (built-in llama.cpp runtime, the fake hub
 * standing for huggingface.co): a model known only by name is found on the Models page, pulled with
 * one click, served from its card (the project made in the Serve dialog), and answers in the playground.
 */
const HOOK_MS = 90_000;
const REPO = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF";
let hub: FakeHub;
let srv: Inferd;
let browser: Browser;
let ui: UiPage;

beforeAll(async () => {
  const files = ["SmolLM2-135M-Instruct-Q4_K_M.gguf", "SmolLM2-135M-Instruct-Q8_0.gguf"];
  hub = await startFakeHub({
    repos: { [REPO]: ggufRepo(join(tempDir("first-day-hub"), "smol"), { name: "SmolLM2-135M-Instruct", files }) },
  });
  [srv, browser] = await Promise.all([
    startInferd({ env: { INFERD_LOCAL_AGENT: "1", INFERD_LOG_LEVEL: "warn", HF_ENDPOINT: hub.url } }),
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

describe("the first day, by name", () => {
  test(
    "search → Pull → Serve this model (project made in the dialog) → Create workload → an answer in the playground",
    async () => {
      const { page } = ui;
      const projects = async () =>
        (await (
          await fetch(`${srv.url}/admin/projects`, { headers: { authorization: `Bearer ${srv.adminToken}` } })
        ).json()) as { slug: string }[];
      expect(await projects()).toEqual([]);
      await ui.visit("/models");
      await page.getByRole("searchbox", { name: "Search models by name" }).fill("smollm2");
      await page.getByRole("button", { name: `Pull ${REPO} Q4_K_M` }).click();
      const card = page.getByRole("listitem", { name: `Model hf:${REPO}:Q4_K_M` });
      await card.getByRole("button", { name: "Serve this model" }).click();
      const dialog = card.getByRole("dialog");
      await dialog.getByText("there is none yet").waitFor();
      await ui.checkWidths("serve-first-project");
      await dialog.getByLabel("Project name").fill("");
      expect(await dialog.getByRole("button", { name: "Create project and continue" }).isDisabled()).toBe(true);
      await dialog.getByLabel("Project name").fill("Demo app");
      await dialog.getByRole("button", { name: "Create project and continue" }).click();
      // The workload form, filled from the model: the built-in llama.cpp runtime on the pulled quant.
      await page.getByRole("button", { name: "Create workload" }).waitFor();
      expect(new URL(page.url()).pathname).toBe("/projects/demo-app/workloads/new");
      expect(await page.getByTestId("launch-command").textContent()).toContain(REPO);
      await ui.checkWidths("serve-form");
      await page.getByRole("button", { name: "Create workload" }).click();
      await page.getByRole("link", { name: "Playground" }).first().click();
      // A model with random weights never says it is done: a short answer keeps the test quick on busy cores.
      await page.getByText("Parameters").click();
      await page.getByLabel("Max tokens").fill("8");
      await page.getByRole("textbox", { name: "Message" }).fill("hello");
      await page.getByRole("button", { name: "Send" }).click();
      await page
        .locator(".msg.assistant")
        .getByTestId("answer-stats")
        .waitFor({ timeout: 4 * WAIT_MS });
      expect((await page.locator(".msg.assistant").first().textContent())!.length).toBeGreaterThan(0);
      expect((await projects()).map((p) => p.slug)).toEqual(["demo-app"]);
      ui.expectNoErrors("first day by name");
    },
    4 * HOOK_MS,
  );
});
