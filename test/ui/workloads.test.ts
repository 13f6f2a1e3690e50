import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser } from "playwright-core";
import { startServing, type Serving } from "../helpers/serving";
import { cleanup, tempDir, waitFor } from "../helpers/proc";
import { launchBrowser, openPage, signIn, textMatching, until, type UiPage } from "../helpers/browser";
import { writeTinyGguf } from "../fixtures/gguf";

/**
 * Workloads in the browser against a real `inferd serve` with fake vLLM, llama-server and GPUs: the
 * form per backend with the final launch command, replica states, endpoint toggles, the streaming
 * playground, live logs in a terminal (colours, pause, download), stop/start/restart with the state
 * and last output line under the badge, retrying a failed replica, the execution policy with the
 * server's refusals at their fields, the llama.cpp model picker, each GPU's fit, editing and deleting.
 */
/** Hooks start (or stop) a server, runtimes and chromium on possibly busy cores. */
const HOOK_MS = 90_000;
let srv: Serving;
let browser: Browser;
let ui: UiPage;
let workloadUrl = "";
/** A GGUF file another tool left in llama.cpp's cache (offered by the model picker). */
let cache = "";

beforeAll(async () => {
  cache = tempDir("llama-cache");
  writeTinyGguf(join(cache, "cached-Q8_0.gguf"), { seed: 3 });
  // Runtimes take 3.5 s to load, so "starting" and its output can be seen; two crashes make "failed";
  // GPU memory is what the fake runtimes hold (not cycling readings), so a started replica finds room.
  const env = {
    FAKE_LOAD_MS: "3500",
    INFERD_MAX_CRASHES: "2",
    LLAMA_CACHE: cache,
    FAKE_GPU_USAGE_DIR: tempDir("gpu-usage"),
  };
  [srv, browser] = await Promise.all([startServing(env), launchBrowser()]);
  ui = await openPage(browser, srv.url);
  await signIn(ui, srv.adminToken);
}, HOOK_MS);
afterAll(async () => {
  await browser?.close();
  await srv?.stop();
  await cleanup();
}, HOOK_MS);

const workloadId = () => workloadUrl.split("/").pop()!;

