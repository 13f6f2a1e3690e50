import { describe, expect, test } from "bun:test";
import type { Browser } from "playwright-core";
import { openPage, signInAs } from "../helpers/browser";
import { servedUi } from "../helpers/ui-suite";

/**
 * Issue 32 item 16 in the browser: an admin user resetting their own password on the Users page is
 * asked for their current one (a wrong one is refused at that field); another user's row asks for none.
 */
const world = servedUi();
const AMY = { email: "amy@example.com", password: "amy's first passphrase" };

describe("changing one's own password in the dashboard", () => {
  test("the own row's Reset password asks for the current password; a wrong one is refused at the field, the right one sets it", async () => {
    for (const email of [AMY.email, "bert@example.com"]) {
      expect(
        (await world.srv.admin("/admin/users", { body: { email, role: "admin", password: AMY.password } })).status,
      ).toBe(201);
    }
    const ui = await openPage(world.ui.context.browser() as Browser, world.srv.url);
    try {
      await signInAs(ui, AMY.email, AMY.password);
      await ui.visit("/users");
      const { page } = ui;
      // Another user's row: no current password asked.
      await page.getByRole("button", { name: "Reset the password of bert@example.com" }).click();
      const other = page.getByRole("dialog", { name: "New password for bert@example.com" });
      await other.locator('input[name="password"]').waitFor();
      expect(await other.getByLabel("Your current password").count()).toBe(0);
      await other.getByRole("button", { name: "Cancel" }).click();

      await page.getByRole("button", { name: `Reset the password of ${AMY.email}` }).click();
      const own = page.getByRole("dialog", { name: `New password for ${AMY.email}` });
      const set = own.getByRole("button", { name: "Set password" });
      await own.locator('input[name="password"]').fill("amy's second passphrase");
      expect(await set.isDisabled()).toBe(true);
      await own.getByLabel("Your current password").fill("not my password at all");
      await set.click();
      await own.locator(".field-error").filter({ hasText: "the current password is wrong" }).waitFor();
      await own.getByLabel("Your current password").fill(AMY.password);
      await set.click();
      await page.getByTestId("secret").filter({ hasText: "amy's second passphrase" }).waitFor();
      const r = await world.srv.admin("/admin/session", {
        body: { email: AMY.email, password: "amy's second passphrase" },
      });
      expect(r.status).toBe(200);
    } finally {
      await ui.context.close();
    }
  });
});
