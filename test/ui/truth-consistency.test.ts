import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { DESKTOP, openPage, PHONE, SCREENSHOTS, signInAs, textMatching, until, type UiPage } from "../helpers/browser";
import { servedUi } from "../helpers/ui-suite";
import { startServing } from "../helpers/serving";
import { tempDir, waitFor } from "../helpers/proc";
import { writeTinyGguf } from "../fixtures/gguf";
import { replicaPlace } from "../../ui/components/replica-status";
import { retryDelay } from "../../ui/lib/hooks";
import { defaultKeyLimitsView } from "../../src/limits/defaults";
import { cannotSignIn, seesNothing } from "../../ui/components/user-form";

/**
 * The dashboard tells one story (issue 37, items 5, 6, 7, 8 and 12), in a real browser against a
 * real `inferd serve` (fake 2× RTX 4090, fake llama-server): every page says the same of where a
 * replica runs (the backend the agent reports: a CPU fallback says CPU everywhere; a stopped one runs
 * nowhere); the Keys page shows the server's default key limits a key really gets; Settings puts the
 * live settings first, folds the restart-only ones and is read-only for a role that cannot save; an
 * open page recovers by itself after the server restarts; adding a user who could never sign in is
 * warned of, and the one-time card names whose password it is and the sign-in address; an operator
 * at Get started is offered what they can do; a viewer is not told bodies "can change".
 */
const world = servedUi();

const PASSWORD = "a-password-of-20-chars";
const OPERATOR = { email: "opal@example.com", password: PASSWORD };
const VIEWER = { email: "vera@example.com", password: PASSWORD };
/** What the fake llama-server says runs, as inferd's built-in llama.cpp names a CPU fallback. */
const CPU_FALLBACK = "CPU (GPU build unavailable: the CUDA build does not run on this machine)";
let workload = { id: "", slug: "" };
let requestId = "";

/** A fresh browser context (no cookies) on the same server, signed in as `who`. */
async function signedInAs(who: { email: string; password: string }): Promise<UiPage> {
  const ui = await openPage(world.ui.context.browser() as Browser, world.srv.url);
  await signInAs(ui, who.email, who.password);
  return ui;
}

/** Makes a user through the admin API. */
async function addUser(email: string, role: string): Promise<void> {
  const r = await world.srv.admin("/admin/users", { body: { email, role, projects: ["serving"], password: PASSWORD } });
  expect(r.status).toBe(201);
}

/** The page's full height at the current width, in CSS pixels. */
const height = (ui: UiPage) => ui.page.evaluate(() => document.documentElement.scrollHeight);

