/**
 * Issue 37, items 10, 11 and 13, in a real browser against a real `inferd serve` (fake GPUs, fake
 * llama-server, the fake Hugging Face hub): the workload form asks the hub about a typed model
 * before saving (an unknown repo or quantisation is shown, nothing is made); Delete names the
 * aliases that will answer 404; Back to a half-filled workload form brings it back while a new
 * visit starts empty; Compare with does not offer a failed workload; a project's batches are listed
 * with their state, counts and files, and a batch's requests show its id and each `custom_id`.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { startFakeHub, type FakeHub } from "../fixtures/hf-hub";
import { ggufRepo } from "../fixtures/hf-repos";
import { writeTinyGguf } from "../fixtures/gguf";
import { tempDir, waitFor } from "../helpers/proc";
import { textMatching, until } from "../helpers/browser";
import { servedUi } from "../helpers/ui-suite";

const TINY = "inferd-test/Tiny-GGUF";
let hub: FakeHub;
/** Filled before the server starts (the suite's hooks read it then). */
const env: Record<string, string> = { INFERD_MAX_CRASHES: "2" };

beforeAll(async () => {
  hub = await startFakeHub({ repos: { [TINY]: ggufRepo(join(tempDir("hub-src"), "tiny"), { name: "Tiny" }) } });
  // Online: the fixtures set HF_HUB_OFFLINE=1 for every server, and offline means no hub search.
  Object.assign(env, { HF_ENDPOINT: hub.url, HF_HUB_OFFLINE: undefined as unknown as string });
});
const world = servedUi(env);

/** A tiny GGUF for the fake llama-server. */
function gguf(): string {
  const path = join(tempDir("gguf"), "tiny.gguf");
  writeTinyGguf(path);
  return path;
}

/** A llama.cpp workload on a tiny GGUF; `crash` makes every start fail (two crashes: failed). */
function llama(name: string, extra: Record<string, unknown> = {}, crash = false) {
  return world.srv.createWorkload({
    name,
    backend: "llamacpp",
    model_name: name,
    config: { command: `${crash ? "env FAKE_CRASH_AT_START=9 " : ""}llama-server -m ${gguf()}` },
    ...extra,
  });
}

/** The project's workloads' names, from the admin API. */
async function workloadNames(): Promise<string[]> {
  const list = (await (await world.srv.admin(`/admin/projects/${world.srv.project}/workloads`)).json()) as {
    name: string;
  }[];
  return list.map((w) => w.name);
}

describe("models: the form asks the hub before saving", () => {
  test("an unknown repo or quantisation is shown at the command and nothing is made; a known one saves", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    await ui.visit(`/projects/${srv.project}/workloads/new`);
    await page.getByLabel("Name", { exact: true }).fill("hubbed");
    const model = page.getByRole("textbox", { name: /^GGUF file or Hugging Face model/ });
    await model.fill("inferd-test/Nothing-GGUF:Q4_K_M");
    await page.getByRole("button", { name: "Create workload" }).click();
    await page.getByText('Hugging Face has no GGUF model "inferd-test/Nothing-GGUF"').first().waitFor();
    expect(new URL(page.url()).pathname).toBe(`/projects/${srv.project}/workloads/new`);
    await model.fill(`${TINY}:Q5_K_S`);
    await page.getByRole("button", { name: "Create workload" }).click();
    await page.getByText(`"${TINY}" has no Q5_K_S quantisation; it has`).first().waitFor();
    await ui.checkWidths("truth-hub-check");
    expect(await workloadNames()).not.toContain("hubbed");
    await model.fill(`${TINY}:Q8_0`);
    await page.getByRole("button", { name: "Create workload" }).click();
    await until(async () => /^\/workloads\/[^/]+$/.test(new URL(page.url()).pathname), "the new workload's page");
    const id = new URL(page.url()).pathname.split("/")[2];
    await ui.visit("/projects");
    expect((await srv.admin(`/admin/workloads/${id}`, { method: "DELETE" })).status).toBeLessThan(300);
  });
});

