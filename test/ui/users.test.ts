import { describe, expect, test } from "bun:test";
import type { Browser } from "playwright-core";
import { openPage, signInAs, until, type UiPage } from "../helpers/browser";
import { servedUi } from "../helpers/ui-suite";

/**
 * Users and roles in the browser against a real `inferd serve`: the admin (signed in with the token)
 * adds an operator and a viewer on the Users page; the viewer signs in with their password, sees only
 * their project and no change controls, and a change forced through a page is refused with the
 * server's `forbidden_role` message in place; the operator makes a key in their project but cannot
 * make projects; revoking a session signs that browser out on its next request; and too many wrong
 * passwords are answered with the seconds to wait.
 */
const world = servedUi();

const OPERATOR = { email: "olive@example.com", password: "operator-pass-1234" };
const VIEWER = { email: "victor@example.com", password: "" };
let workloadId = "";
const pages: UiPage[] = [];

/** A fresh browser context (no cookies) on the same server. */
async function freshPage(): Promise<UiPage> {
  const ui = await openPage(world.ui.context.browser() as Browser, world.srv.url);
  pages.push(ui);
  return ui;
}

/** Fills the Add user dialog and submits it. */
async function addUser(
  ui: UiPage,
  u: { email: string; name: string; role: string; project: string; password?: string },
): Promise<void> {
  const { page } = ui;
  await page.getByRole("button", { name: "Add user" }).click();
  const dialog = page.getByRole("dialog", { name: "Add a user" });
  await dialog.getByLabel("Email").fill(u.email);
  await dialog.getByLabel("Name").fill(u.name);
  await dialog.getByLabel("Role").selectOption(u.role);
  await dialog.getByRole("checkbox", { name: new RegExp(` ${u.project}$`) }).check();
  if (u.password !== undefined) await dialog.getByLabel("Password").fill(u.password);
  else await dialog.getByRole("button", { name: "Generate" }).click();
  await dialog.getByRole("button", { name: "Add user" }).click();
}