describe("workloads in the browser", () => {
  test("the vLLM form shows the final command with the flags the agent adds; the replica gets ready", async () => {
    const { page } = ui;
    await ui.visit("/projects");
    await page.getByRole("link", { name: "Serving" }).click();
    await page.getByRole("link", { name: "New workload" }).click();
    await page.getByRole("radio", { name: /^vLLM A Hugging Face/ }).check();
    await page.getByLabel("Name", { exact: true }).fill("Qwen chat");
    // vLLM's model is typed once, in its command; the name clients send follows it.
    expect(await page.getByRole("textbox", { name: /^Command/ }).inputValue()).toBe("vllm serve <model>");
    await page.getByRole("textbox", { name: /^Command/ }).fill("vllm serve Qwen/Qwen3-8B");
    await page.getByTestId("served-name").filter({ hasText: "Clients send Qwen/Qwen3-8B as the model" }).waitFor();
    const cmd = await textMatching(page.getByTestId("launch-command"), /--port/, "the launch preview");
    expect(cmd).toBe(`vllm serve Qwen/Qwen3-8B --tensor-parallel-size 1 --host 127.0.0.1 --port "<free port>"`);
    await page.getByText("--tensor-parallel-size is set to the replica's GPU count").waitFor();
    await page
      .getByTestId("launch-policy")
      .filter({ hasText: "a project's control-plane key could save this command too" })
      .waitFor();
    await page.getByRole("textbox", { name: /^Command/ }).fill("vllm serve Qwen/Qwen3-8B --trust-remote-code");
    await page
      .getByTestId("launch-policy")
      .filter({ hasText: "would be refused" })
      .filter({ hasText: "--trust-remote-code" })
      .waitFor();
    await page.getByRole("textbox", { name: /^Command/ }).fill("vllm serve Qwen/Qwen3-8B");
    await textMatching(page.getByTestId("launch-command"), /Qwen3-8B --tensor-parallel-size/, "the preview again");
    await ui.checkWidths("workload-new");
    await page.getByRole("button", { name: "Create workload" }).click();
    await page.getByRole("heading", { name: "Qwen chat" }).waitFor();
    workloadUrl = new URL(page.url()).pathname;
    await page.locator("table .badge", { hasText: "ready" }).waitFor({ timeout: 30_000 });
    expect(await page.locator("table").first().textContent()).toContain("GPU 0");
    await ui.checkWidths("workload");
  });

  test("a command the server refuses is explained at the field", async () => {
    const { page } = ui;
    await ui.visit(`${workloadUrl}/edit`);
    await page.getByRole("textbox", { name: /^Command/ }).fill(`vllm serve "Qwen/Qwen3-8B`);
    await page.locator("#error-config-command").filter({ hasText: "unclosed double quote" }).waitFor();
    // The preview's 400 is logged by the browser; that one is expected.
    await until(() => ui.errors.length > 0, "the refused preview to be logged");
    expect(ui.errors.splice(0)).toEqual([expect.stringContaining("400")]);
    await page.getByRole("textbox", { name: /^Command/ }).fill("vllm serve Qwen/Qwen3-8B --max-model-len 4096");
    await textMatching(
      page.getByTestId("launch-command"),
      /--max-model-len 4096 --tensor-parallel-size 1/,
      "the new preview",
    );
    await ui.checkWidths("workload-edit");
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByRole("heading", { name: "Qwen chat" }).waitFor();
    const w = (await srv.workload(workloadId())) as unknown as { config: { command: string } };
    expect(w.config.command).toBe("vllm serve Qwen/Qwen3-8B --max-model-len 4096");
    await page.locator("table .badge", { hasText: "ready" }).waitFor({ timeout: 30_000 });
  });

  test("endpoint toggles switch the data plane off and on", async () => {
    const { page } = ui;
    const chat = page.getByRole("switch", { name: "Chat completions and Messages" });
    await chat.uncheck();
    const chatOn = async () =>
      ((await srv.workload(workloadId())) as unknown as { endpoints: { chat: boolean } }).endpoints.chat;
    await until(async () => !(await chatOn()), "chat to be off");
    const off = await srv.data("qwen-chat", "/v1/chat/completions", {
      body: { messages: [{ role: "user", content: "hi" }] },
    });
    expect(off.status).toBe(409);
    await chat.check();
    await until(chatOn, "chat to be on");
    expect(await chat.isChecked()).toBe(true);
    ui.expectNoErrors("toggles");
  });

  test("the playground streams the answer", async () => {
    const { page } = ui;
    await page.getByRole("link", { name: "Playground" }).click();
    await page.getByRole("textbox", { name: "Message" }).fill("hello from the browser");
    await page.getByRole("button", { name: "Send" }).click();
    await page.locator(".msg.assistant", { hasText: "You said: hello from the browser" }).waitFor();
    await textMatching(page.getByRole("status"), /Done in [\d.]+ s/, "the finished status");
    await ui.checkWidths("playground");
  });

  test("logs render the runtime's colours live, pause and resume, and download", async () => {
    const { page } = ui;
    await page.getByRole("link", { name: "Logs" }).click();
    const rows = page.locator(".xterm-rows");
    await textMatching(rows, /Uvicorn running on/, "the runtime's output");
    expect(await page.locator(".xterm-rows span[class*='xterm-fg-']").count()).toBeGreaterThan(0);
    await page.getByText("Following live").waitFor();
    await page.getByRole("button", { name: "Pause" }).click();
    await page.getByText(/^Paused/).waitFor();
    // New output while paused is held, then written on resume.
    const r = await srv.data("qwen-chat", "/v1/chat/completions", {
      body: { messages: [{ role: "user", content: "while paused" }] },
    });
    expect(r.status).toBe(200);
    await page.getByText(/new characters held/).waitFor();
    await page.getByRole("button", { name: "Resume" }).click();
    await textMatching(rows, /POST \/v1\/chat\/completions/, "the held output");
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      page.getByRole("button", { name: "Download" }).click(),
    ]);
    expect(download.suggestedFilename()).toMatch(/^serving-qwen-chat-asg_\w+\.log$/);
    expect(readFileSync((await download.path())!, "utf8")).toContain("Uvicorn running on");
    await ui.checkWidths("logs");
  });

  test("Stop: the replica goes idle with its reason and the button turns into Start; Start shows it coming up, then ready", async () => {
    const { page } = ui;
    await ui.visit(workloadUrl);
    const status = page.getByTestId("replica-status");
    await status.locator(".badge", { hasText: "ready" }).waitFor({ timeout: 30_000 });
    await page.getByRole("button", { name: "Stop", exact: true }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Stop workload" }).click();
    await status.locator(".badge", { hasText: "idle" }).waitFor();
    await textMatching(status.locator(".reason"), /^stopped by the operator/, "why it is idle");
    await page.getByRole("button", { name: "Start", exact: true }).waitFor();
    expect(await page.getByRole("button", { name: "Stop", exact: true }).count()).toBe(0);
    await textMatching(page.getByTestId("scaling"), /stopped by you/, "the scaling state");
    await ui.checkWidths("workload-stopped");
    await ui.visit("/");
    await page
      .getByRole("row")
      .filter({ hasText: "serving/qwen-chat" })
      .locator(".badge", { hasText: "idle" })
      .waitFor();
    await ui.visit(workloadUrl);
    await page.getByRole("button", { name: "Start", exact: true }).click();
    await status.locator(".badge", { hasText: "starting" }).waitFor();
    // The runtime's own loading bar, redrawn in place and stripped of its colours.
    const line = await textMatching(
      status.locator(".last-line"),
      /Loading safetensors checkpoint shards: +\d+% Completed/,
      "the last output line",
    );
    expect(line).not.toContain("\x1b");
    await status.locator(".badge", { hasText: "ready" }).waitFor({ timeout: 30_000 });
    await page.getByRole("button", { name: "Stop", exact: true }).waitFor();
    await textMatching(page.getByTestId("scaling"), /Wanted\s*1\s*Running\s*1\s*Ready\s*1/, "desired against current");
    ui.expectNoErrors("stop and start");
  });

  test("Restart replaces the replica with a new one that gets ready", async () => {
    const { page } = ui;
    const before = (await srv.workload(workloadId())).assignments[0].id;
    await page.getByRole("button", { name: "Restart" }).click();
    await page.getByRole("status").filter({ hasText: "Restarting" }).waitFor();
    await waitFor(
      async () => {
        const w = await srv.workload(workloadId());
        return w.assignments.length === 1 && w.assignments[0].id !== before && w.assignments[0].state === "ready";
      },
      { what: "the restarted replica ready", timeoutMs: 30_000 },
    );
    await until(async () => (await page.getByTestId("replica-status").count()) === 1, "one replica shown");
    await page.getByTestId("replica-status").locator(".badge", { hasText: "ready" }).waitFor();
    ui.expectNoErrors("restart");
  });

  test("a failed replica offers Retry and its logs; after the file is put in place, Retry gets it ready", async () => {
    const { page } = ui;
    const file = join(tempDir("later"), "later.gguf");
    const w = await srv.createWorkload({
      name: "later",
      backend: "llamacpp",
      model_name: "later",
      config: { command: `llama-server -m ${file} -c 512` },
    });
    await ui.visit(`/workloads/${w.id}`);
    const status = page.getByTestId("replica-status");
    await status.locator(".badge", { hasText: "failed" }).waitFor({ timeout: 30_000 });
    await textMatching(status.locator(".reason"), /exited with code 1/, "the failure's reason");
    await status.getByText("Last output").click();
    await status.locator(".last-output pre").filter({ hasText: "failed to open GGUF file" }).waitFor();
    const assignment = (await srv.workload(w.id)).assignments[0].id;
    expect(await page.getByRole("link", { name: "See its logs" }).getAttribute("href")).toBe(
      `/workloads/${w.id}/logs?replica=${assignment}`,
    );
    await ui.checkWidths("workload-failed");
    writeTinyGguf(file);
    await page.getByRole("button", { name: "Retry" }).click();
    await status.locator(".badge", { hasText: /^(pending|starting|ready)$/ }).waitFor();
    await status.locator(".badge", { hasText: "ready" }).waitFor({ timeout: 30_000 });
    expect(await page.getByRole("button", { name: "Retry" }).count()).toBe(0);
    ui.expectNoErrors("retry");
    // Leave its page first: a page still polling a deleted workload's charts would get (and log) 404s.
    await ui.visit("/");
    await srv.admin(`/admin/workloads/${w.id}`, { method: "DELETE" });
  });

  test("execution policy: the server's refusal is shown at the field; autoscaling to zero shows idle until a request", async () => {
    const { page } = ui;
    await ui.visit(`/projects/${srv.project}/workloads/new`);
    await page.getByRole("radio", { name: /^vLLM A Hugging Face/ }).check();
    await page.getByLabel("Name", { exact: true }).fill("Scaled");
    await page.getByRole("textbox", { name: /^Command/ }).fill("vllm serve scaled-model");
    await page.getByRole("radio", { name: /^Autoscaling/ }).check();
    await page.getByRole("spinbutton", { name: /^Minimum replicas/ }).fill("3");
    await page.getByRole("spinbutton", { name: /^Maximum replicas/ }).fill("2");
    await page.getByRole("button", { name: "Create workload" }).click();
    const max = page.getByRole("spinbutton", { name: /^Maximum replicas/ });
    await page
      .locator("label", { has: max })
      .locator(".field-error", { hasText: "max_replicas must be at least min_replicas" })
      .waitFor();
    expect(await max.getAttribute("aria-invalid")).toBe("true");
    await until(() => ui.errors.length > 0, "the refused create to be logged");
    expect(ui.errors.splice(0)).toEqual([expect.stringContaining("400")]);
    await ui.checkWidths("workload-policy-error");
    await page.getByRole("spinbutton", { name: /^Minimum replicas/ }).fill("0");
    await page.getByRole("spinbutton", { name: /^Stop an idle replica after/ }).fill("60");
    await page.getByRole("button", { name: "Create workload" }).click();
    await page.getByRole("heading", { name: "Scaled" }).waitFor();
    await textMatching(
      page.getByTestId("scaling"),
      /Autoscaling: 0 to 2 replicas by demand; a replica without requests sleeps \(vLLM, SGLang\) or stops after 1 min/,
      "the policy in words",
    );
    const status = page.getByTestId("replica-status");
    await status.locator(".badge", { hasText: "idle" }).waitFor();
    await textMatching(status.locator(".reason"), /scaled to zero: the first request starts it/, "why it is idle");
    await ui.checkWidths("workload-scaled-to-zero");
    expect(
      (await srv.data("scaled", "/v1/chat/completions", { body: { messages: [{ role: "user", content: "wake up" }] } }))
        .status,
    ).toBe(200);
    await status.locator(".badge", { hasText: "ready" }).waitFor();
    // A schedule whose cron pattern the server refuses, shown at the pattern.
    await page.getByRole("link", { name: "Edit" }).click();
    await page.getByRole("radio", { name: /^Scheduled/ }).check();
    await page.getByRole("radio", { name: "Cron pattern", exact: true }).check();
    await page.getByRole("textbox", { name: /^Cron pattern/ }).fill("every morning");
    await page.getByRole("button", { name: "Save" }).click();
    await page
      .locator("label", { has: page.getByRole("textbox", { name: /^Cron pattern/ }) })
      .locator(".field-error", { hasText: "must be a cron pattern" })
      .waitFor();
    await until(() => ui.errors.length > 0, "the refused save to be logged");
    expect(ui.errors.splice(0)).toEqual([expect.stringContaining("400")]);
    await ui.checkWidths("workload-schedule-error");
    await ui.visit("/");
    await srv.admin(`/admin/workloads/scaled`, { method: "DELETE" });
  });

  test("the llama.cpp form offers the store's and this machine's models, flags a missing file, and turns a hub reference into -hf", async () => {
    const { page } = ui;
    const own = join(tempDir("own"), "own-model.gguf");
    writeTinyGguf(own, { seed: 5 });
    const registered = await (await srv.admin("/admin/models", { body: { source: own } })).json();
    await waitFor(
      async () => (await (await srv.admin(`/admin/models/${registered.id}`)).json()).state === "ready" || undefined,
      { what: "the registered model ready" },
    );
    await ui.visit(`/projects/${srv.project}/workloads/new`);
    await page.getByRole("radio", { name: /^llama\.cpp/ }).check();
    const pick = page.getByRole("combobox", { name: "Pick a model" });
    const note = page.getByTestId("model-note");
    const command = page.getByRole("textbox", { name: /^Command/ });
    await pick.selectOption({ label: `${own} (486 KiB)` });
    expect(await page.getByRole("textbox", { name: /^GGUF file or Hugging Face model/ }).inputValue()).toBe(own);
    await note.filter({ hasText: "In inferd's models: 486 KiB, F32." }).waitFor();
    expect(await command.inputValue()).toBe(`llama-server -m ${own} -c 4096`);
    expect(await page.getByRole("textbox", { name: /^Model name/ }).inputValue()).toBe("own-model");
    await pick.selectOption({ label: "cached-Q8_0.gguf (llama.cpp-cache, 486 KiB)" });
    await note.filter({ hasText: "Found on this machine (llama.cpp-cache): 486 KiB, Q8_0." }).waitFor();
    expect(await command.inputValue()).toBe(`llama-server -m ${join(cache, "cached-Q8_0.gguf")} -c 4096`);
    const field = page.getByRole("textbox", { name: /^GGUF file or Hugging Face model/ });
    await field.fill("someone/Tiny-Chat-GGUF:Q8_0");
    await note.filter({ hasText: "Downloaded from Hugging Face before the runtime starts" }).waitFor();
    expect(await command.inputValue()).toBe("llama-server -hf someone/Tiny-Chat-GGUF:Q8_0 -c 4096");
    expect(await page.getByRole("textbox", { name: /^Model name/ }).inputValue()).toBe("Tiny-Chat");
    await field.fill("/nowhere/model.gguf");
    await note.filter({ hasText: "There is no file at this path on this machine" }).waitFor();
    expect(await field.getAttribute("aria-invalid")).toBe("true");
    await ui.checkWidths("workload-new-llama");
    // The registered model's fit: each fake GPU's free memory against its need.
    await ui.visit("/models");
    const card = page.getByRole("listitem", { name: `Model ${own}` });
    await card.getByText("Where it fits").click();
    const rows = card.getByTestId("fit").getByRole("row");
    await until(async () => (await rows.count()) === 3, "a row per GPU");
    await textMatching(rows.nth(1), /GPU 0 · NVIDIA GeForce RTX 4090.*of 24\.0 GiB.*fits/, "GPU 0's fit");
    await textMatching(rows.nth(2), /GPU 1 · NVIDIA GeForce RTX 4090.*fits/, "GPU 1's fit");
    await ui.checkWidths("models-gpus");
  });

  test("the workload can be deleted from its page", async () => {
    const { page } = ui;
    await ui.visit(workloadUrl);
    await page.getByRole("button", { name: "Delete workload" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Delete workload" }).click();
    await page.getByRole("heading", { name: "Serving" }).waitFor();
    expect((await srv.admin(`/admin/workloads/${workloadId()}`)).status).toBe(404);
    await ui.checkWidths("project");
  });
});
