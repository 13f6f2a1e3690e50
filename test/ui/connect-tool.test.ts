import { beforeAll, describe, expect, test } from "bun:test";
import type { Locator } from "playwright-core";
import { HOOK_MS, servedUi } from "../helpers/ui-suite";
import { textMatching, until } from "../helpers/browser";

/**
 * "Connect a tool" (issue 37), in a real browser against a real `inferd serve` (fake vLLM): from Get
 * started, a project and a key, pick a tool and get its exact settings with the project's base URL
 * and the key filled in (the secret just made, else a placeholder with a note), the Docker note for
 * Open WebUI, and the first request with that key shown live with its result. The curl printed is
 * run as it is, and its request is the one the view shows.
 */
const world = servedUi({ FAKE_FIRST_TOKEN_MS: "10", FAKE_TOKEN_MS: "2" });

let chat: { id: string; slug: string };

beforeAll(async () => {
  chat = await world.srv.createWorkload({
    name: "chat",
    backend: "vllm",
    model_name: "chat",
    config: { command: "vllm serve chat" },
  });
  await world.srv.waitState(chat.id);
}, HOOK_MS);

/** The text of the settings' code blocks shown now. */
const settings = (view: Locator) => view.getByTestId("connect-settings").locator("pre").allTextContents();

/** Runs a shell snippet as it was printed; its stdout. */
async function runShell(code: string): Promise<{ code: number; out: string }> {
  const p = Bun.spawn(["bash", "-c", code], { stdout: "pipe", stderr: "pipe" });
  const out = await new Response(p.stdout).text();
  return { code: await p.exited, out };
}

