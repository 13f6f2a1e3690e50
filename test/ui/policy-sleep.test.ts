import { describe, expect, test } from "bun:test";
import type { Page } from "playwright-core";
import { textMatching, until } from "../helpers/browser";
import { servedUi } from "../helpers/ui-suite";

/**
 * The execution policy's fields for sharing GPUs (issue 38), in a real browser against a real
 * `inferd serve`: sleeping or stopping, keep warm, priority, and preload (`warm_with` for autoscaling,
 * `warm_before_s` for a schedule) are saved, read back into the form, kept by a save without changes
 * (the form used to drop `sleep: false`), said in words on the workload's page, and a value the
 * server refuses is explained at its field.
 */
const world = servedUi();

/** The saved `execution_params` of a workload. */
const paramsOf = async (id: string) =>
  ((await world.srv.workload(id)) as unknown as { execution_params: Record<string, unknown> }).execution_params;

/** The sharing fields of the policy in the form on `page`. */
const fields = (page: Page) => ({
  sleep: page.getByRole("checkbox", { name: /^Sleep instead of stopping \(vLLM, SGLang\)/ }),
  keepWarm: page.getByRole("checkbox", { name: /^Keep warm/ }),
  priority: page.getByRole("spinbutton", { name: /^Priority/ }),
  warmWith: page.getByRole("textbox", { name: /^Warm with/ }),
  warmBefore: page.getByRole("spinbutton", { name: /^Start before a window opens \(seconds\)/ }),
});

/** Saves the edit form and waits for the workload's page. */
async function save(page: Page, name: string) {
  await page.getByRole("button", { name: "Save" }).click();
  await page.getByRole("heading", { name }).waitFor();
}

describe("the policy's fields for sharing GPUs", () => {
  test("autoscaling: no sleep, kept warm, priority 5 and warm with another workload are saved and kept", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    // The workload whose use warms the new one (scaled to zero: nothing starts).
    await srv.createWorkload({
      name: "chat",
      backend: "vllm",
      model_name: "chat",
      config: { command: "vllm serve chat" },
      execution_policy: "autoscaling",
      execution_params: { min_replicas: 0 },
    });
    await ui.visit(`/projects/${srv.project}/workloads/new`);
    await page.getByRole("radio", { name: /^vLLM A Hugging Face/ }).check();
    await page.getByLabel("Name", { exact: true }).fill("Pinned");
    await page.getByRole("textbox", { name: /^Command/ }).fill("vllm serve pinned-model");
    await page.getByRole("radio", { name: /^Autoscaling/ }).check();
    const f = fields(page);
    expect(await f.sleep.isChecked()).toBe(true);
    expect(await f.keepWarm.isChecked()).toBe(false);
    expect(await f.priority.getAttribute("placeholder")).toBe("0");
    await f.sleep.uncheck();
    await f.keepWarm.check();
    await f.priority.fill("5");
    await f.warmWith.fill("chat");
    await ui.checkWidths("policy-sharing-autoscaling");
    await page.getByRole("button", { name: "Create workload" }).click();
    await page.getByRole("heading", { name: "Pinned" }).waitFor();
    const id = new URL(page.url()).pathname.split("/").pop()!;
    const saved = await paramsOf(id);
    expect(saved).toMatchObject({ sleep: false, keep_warm: true, priority: 5, warm_with: ["chat"] });
    await textMatching(
      page.getByTestId("scaling"),
      /a replica without requests stops after 5 min; warmed with chat; kept warm; priority 5/,
      "the policy in words",
    );

    // The form shows them again, and a save without changes keeps them.
    await ui.visit(`/workloads/${id}/edit`);
    const g = fields(page);
    await g.priority.waitFor();
    expect(await g.sleep.isChecked()).toBe(false);
    expect(await g.keepWarm.isChecked()).toBe(true);
    expect(await g.priority.inputValue()).toBe("5");
    expect(await g.warmWith.inputValue()).toBe("chat");
    await save(page, "Pinned");
    expect(await paramsOf(id)).toEqual(saved);

    // A priority out of range: the server's refusal at the field.
    await ui.visit(`/workloads/${id}/edit`);
    await g.priority.fill("500");
    await page.getByRole("button", { name: "Save" }).click();
    await page.locator("label", { has: g.priority }).locator(".field-error", { hasText: /100/ }).waitFor();
    expect(await g.priority.getAttribute("aria-invalid")).toBe("true");
    await until(() => ui.errors.length > 0, "the refused save to be logged");
    expect(ui.errors.splice(0)).toEqual([expect.stringContaining("400")]);
    await ui.checkWidths("policy-sharing-error");
    expect(await paramsOf(id)).toEqual(saved);
    await ui.visit("/");
  });

  test("scheduled: a sleep set through the API survives the form, and warm_before_s 120 is saved and kept", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    // Set through the API: no sleeping, and one yearly window (closed now, so nothing starts).
    const w = await srv.createWorkload({
      name: "Nightly",
      backend: "vllm",
      model_name: "nightly",
      config: { command: "vllm serve nightly" },
      execution_policy: "scheduled",
      execution_params: { windows: [{ cron: "0 0 1 1 *", timezone: "UTC" }], sleep: false },
    });
    await ui.visit(`/workloads/${w.id}/edit`);
    const f = fields(page);
    await f.warmBefore.waitFor();
    expect(await f.sleep.isChecked()).toBe(false);
    expect(await f.warmWith.count()).toBe(0);
    await f.warmBefore.fill("120");
    await ui.checkWidths("policy-sharing-scheduled");
    await save(page, "Nightly");
    const saved = await paramsOf(w.id);
    expect(saved).toMatchObject({ sleep: false, warm_before_s: 120 });
    expect(saved.keep_warm).toBeUndefined();
    expect(saved.priority).toBeUndefined();
    await textMatching(page.getByTestId("scaling"), /; starts 2 min before a window/, "the policy in words");

    await ui.visit(`/workloads/${w.id}/edit`);
    await f.warmBefore.waitFor();
    expect(await f.warmBefore.inputValue()).toBe("120");
    expect(await f.sleep.isChecked()).toBe(false);
    await save(page, "Nightly");
    expect(await paramsOf(w.id)).toEqual(saved);
    ui.expectNoErrors("scheduled");
  });
});