describe("workloads: delete, Back, compare", () => {
  let good: { id: string; slug: string };
  let crashy: { id: string; slug: string };

  beforeAll(async () => {
    good = await llama("good", { aliases: ["good-too", "claude-*"] });
    await llama("other");
    crashy = await llama("crashy", {}, true);
    await Promise.all([world.srv.waitState(good.id), world.srv.waitState(crashy.id, "failed")]);
  }, 90_000);

  test("Delete names the model name and aliases that will answer 404", async () => {
    const { ui } = world;
    const { page } = ui;
    await ui.visit(`/workloads/${good.id}`);
    await page.getByRole("button", { name: "Delete workload" }).click();
    const dialog = page.getByRole("dialog");
    const names = dialog.getByTestId("delete-names");
    await names.waitFor();
    expect(await names.textContent()).toContain("404");
    expect(await names.locator("li code").allTextContents()).toEqual(["good", "good-too", "claude-*"]);
    await ui.checkWidths("truth-delete-aliases");
    await dialog.getByRole("button", { name: "Cancel" }).click();
  });

  test("Back to a half-filled workload form brings it back; a new visit starts empty", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    await ui.visit(`/projects/${srv.project}`);
    await page.getByRole("link", { name: "New workload" }).click();
    const name = page.getByLabel("Name", { exact: true });
    await name.fill("half-filled");
    await page.getByRole("textbox", { name: /^GGUF file or Hugging Face model/ }).fill("/models/half.gguf");
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Models" }).click();
    await until(async () => new URL(page.url()).pathname === "/models", "the Models page");
    await page.goBack();
    await until(async () => (await name.inputValue()) === "half-filled", "the name typed before leaving");
    expect(await page.getByRole("textbox", { name: /^GGUF file or Hugging Face model/ }).inputValue()).toBe(
      "/models/half.gguf",
    );
    await ui.checkWidths("truth-back-keeps-draft");
    await ui.visit(`/projects/${srv.project}`);
    await page.getByRole("link", { name: "New workload" }).click();
    await name.waitFor();
    expect(await name.inputValue()).toBe("");
  });

  test("Compare with does not offer a failed workload", async () => {
    const { ui } = world;
    const { page } = ui;
    await ui.visit(`/workloads/${good.id}/playground`);
    const options = page.locator("#compare-with option");
    const failed = options.filter({ hasText: "crashy" });
    await until(async () => (await failed.textContent())?.includes("failed") ?? false, "crashy marked failed");
    expect(await failed.isDisabled()).toBe(true);
    expect(await options.filter({ hasText: "other" }).isDisabled()).toBe(false);
    await ui.visit(`/workloads/${good.id}/playground?compare=${crashy.id}`);
    await page.getByRole("alert").filter({ hasText: "crashy is failed" }).waitFor();
    expect(await page.getByTestId("compare").count()).toBe(0);
    await ui.checkWidths("truth-compare-failed");
  });
});

describe("batches", () => {
  test("a project's batches list their state, counts and files; a batch's requests show its id and each custom_id", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    const w = await llama("batcher");
    await srv.waitState(w.id);
    const base = `${srv.url}/endpoint/${srv.project}/v1`;
    const auth = { authorization: `Bearer ${srv.live}` };
    const lines = ["first-question", "second-question"].map((custom_id) =>
      JSON.stringify({
        custom_id,
        method: "POST",
        url: "/v1/chat/completions",
        body: { model: "batcher", messages: [{ role: "user", content: custom_id }] },
      }),
    );
    const form = new FormData();
    form.set("purpose", "batch");
    form.set("file", new File([lines.join("\n")], "questions.jsonl"));
    const file = (await (await fetch(`${base}/files`, { method: "POST", headers: auth, body: form })).json()) as {
      id: string;
    };
    const made = await fetch(`${base}/batches`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ input_file_id: file.id, endpoint: "/v1/chat/completions", completion_window: "24h" }),
    });
    expect(made.status).toBe(200);
    const batch = (await made.json()) as { id: string };
    await waitFor(
      async () => {
        const b = await (await fetch(`${base}/batches/${batch.id}`, { headers: auth })).json();
        return b.status === "completed" || undefined;
      },
      { what: "the batch completed", timeoutMs: 60_000 },
    );

    await ui.visit(`/projects/${srv.project}`);
    await page.getByRole("navigation", { name: "Sections" }).getByRole("link", { name: "Batches" }).click();
    const row = page.getByTestId("batch-row").filter({ hasText: batch.id });
    await row.waitFor();
    await textMatching(row.getByTestId("batch-status"), /^completed$/, "the batch's state");
    await textMatching(row.getByTestId("batch-counts"), /^2 of 2 done$/, "the batch's counts");
    expect(await row.getByTestId("file-input").textContent()).toBe(file.id);
    const output = row.getByTestId("file-output");
    await output.waitFor();
    const href = (await output.getAttribute("href"))!;
    const got = await page.request.get(href);
    expect(got.status()).toBe(200);
    const ids = (await got.text())
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l).custom_id)
      .sort();
    expect(ids).toEqual(["first-question", "second-question"]);
    await ui.checkWidths("truth-batches");

    await row.getByRole("link", { name: batch.id }).click();
    await page.getByTestId("jobs-batch-id").filter({ hasText: batch.id }).waitFor();
    const jobs = page.getByTestId("batch-job");
    await until(async () => (await jobs.count()) === 2, "the batch's two requests");
    expect((await jobs.getByTestId("custom-id").allTextContents()).sort()).toEqual([
      "first-question",
      "second-question",
    ]);
    expect(await jobs.locator(".badge").allTextContents()).toEqual(["completed", "completed"]);
    await ui.checkWidths("truth-batch-jobs");

    // The workload's own list of jobs names each one's batch and custom_id too, linking the batch.
    await ui.visit(`/workloads/${w.id}/webhooks`);
    const named = page.getByTestId("job-batch");
    await until(async () => (await named.count()) === 2, "the two batch jobs named");
    expect((await named.locator("code").first().textContent()) ?? "").toMatch(/^(first|second)-question$/);
    expect(await named.first().getByRole("link").textContent()).toBe(batch.id);
    await ui.checkWidths("truth-workload-batch-jobs");
  });

  test("a batch of another project, or none, is a 404 in the contract's shape", async () => {
    const r = await world.srv.admin(`/admin/projects/${world.srv.project}/batches/batch_nope`);
    expect(r.status).toBe(404);
    expect((await r.json()).error.code).toBe("not_found");
  });
});
