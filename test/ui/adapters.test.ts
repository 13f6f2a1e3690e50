import { afterAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { writePeftAdapter } from "../fixtures/adapters";
import { startFakeHub } from "../fixtures/hf-hub";
import { tempDir } from "../helpers/proc";
import { openPage, signInAs, textMatching, type UiPage } from "../helpers/browser";
import { servedUi } from "../helpers/ui-suite";

/**
 * LoRA adapters on the workload page (issue 39), in a real browser against a real `inferd serve`
 * with the fake vLLM and the fake Hugging Face hub: an operator adds an adapter pulled from the hub
 * (slowly, so it is seen pulling) and watches it become ready, sees one trained on another base
 * fail with the reason and a bad name refused at its field, reads how to call one, removes one
 * after confirming; a viewer sees the list without Add or Remove; an Ollama workload has no section.
 */
const dir = tempDir("adapters-ui");
const peft = (name: string, base: string) => writePeftAdapter(join(dir, name), { base, rank: 8 });
/** A PEFT adapter folder as a hub repo (its two files). */
const repoOf = (path: string) => ({
  files: Object.fromEntries(
    ["adapter_config.json", "adapter_model.safetensors"].map((f) => [f, new Uint8Array(readFileSync(join(path, f)))]),
  ),
});
const hub = await startFakeHub({ repos: { "org/alice-lora": repoOf(peft("hub-alice", "org/base-7b")) } });
afterAll(() => hub.stop());
const world = servedUi({ HF_ENDPOINT: hub.url });

const PASSWORD = "a-password-of-20-chars";
let base = { id: "", slug: "" };

/** The adapters table's row of `name`. */
const row = (ui: UiPage, name: string) => ui.page.locator(`[data-testid="adapters"] tr[data-adapter="${name}"]`);

/** Fills the add form and presses Add adapter. */
async function addAdapter(ui: UiPage, name: string, source: string): Promise<void> {
  const form = ui.page.getByRole("form", { name: "Add an adapter" });
  await form.getByLabel("Name").fill(name);
  await form.getByLabel("Source").fill(source);
  await form.getByRole("button", { name: "Add adapter" }).click();
}

describe("adapters on the workload page", () => {
  test("an operator adds one from the hub and sees it pulled then ready; a wrong one fails with the reason; one is removed", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    base = await srv.createWorkload({
      name: "base",
      backend: "vllm",
      model_name: "base-7b",
      config: { command: "vllm serve base-7b" },
    });
    await ui.visit(`/workloads/${base.id}`);
    const section = page.getByTestId("adapters-section");
    await section.getByRole("heading", { name: "Adapters" }).waitFor();
    await section.getByTestId("no-adapters").waitFor();

    // A name clients could not send is refused at its field, in the server's words.
    await addAdapter(ui, "no spaces", peft("alice-local", "org/base-7b"));
    await textMatching(page.locator("#error-name"), /^An adapter's name is 1–64 letters/, "the name's error");
    expect(await page.getByRole("textbox", { name: /^Name/ }).getAttribute("aria-invalid")).toBe("true");
    // A name the project already answers to (the workload's model) is refused there too.
    await addAdapter(ui, "base-7b", peft("alice-local", "org/base-7b"));
    await textMatching(page.locator("#error-name"), /already answers to "base-7b"/, "the taken name's error");
    expect(ui.errors.splice(0)).toEqual([expect.stringContaining("400"), expect.stringContaining("409")]);

    // From the hub, slowly: pulling first, then ready by itself (the page's refresh), with what the files say.
    hub.throttle(2048);
    await addAdapter(ui, "alice", "hf:org/alice-lora");
    await row(ui, "alice").locator(".badge", { hasText: "pulling" }).waitFor();
    expect(await page.locator("#error-name").count()).toBe(0);
    await row(ui, "alice").locator(".badge", { hasText: "ready" }).waitFor({ timeout: 30_000 });
    hub.throttle(null);
    const cells = await row(ui, "alice").locator("td").allTextContents();
    expect(cells.slice(0, 4)).toEqual(["alice", "ready", "org/base-7b", "8"]);
    expect(cells[4]).toMatch(/KiB$/);
    expect(cells[5]).toBe("hf:org/alice-lora");

    // Trained on another model: failed, with the reason under its badge.
    await addAdapter(ui, "wrong", peft("wrong", "org/other-3b"));
    await row(ui, "wrong").locator(".badge", { hasText: "failed" }).waitFor();
    await textMatching(
      row(ui, "wrong").getByTestId("adapter-reason"),
      /trained on org\/other-3b and this workload serves base-7b/,
      "the failure's reason",
    );

    // How to call one: its name as `model` on the project's base URL.
    await page.getByText("Call an adapter").click();
    const call = page.getByTestId("adapter-call");
    await textMatching(call, new RegExp(`/endpoint/${srv.project}/v1`), "the project base URL");
    expect(await call.locator("pre").textContent()).toContain(`"model":"alice"`);
    await ui.checkWidths("adapters-workload");

    await row(ui, "wrong").getByRole("button", { name: "Remove" }).click();
    const dialog = page.getByRole("dialog", { name: "Remove adapter wrong?" });
    await dialog.getByRole("button", { name: "Remove adapter" }).click();
    await row(ui, "wrong").waitFor({ state: "detached" });
    const left = (await (await srv.admin(`/admin/workloads/${base.id}/adapters`)).json()) as {
      adapters: { name: string }[];
    };
    expect(left.adapters.map((a) => a.name)).toEqual(["alice"]);
    ui.expectNoErrors("adapters");
  }, 120_000);

  test("a viewer sees the adapters without Add or Remove", async () => {
    const { srv, ui } = world;
    const made = await srv.admin("/admin/users", {
      body: { email: "vera@example.com", role: "viewer", projects: [srv.project], password: PASSWORD },
    });
    expect(made.status).toBe(201);
    const viewer = await openPage(ui.context.browser() as Browser, srv.url);
    await signInAs(viewer, "vera@example.com", PASSWORD);
    await viewer.visit(`/workloads/${base.id}`);
    await row(viewer, "alice").locator(".badge", { hasText: "ready" }).waitFor();
    expect(await viewer.page.getByRole("form", { name: "Add an adapter" }).count()).toBe(0);
    expect(await viewer.page.getByTestId("adapters").getByRole("button", { name: "Remove" }).count()).toBe(0);
    await viewer.checkWidths("adapters-viewer");
    await viewer.context.close();
  }, 60_000);

  test("an Ollama workload's page has no Adapters section", async () => {
    const { srv, ui } = world;
    const w = await srv.createWorkload({ name: "oll", backend: "ollama", model_name: "llama3.2" });
    await ui.visit(`/workloads/${w.id}`);
    // The endpoint switches render in the same pass as the section would.
    await ui.page.getByRole("heading", { name: "Endpoints" }).waitFor();
    expect(await ui.page.getByTestId("adapters-section").count()).toBe(0);
  }, 60_000);
});
