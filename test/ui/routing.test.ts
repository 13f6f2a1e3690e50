import { describe, expect, test } from "bun:test";
import { servedUi } from "../helpers/ui-suite";

/**
 * The workload form's "Between replicas" against a real `inferd serve`: a chat workload follows its
 * task type's default (by prompt prefix), the choice saves and shows again on the next edit, and the
 * default comes back when chosen; the form fits desktop and phone widths.
 */
const world = servedUi();

describe("routing between replicas in the workload form", () => {
  test("a chat workload routes by prompt prefix by default; least loaded saves; the default comes back", async () => {
    const { page } = world.ui;
    const w = await world.srv.createWorkload({
      name: "Chat",
      backend: "vllm",
      model_name: "chat-model",
      config: { command: "vllm serve chat-model" },
    });
    await world.ui.visit(`/workloads/${w.id}/edit`);
    const routing = page.getByRole("combobox", { name: /^Between replicas/ });
    expect(await routing.inputValue()).toBe("");
    expect(await routing.locator("option:checked").textContent()).toBe("Default: by prompt prefix");
    await world.ui.checkWidths("workload-routing-select");
    await routing.selectOption({ label: "Least loaded" });
    await page.getByRole("button", { name: /^Save/ }).click();
    await page.waitForURL((u) => u.pathname === `/workloads/${w.id}`);
    const saved = await (await world.srv.admin(`/admin/workloads/${w.id}`)).json();
    expect(saved).toMatchObject({ routing: "least_loaded", routing_is_default: false });
    await world.ui.visit(`/workloads/${w.id}/edit`);
    expect(await routing.inputValue()).toBe("least_loaded");
    // The task type's default follows the task type: an embeddings workload is least loaded.
    await page.getByRole("combobox", { name: "Task type" }).selectOption({ label: "Embeddings" });
    await routing.selectOption({ label: "Default: least loaded" });
    await page.getByRole("combobox", { name: "Task type" }).selectOption({ label: "Chat / text generation" });
    await page.getByRole("button", { name: /^Save/ }).click();
    await page.waitForURL((u) => u.pathname === `/workloads/${w.id}`);
    expect(await (await world.srv.admin(`/admin/workloads/${w.id}`)).json()).toMatchObject({
      routing: "prefix",
      routing_is_default: true,
    });
  });
});
