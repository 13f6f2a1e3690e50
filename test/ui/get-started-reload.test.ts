import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { servedUi } from "../helpers/ui-suite";
import { tempDir } from "../helpers/proc";
import { until } from "../helpers/browser";
import { writeTinyGguf } from "../fixtures/gguf";

/**
 * Get started survives a reload against a real `inferd serve` (fake runtimes and GPUs): each step and
 * its choices are in the address, so a reload lands on the same step with the same choices; once the
 * workload is made, going back and reloading offers to continue with it, never makes a second; the
 * words above the replica follow its real state (never "starting" beside a `ready` badge).
 */
const world = servedUi({ FAKE_LOAD_MS: "1500" });

/** The step Get started shows. */
const stepTitle = () => world.ui.page.locator("#step-title").textContent();

/** The workloads of the project Get started made, counted through the API. */
const workloadCount = async () =>
  ((await (await world.srv.admin("/admin/projects/reload-app/workloads")).json()) as unknown[]).length;

describe("Get started across reloads", () => {
  test("each step and its choices survive a reload; the workload made is continued with, never made twice", async () => {
    const { page } = world.ui;
    const gguf = join(tempDir("models"), "tiny-chat.gguf");
    writeTinyGguf(gguf);
    await world.ui.visit("/setup");
    await page.getByLabel("Project name").fill("Reload app");
    await page.getByRole("button", { name: "Create project" }).click();
    await page.getByRole("heading", { name: "2. Add a model" }).waitFor();
    await page.reload();
    await page.getByRole("heading", { name: "2. Add a model" }).waitFor();
    // Step 2's choices: a GGUF file here, and another workload name.
    await page.getByRole("radio", { name: /A GGUF file on this machine/ }).check();
    await page.getByRole("textbox", { name: /^GGUF file/ }).fill(gguf);
    await page.getByLabel("Workload name").fill("local chat");
    await page
      .getByTestId("launch-command")
      .filter({ hasText: `llama-server -m ${gguf}` })
      .waitFor();
    await page.reload();
    await page.getByRole("heading", { name: "2. Add a model" }).waitFor();
    expect(await page.getByRole("radio", { name: /A GGUF file on this machine/ }).isChecked()).toBe(true);
    expect(await page.getByRole("textbox", { name: /^GGUF file/ }).inputValue()).toBe(gguf);
    expect(await page.getByLabel("Workload name").inputValue()).toBe("local chat");
    await page.getByRole("button", { name: "Create workload" }).click();
    await page.getByRole("heading", { name: "3. Create a key" }).waitFor();
    await page.reload();
    await page.getByRole("heading", { name: "3. Create a key" }).waitFor();
    expect(await workloadCount()).toBe(1);
    // Back to step 2 (and a reload there): the button continues with the workload made.
    await page.goBack();
    await page.getByRole("heading", { name: "2. Add a model" }).waitFor();
    await page.reload();
    const again = page.getByRole("button", { name: "Continue with local chat" });
    await again.waitFor();
    await page.getByTestId("made-note").filter({ hasText: "the button continues with it" }).waitFor();
    await world.ui.checkWidths("get-started-continue");
    await again.click();
    await page.getByRole("heading", { name: "3. Create a key" }).waitFor();
    expect(await workloadCount()).toBe(1);
    await page.getByLabel("Key name").fill("reloaded-app");
    await page.getByRole("button", { name: "Create key" }).click();
    await page.getByTestId("secret").waitFor();
    // The words follow the replica: while it comes up they may say starting, never beside `ready`.
    const state = page.getByTestId("first-state");
    const badge = page.locator(".first-replicas .badge");
    await until(
      async () => {
        // Both read in one go in the page: two reads could straddle a re-render.
        const [words, shown] = await page.evaluate(() => [
          document.querySelector("[data-testid=first-state]")?.textContent ?? "",
          document.querySelector(".first-replicas .badge")?.textContent ?? "",
        ]);
        if (shown === "ready") expect(words).not.toContain("starting");
        return shown === "ready" && words === "Your workload is ready: it answers now.";
      },
      "the replica ready, and the words saying so",
      30_000,
    );
    expect(await stepTitle()).toBe("4. Call it");
    await page.reload();
    await page.getByRole("heading", { name: "4. Call it" }).waitFor();
    await page.getByTestId("secret-gone").filter({ hasText: "shown once" }).waitFor();
    expect(await page.getByTestId("secret").count()).toBe(0);
    await badge.filter({ hasText: "ready" }).waitFor();
    expect(await state.textContent()).toBe("Your workload is ready: it answers now.");
    expect(await page.locator("figure.code pre").first().textContent()).toContain("$INFERD_API_KEY");
    await world.ui.checkWidths("get-started-reloaded");
    expect(await workloadCount()).toBe(1);
    world.ui.expectNoErrors("Get started across reloads");
  });
});
