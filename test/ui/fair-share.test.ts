import { describe, expect, test } from "bun:test";
import { servedUi } from "../helpers/ui-suite";
import { textMatching, until } from "../helpers/browser";

/**
 * A key's priority and weight in the browser against a real `inferd serve`: chosen in the key's
 * limits dialog, shown in words in the keys table, kept by the server, refused at the field when out
 * of range, and cleared again. At desktop and phone width, no console errors.
 */
const world = servedUi();

const liveKey = async () =>
  (
    (await (await world.srv.admin(`/admin/projects/${world.srv.project}/keys`)).json()) as {
      name: string;
      limits: Record<string, unknown>;
    }[]
  ).find((k) => k.name === "live")!;

describe("priority and share of a key in the dashboard", () => {
  test("set in the limits dialog, shown in words, refused at the field when out of range, cleared again", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/projects/${world.srv.project}/keys`);
    const row = page.getByRole("row").filter({ hasText: /^live/ });
    await row.getByText("no limits").waitFor();
    await row.getByRole("button", { name: "Edit limits of live" }).click();
    const dialog = page.getByRole("dialog", { name: "Limits of live" });
    expect(await dialog.getByLabel("Priority").inputValue()).toBe("");
    expect(await dialog.getByLabel("Share when busy").getAttribute("placeholder")).toBe("1");
    await dialog.getByLabel("Priority").selectOption("batch");
    await dialog.getByLabel("Share when busy").fill("1001");
    await dialog.getByRole("button", { name: "Save limits" }).click();
    const share = dialog.getByLabel("Share when busy");
    await until(async () => (await share.getAttribute("aria-invalid")) === "true", "the field marked invalid");
    await textMatching(
      page.locator(`#${await share.getAttribute("aria-describedby")}`),
      /1000|less|most/i,
      "the refusal under the field",
    );
    world.ui.errors.length = 0; // the browser logs the refused PATCH (400) we just provoked
    await share.fill("3");
    await dialog.getByRole("button", { name: "Save limits" }).click();
    await textMatching(
      row.locator(".limits-text"),
      /^batch priority · weight 3$/,
      "the key's priority and share in words",
    );
    expect((await liveKey()).limits).toMatchObject({ priority: "batch", weight: 3 });
    await world.ui.checkWidths("keys-fair-share");
    await row.getByRole("button", { name: "Edit limits of live" }).click();
    expect(await dialog.getByLabel("Priority").inputValue()).toBe("batch");
    expect(await dialog.getByLabel("Share when busy").inputValue()).toBe("3");
    await world.ui.checkWidths("key-limits-dialog-fair-share");
    await dialog.getByLabel("Priority").selectOption("");
    await dialog.getByLabel("Share when busy").fill("");
    await dialog.getByRole("button", { name: "Save limits" }).click();
    await textMatching(row.locator(".limits-text"), /^no limits$/, "priority and share back to their defaults");
    expect((await liveKey()).limits).toMatchObject({ priority: null, weight: null });
  });
});
