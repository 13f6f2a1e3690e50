import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import type { Browser } from "playwright-core";
import { startServing, type Serving } from "../helpers/serving";
import { cleanup } from "../helpers/proc";
import { launchBrowser, openPage, signIn, textMatching, until, type UiPage } from "../helpers/browser";

/**
 * Workloads in the browser against a real `inferd serve` with fake vLLM and GPUs: the form per
 * backend with the final launch command, replica states, endpoint toggles, the streaming
 * playground, live logs in a terminal (colours, pause, download), editing and deleting.
 */
/** Hooks start (or stop) a server, runtimes and chromium on possibly busy cores. */
const HOOK_MS = 90_000;
let srv: Serving;
let browser: Browser;
let ui: UiPage;
let workloadUrl = "";

beforeAll(async () => {
  [srv, browser] = await Promise.all([startServing(), launchBrowser()]);
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
    await page.getByRole("textbox", { name: /^Model name/ }).fill("Qwen/Qwen3-8B");
    expect(await page.getByRole("textbox", { name: /^Command/ }).inputValue()).toBe("vllm serve Qwen/Qwen3-8B");
    const cmd = await textMatching(page.getByTestId("launch-command"), /--port/, "the launch preview");
    expect(cmd).toBe(`vllm serve Qwen/Qwen3-8B --tensor-parallel-size 1 --host 127.0.0.1 --port "<free port>"`);
    await page.getByText("--tensor-parallel-size is set to the replica's GPU count").waitFor();
    await page.getByTestId("launch-policy").filter({ hasText: "a project's control-plane key could save this command too" }).waitFor();
    await page.getByRole("textbox", { name: /^Command/ }).fill("vllm serve Qwen/Qwen3-8B --trust-remote-code");
    await page.getByTestId("launch-policy").filter({ hasText: "would be refused" }).filter({ hasText: "--trust-remote-code" }).waitFor();
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
    await page.getByTestId("preview-error").filter({ hasText: "unclosed double quote" }).waitFor();
    // The preview's 400 is logged by the browser; that one is expected.
    await until(() => ui.errors.length > 0, "the refused preview to be logged");
    expect(ui.errors.splice(0)).toEqual([expect.stringContaining("400")]);
    await page.getByRole("textbox", { name: /^Command/ }).fill("vllm serve Qwen/Qwen3-8B --max-model-len 4096");
    await textMatching(page.getByTestId("launch-command"), /--max-model-len 4096 --tensor-parallel-size 1/, "the new preview");
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
    const chatOn = async () => ((await srv.workload(workloadId())) as unknown as { endpoints: { chat: boolean } }).endpoints.chat;
    await until(async () => !(await chatOn()), "chat to be off");
    const off = await srv.data("qwen-chat", "/v1/chat/completions", { body: { messages: [{ role: "user", content: "hi" }] } });
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
    const r = await srv.data("qwen-chat", "/v1/chat/completions", { body: { messages: [{ role: "user", content: "while paused" }] } });
    expect(r.status).toBe(200);
    await page.getByText(/new characters held/).waitFor();
    await page.getByRole("button", { name: "Resume" }).click();
    await textMatching(rows, /POST \/v1\/chat\/completions/, "the held output");
    const [download] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Download" }).click()]);
    expect(download.suggestedFilename()).toMatch(/^serving-qwen-chat-asg_\w+\.log$/);
    expect(readFileSync((await download.path())!, "utf8")).toContain("Uvicorn running on");
    await ui.checkWidths("logs");
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