describe("one answer to where a replica runs (item 5)", () => {
  test("a replica that fell back to the CPU says so on the workload page, the overview and the workers page; stopped, it runs nowhere", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    const gguf = join(tempDir("gguf"), "tiny.gguf");
    writeTinyGguf(gguf);
    workload = await srv.createWorkload({
      name: "fallback",
      backend: "llamacpp",
      model_name: "fallback",
      config: { command: `env 'FAKE_BACKEND=${CPU_FALLBACK}' llama-server -m ${gguf}` },
    });
    const ready = await srv.waitState(workload.id);
    expect(ready.assignments[0].gpu_indices).toEqual([0]);
    expect((ready.assignments[0] as { backend?: string }).backend).toBe(CPU_FALLBACK);
    const answer = await srv.data(workload.slug, "/v1/chat/completions", {
      body: { messages: [{ role: "user", content: "hi" }] },
    });
    expect(answer.status).toBe(200);

    await ui.visit(`/workloads/${workload.id}`);
    const onWorkload = page.locator("section[aria-labelledby=replicas]").getByTestId("replica-gpus");
    await textMatching(onWorkload, /^CPU \(GPU build unavailable/, "the workload page's place");
    await ui.visit("/");
    const onOverview = page.locator("section[aria-labelledby=running]").getByTestId("replica-gpus");
    expect(await textMatching(onOverview, /^CPU \(GPU build/, "the overview's place")).toBe(CPU_FALLBACK);
    await ui.checkWidths("truth-place-overview");
    await ui.visit("/workers");
    await page.getByTestId("replica-gpus").first().waitFor();
    const workers = await page.getByTestId("replica-gpus").allTextContents();
    expect(workers).toEqual([CPU_FALLBACK]);
    await ui.checkWidths("truth-place-workers");

    // Stopped: no page says "GPU 0 · automatic" of a replica that runs nowhere.
    expect((await srv.admin(`/admin/workloads/${workload.id}/stop`, { method: "POST" })).status).toBeLessThan(300);
    await srv.waitState(workload.id, "idle");
    await ui.visit(`/workloads/${workload.id}`);
    const row = page.locator("section[aria-labelledby=replicas] tbody tr td").first();
    await textMatching(row, /not running/, "the stopped replica's place");
    expect(await row.textContent()).not.toMatch(/GPU 0|automatic/);
    await ui.checkWidths("truth-place-stopped");
    await ui.visit("/");
    await textMatching(onOverview, /^not running$/, "the overview's stopped replica");
    await ui.visit("/workers");
    await textMatching(page.getByTestId("replica-gpus").first(), /^not running$/, "the workers page's stopped replica");
    expect((await srv.admin(`/admin/workloads/${workload.id}/start`, { method: "POST" })).status).toBeLessThan(300);
  });

  test("the one helper: the reported backend beats the GPUs given; Ollama picks its own; a failed one names what it was given", () => {
    expect(replicaPlace({ state: "ready", gpu_indices: [0], backend: CPU_FALLBACK })).toBe(CPU_FALLBACK);
    expect(replicaPlace({ state: "ready", gpu_indices: [0, 1], backend: "CUDA" })).toBe("GPU 0, 1 · CUDA");
    expect(replicaPlace({ state: "starting", gpu_indices: [1] })).toBe("GPU 1");
    expect(replicaPlace({ state: "ready", gpu_indices: [] })).toBe("CPU");
    expect(replicaPlace({ state: "ready", gpu_indices: [] }, "ollama")).toBe("GPU chosen by Ollama");
    expect(replicaPlace({ state: "stopped", gpu_indices: [0] })).toBe("not running");
    expect(replicaPlace({ state: "idle", gpu_indices: [0] }, "ollama")).toBe("not running");
    expect(replicaPlace({ state: "failed", gpu_indices: [0] })).toBe("not running (was given GPU 0)");
  });
});

describe("a setting's effect where it acts (item 6)", () => {
  test("a key without limits of its own shows the server's default limits, as its rate-limit headers say", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    const set = await srv.admin("/admin/settings", { method: "PATCH", body: { defaultKeyLimits: "rpm=100" } });
    expect(set.status).toBe(200);
    await srv.waitState(workload.id);
    const r = await srv.data(workload.slug, "/v1/chat/completions", {
      body: { messages: [{ role: "user", content: "limits?" }] },
    });
    expect(r.status).toBe(200);
    expect(r.headers.get("x-ratelimit-limit-requests")).toBe("100");
    expect((await (await srv.admin("/admin/info")).json()).default_key_limits).toEqual({ rpm: 100 });

    await ui.visit("/projects/serving/keys");
    const live = page.locator("tr", { hasText: "live" }).first().getByTestId("key-limits");
    await textMatching(live, /^100 req\/min \(default\)$/, "the live key's default limit");
    expect(await live.getAttribute("title")).toContain("default key limits");
    await page.getByRole("button", { name: "Edit limits of live" }).click();
    const rpm = page.getByRole("dialog", { name: "Limits of live" }).getByLabel("Requests per minute");
    expect(await rpm.getAttribute("placeholder")).toBe("default: 100");
    await ui.checkWidths("truth-key-defaults");
    await page.getByRole("dialog", { name: "Limits of live" }).getByRole("button", { name: "Cancel" }).click();
    expect((await srv.admin("/admin/settings", { method: "PATCH", body: { defaultKeyLimits: null } })).status).toBe(
      200,
    );
    expect(defaultKeyLimitsView(["rpm=60", "max_concurrent=4"])).toEqual({ rpm: 60, max_concurrent: 4 });
    expect(defaultKeyLimitsView(["nonsense"])).toEqual({});
  });

  test("Settings: the live settings first, the restart-only ones folded, the page short at both widths", async () => {
    const { ui } = world;
    const { page } = ui;
    await ui.visit("/settings");
    await page.getByRole("heading", { name: "Change while serving" }).waitFor();
    const folded = page.getByTestId("restart-settings");
    expect(await folded.evaluate((d) => (d as HTMLDetailsElement).open)).toBe(false);
    expect(await page.getByTestId("setting-port").isVisible()).toBe(false);
    const headings = await page.locator("main h2").allTextContents();
    expect(headings.indexOf("Change while serving")).toBeLessThan(headings.indexOf("Need a restart"));
    await ui.checkWidths("truth-settings");
    expect(await height(ui)).toBeLessThan(2000);
    await page.setViewportSize(PHONE);
    expect(await height(ui)).toBeLessThan(3500);
    await page.setViewportSize(DESKTOP);
    await folded.locator("summary").click();
    await page.getByTestId("setting-port").waitFor();
  });

  test("Settings are read-only for an operator, whose Save is disabled (role message, item 12)", async () => {
    await addUser(OPERATOR.email, "operator");
    const op = await signedInAs(OPERATOR);
    await op.visit("/settings");
    const card = op.page.getByTestId("setting-webhookRetrySchedule");
    const field = card.getByRole("textbox", { name: "Webhook retry schedule" });
    await field.waitFor();
    expect(await field.isDisabled()).toBe(true);
    expect(await field.getAttribute("title")).toContain("only an admin");
    expect(await card.getByRole("button", { name: "Save" }).isDisabled()).toBe(true);
    expect(await op.page.getByTestId("setting-allowPrivateWebhooks").getByRole("checkbox").isDisabled()).toBe(true);
    await op.checkWidths("truth-settings-operator");
    await op.context.close();
  });
});

