import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Browser } from "playwright-core";
import { startServing, type Serving } from "../helpers/serving";
import { cleanup } from "../helpers/proc";
import { launchBrowser, openPage, type UiPage } from "../helpers/browser";
import { startOidcProvider, type OidcProvider } from "../fixtures/oidc-provider";

/**
 * Single sign-on in the browser: inferd started with `--oidc-*` against a real OpenID provider
 * (the `oidc-provider` package, test/fixtures/oidc-provider.ts). The sign-in page offers the
 * provider; a person signs in there, comes back to the page they asked for as a viewer (the default
 * role), sees only the project an admin then gives them, and a change is refused in place. A failed
 * sign-on comes back to the sign-in page with its reason.
 */
const HOOK_MS = 90_000;
const CLIENT = { client_id: "inferd-dashboard", client_secret: "a-client-secret-for-tests-only" };
let idp: OidcProvider;
let srv: Serving;
let browser: Browser;
let ui: UiPage;
let workloadId = "";

beforeAll(async () => {
  idp = await startOidcProvider({
    users: [{ sub: "sam", email: "sam@example.com", email_verified: true, name: "Sam Sso" }],
  });
  [srv, browser] = await Promise.all([
    startServing({
      INFERD_OIDC_ISSUER: idp.issuer,
      INFERD_OIDC_CLIENT_ID: CLIENT.client_id,
      INFERD_OIDC_CLIENT_SECRET: CLIENT.client_secret,
    }),
    launchBrowser(),
  ]);
  idp.setClient({ ...CLIENT, redirect_uris: [`${srv.url}/auth/oidc/callback`] });
  expect((await srv.admin("/admin/projects", { body: { name: "Other", slug: "other" } })).status).toBe(201);
  workloadId = (
    await srv.createWorkload({ name: "chat", backend: "vllm", model_name: "m", config: { command: "vllm serve m" } })
  ).id;
  ui = await openPage(browser, srv.url);
}, HOOK_MS);
afterAll(async () => {
  await browser?.close();
  await srv?.stop();
  await idp?.stop();
  await cleanup();
}, HOOK_MS);

describe("single sign-on in the browser", () => {
  test("signing in at the provider lands on the page asked for, as a viewer of only the projects an admin gives", async () => {
    const { page } = ui;
    await ui.visit("/projects");
    const sso = page.getByRole("link", { name: "Sign in with 127.0.0.1" });
    await sso.waitFor();
    await ui.checkWidths("sso-signin");
    await sso.click();
    // The provider's own login page (any password: it stands for the organisation's identity provider).
    await page.locator('input[name="login"]').fill("sam");
    await page.locator('input[name="password"]').fill("any");
    await page.getByRole("button", { name: "Sign-in" }).click();
    await page.waitForURL(`${srv.url}/projects`);
    await page.getByTestId("whoami").filter({ hasText: "sam@example.com" }).filter({ hasText: "viewer" }).waitFor();
    await page.getByTestId("no-projects").waitFor();
    ui.errors.splice(0); // the provider's pages are not ours

    // An admin gives the new user one project; the next look shows it, and only it.
    const users = (await (await srv.admin("/admin/users")).json()) as { id: string; email: string; source: string }[];
    const sam = users.find((u) => u.email === "sam@example.com")!;
    expect(sam.source).toBe("oidc");
    expect(
      (await srv.admin(`/admin/users/${sam.id}`, { method: "PATCH", body: { projects: [srv.project] } })).status,
    ).toBe(200);
    await ui.visit("/projects");
    await page.getByRole("link", { name: "Serving" }).waitFor();
    expect(await page.getByTestId("project-row").count()).toBe(1);
    expect(await page.getByRole("form", { name: "New project" }).count()).toBe(0);
    await ui.checkWidths("sso-viewer");

    // The workload's page has no change controls; a change forced by its address is refused in place.
    await ui.visit(`/workloads/${workloadId}`);
    await page.getByTestId("role-note").filter({ hasText: "can only look" }).waitFor();
    expect(await page.getByRole("button", { name: /^(Stop|Start|Restart)$/ }).count()).toBe(0);
    await ui.visit(`/workloads/${workloadId}/edit`);
    await page.getByRole("button", { name: "Save" }).click();
    await page
      .getByTestId("form-error")
      .filter({ hasText: /your role \(viewer\) can only look/i })
      .waitFor();
    expect(ui.errors.splice(0).every((e) => e.includes("403"))).toBe(true);

    // My sessions says how this browser signed in.
    await page.getByRole("link", { name: "My sessions" }).click();
    await page
      .getByTestId("session-row")
      .filter({ hasText: "Single sign-on" })
      .filter({ hasText: "this one" })
      .waitFor();
    ui.expectNoErrors("sso sessions");
  });

  test("a failed sign-on comes back to the sign-in page with its reason", async () => {
    const fresh = await openPage(browser, srv.url);
    await fresh.page.goto("/auth/oidc/callback?code=forged&state=forged");
    await fresh.page.getByTestId("sso-error").waitFor();
    expect(new URL(fresh.page.url()).pathname).toBe("/signin");
    expect(await fresh.page.getByTestId("sso-error").textContent()).toStartWith("Single sign-on did not work: ");
    await fresh.checkWidths("sso-error");
    await fresh.context.close();
  });
});
