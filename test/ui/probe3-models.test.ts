import { describe, expect, test } from "bun:test";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { openPage, signInAs, until } from "../helpers/browser";
import { servedUi } from "../helpers/ui-suite";
import { tempDir } from "../helpers/proc";

/**
 * Issue 32 (third security probe), follow-up of items 1 and 2, in the browser: an operator's Models
 * page says which project their pulls count against, offers no files found on the host, offers
 * Delete only on models pulled for their project, and shows the launch policy's refusal of a file
 * outside the model directories at the source field.
 */
const world = servedUi();
const OPERATOR = { email: "odin@example.com", password: "operator-pass-1234" };

describe("the Models page of an operator", () => {
  test("no host files, Delete only on their project's model, and a path outside the model directories refused at the field", async () => {
    const { srv } = world;
    const outside = join(tempDir("probe3-ui-outside"), "admins.gguf");
    writeFileSync(outside, new Uint8Array(2048).fill(3));
    mkdirSync(join(srv.dataDir, "models"), { recursive: true });
    const mine = join(srv.dataDir, "models", "odin.gguf");
    writeFileSync(mine, new Uint8Array(1024).fill(4));
    const admins = await srv.admin("/admin/models", { body: { source: outside } });
    expect(admins.status).toBeLessThan(300);
    expect(
      (await srv.admin("/admin/users", { body: { ...OPERATOR, role: "operator", projects: ["serving"] } })).status,
    ).toBe(201);

    const ui = await openPage(world.ui.context.browser() as Browser, srv.url);
    try {
      await signInAs(ui, OPERATOR.email, OPERATOR.password);
      await ui.visit("/models");
      const { page } = ui;
      await page.getByTestId("pull-project").filter({ hasText: "serving" }).waitFor();
      const adminCard = page.getByRole("listitem", { name: `Model ${outside}` });
      await adminCard.waitFor();
      expect(await adminCard.getByRole("button", { name: "Delete" }).count()).toBe(0);
      expect(await page.getByRole("heading", { name: "Found on this machine" }).count()).toBe(0);

      const form = page.getByRole("form", { name: "Pull a model" });
      await form.getByLabel("Source").fill("/etc/passwd");
      await form.getByRole("button", { name: "Pull" }).click();
      await form.getByText("--policy-model-paths").first().waitFor();
      // The refusal is the browser's one failed request: nothing else went wrong.
      expect(ui.errors.splice(0).filter((e) => !e.includes("status of 403"))).toEqual([]);

      await form.getByLabel("Source").fill(mine);
      await form.getByRole("button", { name: "Pull" }).click();
      const myCard = page.getByRole("listitem", { name: `Model ${mine}` });
      await myCard.getByTestId("pulled-for").filter({ hasText: "serving" }).waitFor();
      await myCard.getByRole("button", { name: "Delete" }).waitFor();
      await until(
        async () => (await adminCard.getByRole("button", { name: "Delete" }).count()) === 0,
        "still no Delete on the admin's model",
      );
      ui.expectNoErrors("the operator's Models page");
    } finally {
      await ui.context.close();
    }
  });
});