describe("role messages say what the role can do (item 12)", () => {
  test("an operator at Get started is offered their project, not a Create project form that answers 403", async () => {
    const op = await signedInAs(OPERATOR);
    const { page } = op;
    await op.visit("/setup");
    const note = page.getByTestId("setup-role-note");
    await textMatching(note, /Only an admin creates projects/, "the operator's note");
    expect(await page.getByRole("form", { name: "Create a project" }).count()).toBe(0);
    await op.checkWidths("truth-setup-operator");
    await page.getByRole("button", { name: "Continue with Serving" }).click();
    await page.getByRole("form", { name: "Create a workload" }).waitFor();
    op.expectNoErrors("the operator's setup");
    await op.context.close();
  });

  test("a viewer on a request's page is told who may read bodies, not that they 'can change' them", async () => {
    const { srv } = world;
    const captureUntil = new Date(Date.now() + 15 * 60_000).toISOString();
    const capture = await srv.admin(`/admin/workloads/${workload.id}`, {
      method: "PATCH",
      body: { capture_until: captureUntil },
    });
    expect(capture.status).toBe(200);
    await srv.waitState(workload.id);
    const asked = await srv.data(workload.slug, "/v1/chat/completions", {
      body: { messages: [{ role: "user", content: "captured" }] },
    });
    expect(asked.status).toBe(200);
    const list = await waitFor(
      async () => {
        const r = await (await srv.admin(`/admin/workloads/${workload.id}/requests`)).json();
        const captured = (r.requests ?? []).filter((x: { captured?: boolean }) => x.captured);
        return captured.length ? captured : undefined;
      },
      { what: "the workload's requests recorded" },
    );
    requestId = list[0].id;
    await addUser(VIEWER.email, "viewer");
    const viewer = await signedInAs(VIEWER);
    await viewer.visit(`/workloads/${workload.id}/requests/${requestId}`);
    const note = viewer.page.getByTestId("bodies-role-note");
    await textMatching(note, /only operators and admins of this project can read them/, "the viewer's note");
    expect(await note.textContent()).not.toContain("change");
    await viewer.checkWidths("truth-request-viewer");
    await viewer.context.close();
  });
});

