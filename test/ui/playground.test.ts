import { beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { HOOK_MS, servedUi } from "../helpers/ui-suite";
import { PHONE, DESKTOP, SCREENSHOTS, textMatching, until } from "../helpers/browser";

/**
 * The chat playground in the browser against a real `inferd serve` (fake vLLM answering
 * "You said: <last message>", loading for 8 s so a cold start can be watched): a request to a
 * workload scaled to zero shows the replica coming up (state, the runtime's load progress, how long
 * it has waited) until the answer starts; conversations are kept in the browser per workload (several,
 * renamed, deleted, surviving a reload, never shown for another workload); two workloads answer the
 * same prompt side by side with their own timings, stacked on a phone.
 */
const world = servedUi({ FAKE_LOAD_MS: "8000", FAKE_FIRST_TOKEN_MS: "40", FAKE_TOKEN_MS: "5" });
type Made = { id: string; slug: string };
let alpha: Made;
let beta: Made;
let sleepy: Made;

/** A workload at zero replicas until a request comes (and kept up for ten minutes after). */
const onDemand = (name: string) =>
  world.srv.createWorkload({
    name,
    backend: "vllm",
    model_name: name,
    config: { command: `vllm serve ${name}` },
    execution_policy: "autoscaling",
    execution_params: { min_replicas: 0, max_replicas: 1, idle_timeout_s: 600 },
  });

beforeAll(async () => {
  const { srv } = world;
  alpha = await srv.createWorkload({
    name: "alpha",
    backend: "vllm",
    model_name: "alpha",
    config: { command: "vllm serve alpha" },
  });
  beta = await srv.createWorkload({
    name: "beta",
    backend: "vllm",
    model_name: "beta",
    config: { command: "vllm serve beta" },
  });
  sleepy = await onDemand("sleepy");
  await Promise.all([alpha, beta].map((w) => srv.waitState(w.id, "ready", 60_000)));
  expect((await srv.workload(sleepy.id)).assignments[0].state).toBe("idle");
}, HOOK_MS);

const send = async (text: string) => {
  const box = world.ui.page.getByRole("textbox", { name: "Message" });
  await box.fill(text);
  await box.press("Enter");
};
const conversations = () => world.ui.page.getByRole("navigation", { name: "Conversations" }).locator("li button");
const answers = () => world.ui.page.locator(".msg.assistant .md");

describe("the chat playground", () => {
  test("a cold start shows the replica coming up (state, load progress, time waited), then the answer", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/workloads/${sleepy.id}/playground`);
    await send("wake up");
    const wait = page.locator(".msg.assistant").getByTestId("cold-start");
    await wait
      .getByText("Starting the model (it was scaled to zero)")
      .or(wait.getByText("Waiting for the model to start"))
      .first()
      .waitFor();
    await wait.locator(".badge", { hasText: "starting" }).waitFor();
    // The runtime's own loading bar, read from its log, as on the workload's page.
    await textMatching(
      wait.locator(".last-line"),
      /Loading safetensors checkpoint shards:\s+\d+% Completed/,
      "the runtime's load progress",
    );
    await wait.getByRole("progressbar", { name: "Runtime progress" }).waitFor();
    await textMatching(wait.getByTestId("waited"), /waiting [1-9]\d* s/, "the time waited");
    await page.screenshot({ path: join(SCREENSHOTS, "playground-coldstart-desktop.png"), fullPage: true });
    expect(await answers().count()).toBe(0);

    await textMatching(answers().first(), /^You said: wake up\s*$/, "the answer after the cold start");
    expect(await wait.count()).toBe(0);
    const stats = await textMatching(page.getByTestId("answer-stats"), /first token/, "the answer's stats");
    expect(Number(/first token (\d+) ms/.exec(stats)![1])).toBeGreaterThan(2000); // the wait is in the time to first token
    world.ui.expectNoErrors("the cold start");
  }, 90_000);

  test("conversations are kept per workload: several, renamed, deleted, surviving a reload", async () => {
    const { page } = world.ui;
    expect(await conversations().allTextContents()).toEqual(["wake up"]);
    await page.getByRole("button", { name: "New chat" }).click();
    expect(await page.locator(".chat > li").count()).toBe(0);
    await send("second chat");
    await textMatching(answers().first(), /^You said: second chat\s*$/, "the second conversation's answer");
    expect(await conversations().allTextContents()).toEqual(["second chat", "wake up"]);

    await page.getByRole("button", { name: "Rename" }).click();
    await page.getByLabel("Conversation name").fill("My test chat");
    await page.getByRole("button", { name: "Save name" }).click();
    await page.getByTestId("conversation-title").getByText("My test chat").waitFor();

    await page.reload();
    await conversations().first().waitFor();
    expect(await conversations().allTextContents()).toEqual(["My test chat", "wake up"]);
    expect(await page.getByRole("button", { name: "My test chat" }).getAttribute("aria-current")).toBe("true");
    await textMatching(answers().first(), /^You said: second chat\s*$/, "the open conversation after a reload");
    await page.getByRole("button", { name: "wake up" }).click();
    await textMatching(answers().first(), /^You said: wake up\s*$/, "the other conversation");
    expect(await page.locator(".msg.user .text").allTextContents()).toEqual(["wake up"]);
    // Its history goes with the next message.
    const sent = page.waitForRequest((r) => r.url().endsWith(`/admin/workloads/${sleepy.id}/chat`));
    await send("and again");
    expect((await sent).postDataJSON().messages.map((m: { content: string }) => m.content)).toEqual([
      "wake up",
      "You said: wake up",
      "and again",
    ]);
    await answers().nth(1).getByText("You said: and again").waitFor();

    await page.getByRole("button", { name: "My test chat" }).click();
    await page.getByRole("button", { name: "Delete" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Delete conversation" }).click();
    await until(
      async () => (await conversations().allTextContents()).join() === "wake up",
      "only the other conversation left",
    );
    await page.reload();
    await conversations().first().waitFor();
    expect(await conversations().allTextContents()).toEqual(["wake up"]);
    expect(await page.locator(".msg.user .text").allTextContents()).toEqual(["wake up", "and again"]);

    // Another workload has its own (none yet).
    await world.ui.visit(`/workloads/${alpha.id}/playground`);
    await conversations().first().waitFor();
    expect(await conversations().allTextContents()).toEqual(["New chat"]);
    expect(await page.locator(".chat > li").count()).toBe(0);
    world.ui.expectNoErrors("the kept conversations");
  }, 90_000);

  test("a deleted workload's conversations are forgotten, not shown for a new one of the same name", async () => {
    const { page } = world.ui;
    const temp = await onDemand("temp");
    await world.ui.visit(`/workloads/${temp.id}/playground`);
    await send("remember me");
    await page.getByRole("button", { name: "Stop" }).click();
    await page.locator(".msg.assistant.failed", { hasText: "Stopped." }).waitFor();
    const keys = () => page.evaluate(() => Object.keys(localStorage).filter((k) => k.startsWith("inferd.playground:")));
    expect((await keys()).some((k) => k.endsWith(temp.id))).toBe(true);

    await world.ui.visit("/projects");
    expect((await world.srv.admin(`/admin/workloads/${temp.id}`, { method: "DELETE" })).status).toBeLessThan(300);
    const again = await onDemand("temp");
    await world.ui.visit(`/workloads/${again.id}/playground`);
    await conversations().first().waitFor();
    expect(await conversations().allTextContents()).toEqual(["New chat"]);
    await until(
      async () => !(await keys()).some((k) => k.endsWith(temp.id)),
      "the deleted workload's conversations forgotten",
    );
    expect((await keys()).some((k) => k.endsWith(sleepy.id))).toBe(true);
    world.ui.expectNoErrors("a deleted workload");
  }, 60_000);
});

describe("comparing two workloads", () => {
  test("the same prompt to two workloads, answers side by side with each one's timings, stacked on a phone", async () => {
    const { page } = world.ui;
    await world.ui.visit(`/workloads/${alpha.id}/playground`);
    const pick = page.getByLabel("Compare with");
    // The project's other workloads arrive after the page does.
    const others = ["nobody (one conversation)", "beta (beta)", "sleepy (sleepy)", "temp (temp)"];
    await until(
      async () => (await pick.locator("option").count()) >= others.length,
      "the project's other workloads offered",
    );
    expect(await pick.locator("option").allTextContents()).toEqual(others);
    await pick.selectOption({ label: "beta (beta)" });
    await until(() => page.url().endsWith(`?compare=${beta.id}`), "the comparison in the URL");
    const cols = page.getByTestId("compare").locator("section");
    expect(await cols.locator("h2 a").allTextContents()).toEqual(["alpha", "beta"]);

    const sent: string[] = [];
    page.on("request", (r) => r.url().endsWith("/chat") && sent.push(r.url()));
    await send("hello both");
    for (const i of [0, 1])
      await textMatching(
        cols.nth(i).locator(".msg.assistant .md"),
        /^You said: hello both\s*$/,
        `column ${i + 1}'s answer`,
      );
    expect(sent.sort()).toEqual(
      [`${world.srv.url}/admin/workloads/${alpha.id}/chat`, `${world.srv.url}/admin/workloads/${beta.id}/chat`].sort(),
    );
    // Each runtime got its own request.
    const models = world.srv
      .events((e) => e.event === "request" && e.path === "/v1/chat/completions")
      .map((e) => e.model);
    expect(models).toContain("alpha");
    expect(models).toContain("beta");
    for (const i of [0, 1]) {
      const col = cols.nth(i);
      await textMatching(col.getByTestId("tokens"), /^4 out · \d+ in$/, `column ${i + 1}'s token counts`);
      expect(await col.getByTestId("ttft").textContent()).toMatch(/^\d+ ms/);
      expect(await col.getByTestId("total").textContent()).toMatch(/^(\d+ ms|\d+\.\d s)/);
    }
    expect(await page.getByRole("status").textContent()).toBe("Both answered");

    // A second prompt: each column sends its own history.
    const bodies: { messages: { content: string }[] }[] = [];
    page.on("request", (r) => r.url().endsWith("/chat") && bodies.push(r.postDataJSON()));
    await send("once more");
    for (const i of [0, 1])
      await cols.nth(i).locator(".msg.assistant .md", { hasText: "You said: once more" }).waitFor();
    expect(bodies.map((b) => b.messages.map((m) => m.content))).toEqual([
      ["hello both", "You said: hello both", "once more"],
      ["hello both", "You said: hello both", "once more"],
    ]);

    await world.ui.checkWidths("playground-compare");
    await page.setViewportSize(PHONE);
    const [first, second] = [await cols.nth(0).boundingBox(), await cols.nth(1).boundingBox()];
    expect(second!.y).toBeGreaterThanOrEqual(first!.y + first!.height);
    await page.setViewportSize(DESKTOP);
    const [left, right] = [await cols.nth(0).boundingBox(), await cols.nth(1).boundingBox()];
    expect(right!.x).toBeGreaterThan(left!.x + left!.width - 1);
    expect(right!.y).toBe(left!.y);

    // Back to one conversation: the kept ones are still there.
    await pick.selectOption({ label: "nobody (one conversation)" });
    await conversations().first().waitFor();
    world.ui.expectNoErrors("the comparison");
  }, 60_000);
});