describe("users and roles in the browser", () => {
  test("the admin adds an operator and a viewer on the Users page; the password is shown once; a taken email is refused at the field", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    expect((await srv.admin("/admin/projects", { body: { name: "Other", slug: "other" } })).status).toBe(201);
    workloadId = (
      await srv.createWorkload({ name: "chat", backend: "vllm", model_name: "m", config: { command: "vllm serve m" } })
    ).id;
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Users" }).click();
    await page.getByRole("heading", { name: "Users" }).waitFor();
    await page.getByText("No users yet").waitFor();
    await page.getByTestId("whoami").filter({ hasText: "admin token" }).waitFor();

    await addUser(ui, {
      email: OPERATOR.email,
      name: "Olive",
      role: "operator",
      project: "serving",
      password: OPERATOR.password,
    });
    expect(await page.getByTestId("secret").textContent()).toBe(OPERATOR.password);
    await page.getByRole("button", { name: "I have copied it" }).click();

    await addUser(ui, { email: VIEWER.email, name: "Victor", role: "viewer", project: "serving" });
    VIEWER.password = (await page.getByTestId("secret").textContent())!;
    expect(VIEWER.password.length).toBeGreaterThanOrEqual(12);
    const rows = page.getByTestId("user-row");
    await until(async () => (await rows.count()) === 2, "two users in the table");
    const viewerRow = rows.filter({ hasText: VIEWER.email });
    expect(await viewerRow.locator(".badge").textContent()).toBe("viewer");
    expect(await viewerRow.getByRole("link", { name: "serving" }).count()).toBe(1);
    await ui.checkWidths("users");

    // The same email again: refused at the email field, the dialog stays open.
    await page.getByRole("button", { name: "I have copied it" }).click();
    await page.getByRole("button", { name: "Add user" }).click();
    const dialog = page.getByRole("dialog", { name: "Add a user" });
    await dialog.getByLabel("Email").fill(VIEWER.email.toUpperCase());
    await dialog.getByRole("button", { name: "Add user" }).click();
    const email = dialog.getByRole("textbox", { name: "Email" });
    await until(async () => (await email.getAttribute("aria-invalid")) === "true", "the email field marked invalid");
    expect(await dialog.locator(".field-error").first().textContent()).toMatch(/taken|already|exists/i);
    // The browser logs the refused request (409) itself.
    expect(ui.errors.splice(0).every((e) => e.includes("409"))).toBe(true);
    await ui.checkWidths("users-add");
    await dialog.getByRole("button", { name: "Cancel" }).click();
  });

  test("the viewer signs in with the password, sees only their project and no change controls; a forced change is refused in place", async () => {
    const viewer = await freshPage();
    const { page } = viewer;
    await signInAs(viewer, VIEWER.email, VIEWER.password);
    await page.getByTestId("whoami").filter({ hasText: VIEWER.email }).filter({ hasText: "viewer" }).waitFor();
    const nav = page.getByRole("navigation", { name: "Main" });
    expect(await nav.getByRole("link", { name: "Users" }).count()).toBe(0);
    expect(await nav.getByRole("link", { name: "Get started" }).count()).toBe(0);

    await viewer.visit("/projects");
    await page.getByRole("link", { name: "Serving" }).waitFor();
    expect(await page.getByTestId("project-row").count()).toBe(1);
    expect(await page.getByRole("form", { name: "New project" }).count()).toBe(0);

    await viewer.visit("/projects/serving");
    await page.getByRole("link", { name: "chat" }).waitFor();
    expect(await page.getByRole("link", { name: "New workload" }).count()).toBe(0);
    expect(await page.getByRole("button", { name: "Delete project" }).count()).toBe(0);

    await viewer.visit(`/workloads/${workloadId}`);
    await page.getByTestId("role-note").filter({ hasText: "Your role (viewer) can only look" }).waitFor();
    expect(await page.getByRole("button", { name: /^(Stop|Start|Restart|Delete workload)$/ }).count()).toBe(0);
    expect(await page.getByRole("link", { name: "Edit" }).count()).toBe(0);
    expect(await page.getByRole("link", { name: "Playground" }).count()).toBe(0);
    const toggle = page.getByRole("switch").first();
    expect(await toggle.isDisabled()).toBe(true);
    expect(await toggle.getAttribute("title")).toContain("can only look");
    await viewer.checkWidths("viewer-workload");

    await viewer.visit("/projects/serving/keys");
    await page.getByTestId("role-note").waitFor();
    expect(await page.getByRole("form", { name: "New key" }).count()).toBe(0);
    expect(await page.getByRole("button", { name: "Revoke" }).count()).toBe(0);

    // Another project is not there at all.
    await viewer.visit("/projects/other");
    await page.getByText("There is no project").waitFor();
    viewer.errors.splice(0);

    // A change forced through a page the viewer reaches by its address: the server's refusal shows in the form.
    await viewer.visit(`/workloads/${workloadId}/edit`);
    await page.getByRole("button", { name: "Save" }).click();
    await page
      .getByTestId("form-error")
      .filter({ hasText: /your role \(viewer\) can only look/i })
      .waitFor();
    expect(viewer.errors.splice(0).every((e) => e.includes("403"))).toBe(true);
    await viewer.visit("/");
    viewer.expectNoErrors("the viewer's overview");
  });

  test("the operator makes a key in their project, sees no New project, Users or settings changes", async () => {
    const op = await freshPage();
    const { page } = op;
    await signInAs(op, OPERATOR.email, OPERATOR.password);
    await page.getByTestId("whoami").filter({ hasText: "operator" }).waitFor();
    expect(await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Users" }).count()).toBe(0);
    await op.visit("/projects");
    await page.getByRole("link", { name: "Serving" }).waitFor();
    expect(await page.getByRole("form", { name: "New project" }).count()).toBe(0);
    await op.visit("/projects/serving/keys");
    await page.getByLabel("Name").fill("olive-app");
    await page.getByRole("button", { name: "Create key" }).click();
    expect(await page.getByTestId("secret").textContent()).toStartWith("ik_live_");
    await op.visit("/settings");
    const save = page.getByRole("button", { name: "Save" }).first();
    await save.waitFor();
    expect(await save.getAttribute("title")).toContain("only an admin");
    op.expectNoErrors("operator's pages");
  });

  test("My sessions lists this browser and another; revoking the other signs it out on its next request", async () => {
    const first = pages[0];
    const second = await freshPage();
    await signInAs(second, VIEWER.email, VIEWER.password);
    await first.visit("/");
    await first.page.getByRole("link", { name: "My sessions" }).click();
    const rows = first.page.getByTestId("session-row");
    await until(async () => (await rows.count()) === 2, "two sessions of the viewer");
    expect(await rows.filter({ hasText: "this one" }).count()).toBe(1);
    await first.checkWidths("sessions");
    await rows.filter({ hasNotText: "this one" }).getByRole("button", { name: "Revoke" }).click();
    await until(async () => (await rows.count()) === 1, "one session left");
    // The other browser's next request is refused: it shows sign-in.
    await second.page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Projects" }).click();
    await second.page.getByRole("heading", { name: "Sign in to inferd" }).waitFor();
    first.expectNoErrors("revoking a session");
  });

  test("the admin demotes the operator on the Users page; the operator's next change is refused and their dashboard turns read-only", async () => {
    const { page } = world.ui;
    const op = pages[1];
    await op.visit("/projects/serving/keys");
    await op.page.getByRole("form", { name: "New key" }).waitFor();
    await page.getByRole("button", { name: `Edit ${OPERATOR.email}` }).click();
    const dialog = page.getByRole("dialog", { name: `Edit ${OPERATOR.email}` });
    await dialog.getByLabel("Role").selectOption("viewer");
    await dialog.getByRole("button", { name: "Save user" }).click();
    await page
      .getByTestId("user-row")
      .filter({ hasText: OPERATOR.email })
      .locator(".badge", { hasText: "viewer" })
      .waitFor();
    // The operator's page still offers the form (read once); the server refuses, and the dashboard asks again who they are.
    await op.page.getByLabel("Name").fill("too-late");
    await op.page.getByRole("button", { name: "Create key" }).click();
    await op.page.getByTestId("whoami").filter({ hasText: "viewer" }).waitFor();
    await op.page.getByTestId("role-note").filter({ hasText: "Your role (viewer) can only look" }).waitFor();
    expect(op.errors.splice(0).every((e) => e.includes("403"))).toBe(true);
  });

  test("too many wrong passwords are refused with the seconds to wait", async () => {
    const ui = await freshPage();
    const { page } = ui;
    await ui.visit("/signin");
    await page.getByLabel("Email").fill("nobody@example.com");
    const password = page.getByLabel("Password");
    const signIn = page.getByRole("button", { name: "Sign in", exact: true });
    const attempt = async (n: number) => {
      await password.fill(`wrong-password-${n}`);
      const [answer] = await Promise.all([
        page.waitForResponse((r) => new URL(r.url()).pathname === "/admin/session"),
        signIn.click(),
      ]);
      return answer.status();
    };
    for (let i = 0; i < 5; i++) {
      expect(await attempt(i)).toBe(401);
      await page
        .getByRole("alert")
        .filter({ hasText: /e-?mail or password is wrong/i })
        .waitFor();
    }
    expect(await attempt(5)).toBe(429);
    await page
      .getByTestId("too-many")
      .filter({ hasText: /Try again in \d+ s\./ })
      .waitFor();
    // The browser logs each refused sign-in itself.
    expect(ui.errors.splice(0).map((e) => /status of (\d+)/.exec(e)?.[1])).toEqual([
      "401",
      "401",
      "401",
      "401",
      "401",
      "429",
    ]);
    await ui.checkWidths("signin-limited");
  });
});