describe("inviting a user who could never sign in (item 8)", () => {
  test("the form warns before Add user; the card names whose password it is and the sign-in address", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    await ui.visit("/users");
    await page.getByRole("button", { name: "Add user" }).click();
    const dialog = page.getByRole("dialog", { name: "Add a user" });
    await dialog.getByLabel("Email").fill("nina@example.com");
    await textMatching(
      dialog.getByTestId("never-signs-in"),
      /without a password this person can never sign in/,
      "the warning",
    );
    await textMatching(dialog.getByTestId("sees-nothing"), /see nothing/, "the no-project warning");
    await ui.checkWidths("truth-user-warned");
    await dialog.getByRole("checkbox", { name: / serving$/ }).check();
    await dialog.getByRole("button", { name: "Generate" }).click();
    await until(async () => (await dialog.getByTestId("never-signs-in").count()) === 0, "the warning gone");
    expect(await dialog.getByTestId("sees-nothing").count()).toBe(0);
    await dialog.getByRole("button", { name: "Add user" }).click();
    const card = page.getByTestId("password-once");
    await textMatching(card.locator("h3"), /^Password for nina@example\.com$/, "the card's heading");
    expect(await card.textContent()).not.toContain("Your new password");
    expect(await card.getByTestId("signin-address").textContent()).toBe(srv.url);
    await ui.checkWidths("truth-user-card");
    await card.getByRole("button", { name: "I have copied it" }).click();
    expect(cannotSignIn("", false)).toContain("can never sign in");
    expect(cannotSignIn("", true)).toBeNull();
    expect(seesNothing("admin", [])).toBeNull();
    expect(seesNothing("viewer", ["serving"])).toBeNull();
  });
});

describe("open pages recover after a restart (item 7)", () => {
  test("a page opened while the server is down says it reconnects, and shows its data once the server is back", async () => {
    const { ui } = world;
    const { page } = ui;
    await ui.visit("/");
    await page.getByRole("heading", { name: "Overview" }).waitFor();
    const old = world.srv;
    const port = new URL(old.url).port;
    await old.stop();
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Projects" }).click();
    await textMatching(page.locator("main .note.error"), /reconnecting/, "the reconnecting note");
    // Each try logs a refused connection in the browser's console, so these two are screenshots only.
    for (const [label, size] of [
      ["desktop", DESKTOP],
      ["phone", PHONE],
    ] as const) {
      await page.setViewportSize(size);
      await page.screenshot({ path: join(SCREENSHOTS, `truth-reconnecting-${label}.png`), fullPage: true });
    }
    await page.setViewportSize(DESKTOP);
    ui.errors.length = 0;
    // The same port, as a restarted service has: a moment after the old process it can still be taken
    // (sockets closing), which inferd refuses with "already in use", so that case is tried again.
    world.srv = await waitFor(
      () =>
        startServing({ ...old.storeEnv }, ["--port", port], old.dataDir).catch((e: Error) => {
          if (/already in use/.test(e.message)) return undefined;
          throw e;
        }),
      { what: `inferd listening again on port ${port}`, timeoutMs: 30_000 },
    );
    expect(world.srv.url).toBe(old.url);
    await page.getByRole("link", { name: "Serving" }).waitFor({ timeout: 30_000 });
    await until(async () => (await page.locator("main .note.error").count()) === 0, "the reconnecting note gone");
    ui.errors.length = 0;
    await ui.checkWidths("truth-reconnected");
    expect([0, 1, 2, 3, 4, 9].map(retryDelay)).toEqual([1000, 2000, 4000, 8000, 8000, 8000]);
  }, 90_000);
});
