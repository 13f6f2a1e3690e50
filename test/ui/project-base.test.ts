import { beforeAll, describe, expect, test } from "bun:test";
import { HOOK_MS, servedUi } from "../helpers/ui-suite";
import { textMatching, until } from "../helpers/browser";

/**
 * The project's base URL in the browser against a real `inferd serve` (fake vLLM, fake GPUs): the
 * project page shows `/endpoint/<project>/v1` with snippets that answer as printed and notes for Open
 * WebUI, Continue and Ollama clients; a workload page shows the project base first and its own base
 * second; aliases and fallbacks are set through the form, shown on the workload page, and the
 * server's refusals (an alias taken, a fallback gone) are shown at their input; the playground shows
 * each answer's request id, errors too. Each page at desktop and phone width, no console errors.
 */
const world = servedUi();
/** The workload the others fall back to (a small context, so a large max_tokens is refused by the runtime). */
let backup: { id: string; slug: string };
let primaryUrl = "";

beforeAll(async () => {
  backup = await world.srv.createWorkload({
    name: "backup",
    backend: "vllm",
    model_name: "backup-model",
    config: { command: "vllm serve backup-model --max-model-len 64" },
  });
  await world.srv.waitState(backup.id);
}, HOOK_MS);

const run = (script: string) => {
  const p = Bun.spawnSync(["bash", "-c", script], { stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
};

describe("the project's base URL in the dashboard", () => {
  test("the project page: the base URL, snippets with a model name that answer as printed, and how to point Open WebUI, Continue and Ollama at it", async () => {
    const { page } = world.ui;
    const { srv } = world;
    const base = `${srv.url}/endpoint/${srv.project}/v1`;
    await world.ui.visit(`/projects/${srv.project}`);
    const card = page.getByTestId("project-base");
    expect(await textMatching(card.getByTestId("project-base-url"), /\/v1$/, "the base URL")).toBe(base);
    const code = card.locator(".snippets figure.code pre");
    const curl = (await code.first().textContent())!;
    expect(curl).toStartWith(`curl ${base}/chat/completions`);
    expect(curl).toContain(`"model":"backup-model"`);
    expect(await code.nth(1).textContent()).toContain(`client = OpenAI(base_url="${base}"`);
    expect(await code.nth(1).textContent()).toContain(`model="backup-model"`);
    expect(await code.nth(2).textContent()).toContain(`new OpenAI({ baseURL: "${base}"`);
    // The curl as printed answers through the project's base URL, routed by the model name.
    const r = run(`INFERD_API_KEY=${srv.live}\n${curl} -sS -w '\\n%{http_code}'`);
    expect(r.err).toBe("");
    expect(r.out.trim().split("\n").at(-1)).toBe("200");
    expect(JSON.parse(r.out.trim().split("\n").slice(0, -1).join("\n")).choices[0].message.content).toContain(
      "Say hello",
    );
    // Other tools: Open WebUI's connection, Continue's config, an Ollama client's host and key.
    expect(await card.getByTestId("note-open-webui").textContent()).toContain(
      `URL ${base} and a live key of this project`,
    );
    const cont = (await card.getByTestId("note-continue").locator("pre").textContent())!;
    expect(cont).toContain("provider: openai");
    expect(cont).toContain(`apiBase: ${base}`);
    expect(cont).toContain("model: backup-model");
    const ollama = (await card.getByTestId("note-ollama").locator("pre").textContent())!;
    expect(ollama).toContain(`host: "${srv.url}/endpoint/${srv.project}"`);
    expect(ollama).toContain("Authorization: `Bearer ${process.env.INFERD_API_KEY}`");
    await card.getByRole("button", { name: "Copy the base URL" }).click();
    await card.getByRole("button", { name: "Copied" }).waitFor();
    await world.ui.checkWidths("project-base");
  });

  test("a workload made through the form with an alias and a fallback; its page shows them and the project base first", async () => {
    const { page } = world.ui;
    const { srv } = world;
    await world.ui.visit(`/projects/${srv.project}/workloads/new`);
    await page.getByRole("radio", { name: /^vLLM A Hugging Face/ }).check();
    await page.getByLabel("Name", { exact: true }).fill("Primary");
    await page.getByRole("textbox", { name: /^Command/ }).fill("vllm serve primary-model");
    await page.getByRole("button", { name: "Add alias" }).click();
    await page.getByRole("textbox", { name: "Alias 1" }).fill("smart");
    await page.getByRole("button", { name: "Add fallback" }).click();
    expect(await page.getByRole("combobox", { name: "Fallback 1" }).inputValue()).toBe(backup.slug);
    // One other workload in the project: nothing more to add.
    expect(await page.getByRole("button", { name: "Add fallback" }).isDisabled()).toBe(true);
    await world.ui.checkWidths("workload-routing-new");
    await page.getByRole("button", { name: "Create workload" }).click();
    await page.getByRole("heading", { name: "Primary" }).waitFor();
    primaryUrl = new URL(page.url()).pathname;
    expect(await page.getByTestId("aliases").textContent()).toBe("smart");
    expect(await page.getByTestId("fallbacks").textContent()).toBe(backup.slug);
    const w = (await srv.workload(primaryUrl.split("/").pop()!)) as unknown as {
      aliases: string[];
      fallbacks: string[];
    };
    expect(w).toMatchObject({ aliases: ["smart"], fallbacks: [backup.slug] });
    // How to call it: the project's base URL first (this model's name), the workload's own second.
    const first = (await page.locator(".snippets pre code").first().textContent())!;
    expect(first).toStartWith(`curl ${srv.url}/endpoint/${srv.project}/v1/chat/completions`);
    expect(first).toContain(`"model":"primary-model"`);
    expect(await page.getByTestId("workload-snippets").locator("pre code").first().textContent()).toStartWith(
      `curl ${srv.url}/endpoint/${srv.project}/primary/v1/chat/completions`,
    );
    await world.ui.checkWidths("workload-routing");
    // Use with a coding agent: the same settings inferd launch writes, per agent, and what the runtime needs.
    const agents = page.getByTestId("coding-agents");
    expect(await agents.textContent()).toContain(`inferd launch claude --project ${srv.project} --workload primary`);
    expect(await agents.textContent()).toContain("--enable-auto-tool-choice --tool-call-parser <parser>");
    expect(await agents.locator("pre code").first().textContent()).toContain(
      `export ANTHROPIC_BASE_URL="${srv.url}/endpoint/${srv.project}"`,
    );
    await agents.getByRole("combobox", { name: "Agent" }).selectOption("codex");
    await until(async () => !!(await agents.textContent())?.includes(`wire_api = "responses"`), "Codex's config file");
    expect(await agents.textContent()).toContain(`base_url = "${srv.url}/endpoint/${srv.project}/v1"`);
  });

  test("an alias another workload has is refused at that alias's input; another name saves", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/projects/${world.srv.project}/workloads/new`);
    await page.getByRole("radio", { name: /^vLLM A Hugging Face/ }).check();
    await page.getByLabel("Name", { exact: true }).fill("Second");
    await page.getByRole("textbox", { name: /^Command/ }).fill("vllm serve second-model");
    await page.getByRole("button", { name: "Add alias" }).click();
    await page.getByRole("button", { name: "Add alias" }).click();
    await page.getByRole("button", { name: "Add alias" }).click();
    await page.getByRole("textbox", { name: "Alias 1" }).fill("fresh");
    // A blank input is not sent: the server's aliases.1 is the third input.
    await page.getByRole("textbox", { name: "Alias 3" }).fill("smart");
    await page.getByRole("button", { name: "Create workload" }).click();
    const taken = page.getByRole("textbox", { name: "Alias 3" });
    expect(await textMatching(page.locator("#error-aliases-1"), /already/, "the alias error")).toBe(
      `Alias "smart" is already the alias of workload "primary" in this project`,
    );
    expect(await taken.getAttribute("aria-invalid")).toBe("true");
    await until(() => taken.evaluate((el) => el === document.activeElement), "the refused alias to have focus");
    expect(await page.getByRole("textbox", { name: "Alias 1" }).getAttribute("aria-invalid")).toBeNull();
    expect(await page.getByTestId("form-error").count()).toBe(0);
    await until(() => world.ui.errors.length > 0, "the refused create to be logged");
    expect(world.ui.errors.splice(0)).toEqual([expect.stringContaining("409")]);
    await world.ui.checkWidths("workload-alias-taken");
    await page.getByRole("button", { name: "Remove alias 2" }).click();
    await page.getByRole("textbox", { name: "Alias 2" }).fill("clever");
    expect(await page.locator("#error-aliases-1").count()).toBe(0);
    await page.getByRole("button", { name: "Create workload" }).click();
    await page.getByRole("heading", { name: "Second" }).waitFor();
    expect(await page.getByTestId("aliases").textContent()).toBe("fresh, clever");
    world.ui.expectNoErrors("the second workload");
  });

  test("a fallback that is gone is refused at its input when saving; removed, the edit saves", async () => {
    const { page } = world.ui;
    const { srv } = world;
    await world.ui.visit(`${primaryUrl}/edit`);
    const fallback = page.getByRole("combobox", { name: "Fallback 1" });
    expect(await fallback.inputValue()).toBe(backup.slug);
    // The second workload is offered too, and the order is the user's.
    await page.getByRole("button", { name: "Add fallback" }).click();
    expect(await page.getByRole("combobox", { name: "Fallback 2" }).inputValue()).toBe("second");
    await page.getByRole("button", { name: "Move fallback 2 up" }).click();
    expect(await fallback.inputValue()).toBe("second");
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByRole("heading", { name: "Primary" }).waitFor();
    expect(await page.getByTestId("fallbacks").textContent()).toBe(`second → ${backup.slug}`);
    // Someone deletes the first fallback while the form is open: the save is refused at its input.
    await world.ui.visit(`${primaryUrl}/edit`);
    await page.getByRole("combobox", { name: "Fallback 2" }).waitFor();
    const list = (await (await srv.admin(`/admin/projects/${srv.project}/workloads`)).json()) as {
      id: string;
      slug: string;
    }[];
    expect(
      (await srv.admin(`/admin/workloads/${list.find((w) => w.slug === "second")!.id}`, { method: "DELETE" })).ok,
    ).toBe(true);
    await page.getByRole("button", { name: "Save" }).click();
    expect(await textMatching(page.locator("#error-fallbacks-0"), /No workload/, "the fallback error")).toBe(
      `No workload "second" in this project`,
    );
    expect(await fallback.getAttribute("aria-invalid")).toBe("true");
    await until(() => world.ui.errors.length > 0, "the refused save to be logged");
    expect(world.ui.errors.splice(0)).toEqual([expect.stringContaining("400")]);
    await world.ui.checkWidths("workload-fallback-gone");
    await page.getByRole("button", { name: "Remove fallback 1" }).click();
    expect(await fallback.inputValue()).toBe(backup.slug);
    await page.getByRole("button", { name: "Save" }).click();
    await page.getByRole("heading", { name: "Primary" }).waitFor();
    expect(await page.getByTestId("fallbacks").textContent()).toBe(backup.slug);
    world.ui.expectNoErrors("the fallback removed");
  });
});

describe("request ids in the playground", () => {
  test("each answer shows its request id, a refused one too, and the admin answer carries it", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/workloads/${backup.id}/playground`);
    await page.getByRole("textbox", { name: "Message" }).fill("which request is this");
    await page.getByRole("button", { name: "Send" }).click();
    const answer = page.locator(".msg.assistant").first();
    await answer.getByTestId("answer-stats").waitFor();
    const id = await textMatching(
      answer.getByTestId("request-id"),
      /^Request id: req_[0-9a-f]{32}/,
      "the answer's request id",
    );
    await answer.getByRole("button", { name: "Copy the request id" }).click();
    await answer.getByRole("button", { name: "Copied" }).waitFor();
    // A request the runtime refuses (more tokens than its context) shows its own id with the error.
    await page.getByText("Parameters").click();
    await page.getByLabel("Max tokens").fill("100000");
    await page.getByRole("textbox", { name: "Message" }).fill("too long an answer");
    await page.getByRole("button", { name: "Send" }).click();
    const failed = page.locator(".msg.assistant.failed");
    await failed.waitFor();
    const failedId = await textMatching(
      failed.getByTestId("request-id"),
      /^Request id: req_[0-9a-f]{32}/,
      "the refused answer's request id",
    );
    expect(failedId).not.toBe(id);
    await until(() => world.ui.errors.length > 0, "the refused request to be logged");
    expect(world.ui.errors.splice(0)).toEqual([expect.stringContaining("400")]);
    await world.ui.checkWidths("playground-request-id");
    // The admin playground's answers carry the id a client sent, kept when well-formed; a refusal too.
    const sent = await fetch(`${world.srv.url}/admin/workloads/${backup.id}/chat`, {
      method: "POST",
      headers: {
        authorization: `Bearer ${world.srv.adminToken}`,
        "content-type": "application/json",
        "x-request-id": "trace-42",
      },
      body: JSON.stringify({ messages: [{ role: "user", content: "hi" }] }),
    });
    expect(sent.status).toBe(200);
    expect(sent.headers.get("x-request-id")).toBe("trace-42");
    await sent.text();
    const none = await world.srv.admin(`/admin/workloads/nope/chat`, {
      body: { messages: [{ role: "user", content: "hi" }] },
    });
    expect(none.status).toBe(404);
    expect(none.headers.get("x-request-id")).toMatch(/^req_[0-9a-f]{32}$/);
  });
});
