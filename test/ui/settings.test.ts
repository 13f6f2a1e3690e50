import { beforeAll, describe, expect, test } from "bun:test";
import { HOOK_MS, servedUi } from "../helpers/ui-suite";
import { textMatching, until } from "../helpers/browser";

/**
 * The Settings page in the browser against a real `inferd serve`: every setting with its flag and
 * environment variable, a runtime one changed (a bad value refused at its field, then saved and
 * Reset), the restart-needed ones read-only with the command to pass them; the webhooks page showing
 * the retry schedule in force (the one just saved) and what is kept of a signing secret; the join
 * dialog saying where the joining machine gets inferd. Desktop and phone width, no console errors.
 */
const world = servedUi();
let workload: { id: string; slug: string };

beforeAll(async () => {
  workload = await world.srv.createWorkload({
    name: "hooked",
    backend: "vllm",
    model_name: "hooked-model",
    config: { command: "vllm serve hooked-model" },
  });
}, HOOK_MS);

const card = (key: string) => world.ui.page.getByTestId(`setting-${key}`);

describe("settings in the dashboard", () => {
  test("every setting with its flag and env; restart-needed ones read-only with the command to pass them", async () => {
    const { page } = world.ui;
    await world.ui.visit("/");
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Settings" }).click();
    await page.getByRole("heading", { name: "Settings", level: 1 }).waitFor();
    const schedule = card("webhookRetrySchedule");
    expect(await schedule.getByText("--webhook-retry-schedule", { exact: true }).count()).toBe(1);
    expect(await schedule.getByText("INFERD_WEBHOOK_RETRY_SCHEDULE", { exact: true }).count()).toBe(1);
    expect(await schedule.getByTestId("value").textContent()).toBe("1m,5m,15m,1h,6h");
    expect(await card("logLevel").locator(".badge").textContent()).toBe("from the environment");
    const port = card("port");
    expect(await port.locator(".setting-names").textContent()).toBe("--port INFERD_PORT");
    expect(await port.locator("input, select").count()).toBe(0);
    expect(await port.textContent()).toContain("Restart with bun src/main.ts serve --port …");
    expect(await page.getByRole("heading", { name: "Need a restart" }).count()).toBe(1);
    expect(await page.getByTestId(/^setting-/).count()).toBe(
      (await (await world.srv.admin("/admin/settings")).json()).settings.length,
    );
    await world.ui.checkWidths("settings");
  });

  test("a runtime setting: a bad value is refused at its field, a good one is saved and in force, Reset returns to the default", async () => {
    const { page } = world.ui;
    await world.ui.visit("/settings");
    const schedule = card("webhookRetrySchedule");
    const field = schedule.getByRole("textbox", { name: "Webhook retry schedule" });
    await field.fill("soon");
    await schedule.getByRole("button", { name: "Save" }).click();
    await until(async () => (await field.getAttribute("aria-invalid")) === "true", "the field marked invalid");
    expect(await page.locator(`#${await field.getAttribute("aria-describedby")}`).textContent()).toContain(
      '"soon" is not a duration',
    );
    world.ui.errors.length = 0; // the browser logs the refused PATCH (400) we just provoked
    await field.fill("30s,2m");
    await schedule.getByRole("button", { name: "Save" }).click();
    await textMatching(schedule.getByTestId("value"), /^30s,2m$/, "the schedule in force");
    expect(await schedule.locator(".badge").textContent()).toBe("set here");

    await card("allowPrivateWebhooks").getByRole("checkbox", { name: "Private webhooks on" }).check();
    await card("allowPrivateWebhooks").getByRole("button", { name: "Save" }).click();
    await textMatching(card("allowPrivateWebhooks").getByTestId("value"), /^on$/, "private webhooks on");
    expect((await (await world.srv.admin("/admin/info")).json()).allow_private_webhooks).toBe(true);

    await card("logLevel").getByRole("combobox", { name: "Log level" }).selectOption("debug");
    await card("logLevel").getByRole("button", { name: "Save" }).click();
    await card("logLevel").getByRole("button", { name: "Reset" }).click();
    await textMatching(
      card("logLevel").locator(".badge"),
      /^from the environment$/,
      "the log level back to the environment's",
    );
    world.ui.expectNoErrors("settings");
  });

  test("the webhooks page shows the retry schedule in force and what is kept of the signing secret", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/workloads/${workload.id}/webhooks`);
    const note = page.getByTestId("retry-schedule");
    await textMatching(note, /retried at \+30 s and \+2 min \(3 attempts in all/, "the schedule in force");
    expect(await note.textContent()).toContain("30s,2m");
    await page.getByLabel("Destination URL").fill("https://localhost:9/hooks");
    await page.getByRole("button", { name: "Add destination" }).click();
    const secret = page.locator(".secret");
    await secret.getByTestId("secret").waitFor();
    expect(await secret.textContent()).toContain("inferd keeps this secret in plain text in its store");
    expect(await secret.textContent()).not.toContain("hash");
    await world.ui.checkWidths("settings-webhooks");
  });

  test("the join dialog says where the other machine gets inferd", async () => {
    const { page } = world.ui;
    await world.ui.visit("/workers");
    await page.getByText("Add a worker").click();
    await page.getByLabel("Worker name").fill("gpu-box-2");
    await page.getByRole("button", { name: "Add worker" }).click();
    const where = page.getByTestId("where-binary");
    await where.waitFor();
    expect(await where.textContent()).toContain("bun run build writes dist/inferd-linux-x64");
    const fromClone = await where.locator("pre code").textContent();
    expect(fromClone).toMatch(/^bun run start -- agent join https:\/\/\S+ --token \S+$/);
    expect(await page.getByTestId("join").locator("pre code").first().textContent()).toMatch(/^inferd agent join /);
    await world.ui.checkWidths("settings-join");
  });
});