describe("connect a tool", () => {
  test("from Get started: the new key's secret in every tool's settings, and the first request live", async () => {
    const { page } = world.ui;
    const origin = world.srv.url.replace(/\/$/, "");
    await world.ui.visit(`/setup?project=${world.srv.project}&workload=${chat.id}`);
    await page.getByLabel("Key name").fill("laptop");
    await page.getByRole("button", { name: "Create key" }).click();
    const secret = (await page.getByTestId("secret").textContent())!.trim();
    expect(secret.length).toBeGreaterThan(10);
    await page.getByTestId("connect-tool-open").click();
    const view = page.getByTestId("connect-tool");
    await view.waitFor();
    await textMatching(view.getByTestId("connect-secret-note"), /secret: it is shown only now/, "the secret note");

    // Every tool's settings carry the project's base URL (in its own form) and the secret itself.
    const expected: Record<string, string[]> = {
      "Open WebUI": ["/endpoint/serving/v1", "host.docker.internal", "OPENAI_API_BASE_URL"],
      Continue: ['apiBase: "' + origin + '/endpoint/serving/v1"', "provider: openai", 'model: "chat"'],
      "Claude Code": [
        `ANTHROPIC_BASE_URL="${origin}/endpoint/serving"`,
        "ANTHROPIC_AUTH_TOKEN",
        'ANTHROPIC_MODEL="chat"',
      ],
      Codex: [`base_url = "${origin}/endpoint/serving/v1"`, "CODEX_HOME", 'wire_api = "responses"'],
      opencode: [`"baseURL": "${origin}/endpoint/serving/v1"`, '"model": "inferd/chat"'],
      "OpenAI SDK": [`base_url="${origin}/endpoint/serving/v1"`, `baseURL: "${origin}/endpoint/serving/v1"`],
      "Anthropic SDK": [`base_url="${origin}/endpoint/serving"`, "messages.create"],
      curl: [`curl ${origin}/endpoint/serving/v1/chat/completions`, '"model":"chat"'],
    };
    const tool = view.getByLabel("Tool");
    for (const [label, parts] of Object.entries(expected)) {
      await tool.selectOption({ label });
      await until(
        async () => {
          const text = (await settings(view)).join("\n");
          return text.includes(secret) && parts.every((p) => text.includes(p));
        },
        `${label}'s settings with the secret and ${parts.join(", ")}`,
      );
      // The Anthropic SDK appends /v1/messages itself: its base URL has no /v1.
      if (label === "Anthropic SDK") expect((await settings(view)).join("\n")).not.toContain("serving/v1");
      const docker = view.getByTestId("connect-docker-note");
      expect(await docker.count()).toBe(label === "Open WebUI" ? 1 : 0);
    }
    await tool.selectOption({ label: "Open WebUI" });
    await textMatching(
      view.getByTestId("connect-docker-note"),
      /127\.0\.0\.1 is the container itself/,
      "the Docker note",
    );
    await textMatching(
      view.getByTestId("connect-waiting"),
      /Waiting for a request with key laptop/,
      "the watch waiting",
    );
    await world.ui.checkWidths("connect-tool-setup");

    // The curl printed, run as it is: its request is shown live with its result.
    await tool.selectOption({ label: "curl" });
    const curl = (await settings(view))[0];
    const ran = await runShell(curl);
    expect(ran.code).toBe(0);
    const answer = JSON.parse(ran.out);
    const arrived = view.getByTestId("connect-arrived");
    await arrived.waitFor({ timeout: 30_000 });
    expect(await view.getByTestId("arrived-status").textContent()).toBe("200");
    expect(await view.getByTestId("arrived-model").textContent()).toBe("chat");
    expect(await view.getByTestId("arrived-tokens").textContent()).toBe(
      `${answer.usage.prompt_tokens} in, ${answer.usage.completion_tokens} out`,
    );
    await textMatching(arrived, /The first request arrived and was answered/, "the result in words");
    await world.ui.checkWidths("connect-tool-arrived");
  }, 120_000);

  test("from a key: a placeholder and a note for a secret not kept; a failed first request says why", async () => {
    const { page } = world.ui;
    const made = await world.srv.admin(`/admin/projects/${world.srv.project}/keys`, {
      body: { name: "editor", type: "live" },
    });
    const k = (await made.json()) as { id: string; prefix: string; secret: string };
    await world.ui.visit(`/projects/${world.srv.project}/keys`);
    await page.getByRole("button", { name: "Connect a tool with key editor" }).click();
    const view = page.getByTestId("connect-tool");
    await view.waitFor();
    // The key list is read when the view opens: the key is chosen once it is there.
    await until(async () => (await view.locator("select[name=connect_key]").inputValue()) === k.id, "the key chosen");
    await textMatching(
      view.getByTestId("connect-secret-note"),
      /Replace <secret of key editor> with the secret/,
      "the placeholder note",
    );
    await view.getByLabel("Tool").selectOption({ label: "Claude Code" });
    await until(
      async () => (await settings(view)).join("\n").includes('ANTHROPIC_AUTH_TOKEN="<secret of key editor>"'),
      "the placeholder in the settings",
    );
    expect((await settings(view)).join("\n")).not.toContain(k.secret);
    await world.ui.checkWidths("connect-tool-key");

    // A request the runtime refuses (no messages): its status and reason, live.
    const r = await world.srv.data(chat.slug, "/v1/chat/completions", {
      token: k.secret,
      body: { prompt: "no messages" },
    });
    expect(r.status).toBeGreaterThanOrEqual(400);
    await r.text();
    const arrived = view.getByTestId("connect-arrived");
    await arrived.waitFor({ timeout: 30_000 });
    expect(await view.getByTestId("arrived-status").textContent()).toBe(String(r.status));
    await textMatching(arrived, /The first request arrived and failed/, "the failure in words");
    // The reason the server kept for it is the one shown.
    const listed = await (await world.srv.admin(`/admin/workloads/${chat.id}/requests?limit=5`)).json();
    const row = listed.requests.find((x: { key: { id: string } | null }) => x.key?.id === k.id);
    const reason = row?.error_message ?? row?.error_code;
    if (reason)
      await textMatching(
        view.getByTestId("arrived-error"),
        new RegExp(reason.slice(0, 30).replace(/[.*+?^${}()|[\]\\]/g, "\\$&")),
        "the reason",
      );
    await world.ui.checkWidths("connect-tool-failed");
  }, 120_000);

  test("from the project page: the view opens and watches the project's first live key", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/projects/${world.srv.project}`);
    await page.getByTestId("project-connect").getByRole("button", { name: "Connect a tool" }).click();
    const view = page.getByTestId("connect-tool");
    await view.waitFor();
    await view.getByLabel("Tool").selectOption({ label: "Codex" });
    await until(async () => (await settings(view)).join("\n").includes("/endpoint/serving/v1"), "Codex's settings");
    await view.getByTestId("connect-waiting").waitFor();
    await world.ui.checkWidths("connect-tool-project");
    await view.getByRole("button", { name: "Close" }).click();
    await page.getByTestId("project-connect").getByRole("button", { name: "Connect a tool" }).waitFor();
    world.ui.expectNoErrors("closing the view");
  }, 60_000);
});
