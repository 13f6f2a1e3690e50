/**
 * Finding a model by name in the browser, against a real `inferd serve` (two fake RTX 4090s) whose
 * Hugging Face endpoint is the fake hub and whose Ollama library is the fake search page: typing a
 * name on the Models page lists the repos with each quantisation's size and fit, one click pulls a
 * quantisation and its card follows the download to ready; Serve this model picks the project and
 * lands on the workload form with the model and backend in its address; the Ollama library is
 * searched the same way; a failed pull's card wraps its long error at 1440 px and phone width, is
 * never offered in the workload form's model picker (whose own search box fills the field), and is
 * dismissed.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { startFakeHub, type FakeHub } from "../fixtures/hf-hub";
import { ggufRepo, ggufRepoFiles } from "../fixtures/hf-repos";
import { startFakeLibrary, type FakeLibrary } from "../fixtures/ollama/library";
import { tempDir } from "../helpers/proc";
import { bytes as bytesText } from "../../ui/lib/format";
import { servedUi } from "../helpers/ui-suite";
import { textMatching, until } from "../helpers/browser";

const TINY = "inferd-test/Tiny-GGUF";
const SINGLE = "inferd-test/Single-GGUF";
const GATED = "inferd-test/Gated-Model-With-A-Rather-Long-Name-To-Show-Wrapping-GGUF";
const MiB = 1 << 20;
let hub: FakeHub;
let lib: FakeLibrary;
/** Filled before the server starts (the suite's hooks read it then). */
const env: Record<string, string> = {};

beforeAll(async () => {
  const src = tempDir("hub-src");
  const sizes = {
    "Tiny-Q8_0.gguf": 4 * MiB,
    "Tiny-Q6_K-00001-of-00003.gguf": MiB,
    "Tiny-Q6_K-00002-of-00003.gguf": MiB,
    "Tiny-Q6_K-00003-of-00003.gguf": MiB,
  };
  [hub, lib] = await Promise.all([
    startFakeHub({
      repos: {
        [TINY]: {
          ...ggufRepo(join(src, "tiny"), { name: "Tiny", files: ggufRepoFiles("Tiny"), sizes }),
          downloads: 1200,
          likes: 40,
        },
        [SINGLE]: { ...ggufRepo(join(src, "single"), { name: "Single", files: ["Single-Q8_0.gguf"] }), downloads: 80 },
        [GATED]: { ...ggufRepo(join(src, "gated"), { name: "Gated", files: ["Gated-Q4_K_M.gguf"] }), gated: "files" },
      },
    }),
    startFakeLibrary(),
  ]);
  // Online: the fixtures set HF_HUB_OFFLINE=1 for every server, and offline means no hub search.
  Object.assign(env, {
    HF_ENDPOINT: hub.url,
    HF_HUB_OFFLINE: undefined as unknown as string,
    OLLAMA_LIBRARY_URL: lib.url,
  });
});
const world = servedUi(env);

describe("finding a model by name", () => {
  test("typing a name on the Models page lists quants with size and fit; Pull follows the download to ready", async () => {
    const { ui } = world;
    const { page } = ui;
    await ui.visit("/models");
    await page.getByRole("searchbox", { name: "Search models by name" }).fill("tiny");
    const hit = page.getByRole("listitem", { name: `Hit ${TINY}` });
    await hit.waitFor();
    await textMatching(page.getByTestId("search-status"), /^1 found on Hugging Face for “tiny”$/, "the search status");
    expect(await hit.textContent()).toContain("1,200 downloads · 40 likes");
    const q6 = hit.getByRole("listitem", { name: `Quant ${TINY} Q6_K` });
    // Three parts and the repo's vision projector, which the pull takes with the quant (as llama.cpp's -hf).
    const projector = bytesText(hub.file(TINY, "mmproj-Tiny-F16.gguf").size);
    await textMatching(
      q6,
      new RegExp(`Q6_K\\s*3\\.\\d MiB in 4 files, with its vision projector \\(${projector}\\)\\s*fits on GPU`),
      "the split quant's size and fit",
    );
    expect(await q6.textContent()).toMatch(
      /needs ≥ 0\.5 GiB · GPU \d \(NVIDIA GeForce RTX 4090\) on .+: [\d.]+ GiB free/,
    );
    expect(await hit.getByRole("listitem").filter({ hasText: "mmproj" }).count()).toBe(0);
    await ui.checkWidths("models-search");
    hub.throttle(1024 * 1024);
    await hit.getByRole("button", { name: `Pull ${TINY} Q8_0` }).click();
    const card = page.getByRole("listitem", { name: `Model hf:${TINY}:Q8_0` });
    await card.getByRole("progressbar").waitFor();
    await hit
      .getByRole("listitem", { name: `Quant ${TINY} Q8_0` })
      .locator(".badge", { hasText: "downloading" })
      .waitFor();
    hub.throttle(null);
    await card.locator(".badge", { hasText: "ready" }).waitFor();
    // The quant (4 MiB) and its projector.
    await textMatching(card, /llama · .* · 4\.\d MiB/, "the pulled model's shape");
    ui.expectNoErrors("search and pull");
  });

  test("Serve this model asks which project, then opens its workload form with the model and backend", async () => {
    const { ui, srv } = world;
    const { page } = ui;
    expect((await srv.admin("/admin/projects", { body: { name: "Second app", slug: "second-app" } })).status).toBe(201);
    const card = page.getByRole("listitem", { name: `Model hf:${TINY}:Q8_0` });
    await card.getByRole("button", { name: "Serve this model" }).click();
    const dialog = card.getByRole("dialog", { name: `Serve ${TINY}:Q8_0` });
    await dialog.getByRole("link", { name: "Second app" }).waitFor();
    await ui.checkWidths("serve-model");
    await dialog.getByRole("link", { name: "Serving" }).click();
    await until(() => new URL(page.url()).pathname === `/projects/${srv.project}/workloads/new`, "the workload form");
    const query = new URL(page.url()).searchParams;
    expect([query.get("model"), query.get("backend")]).toEqual([`${TINY}:Q8_0`, "llamacpp"]);
    ui.expectNoErrors("serve this model");
  });

  test("the Ollama library is searched the same way; Serve names the tag for the ollama backend", async () => {
    const { ui } = world;
    const { page } = ui;
    await ui.visit("/models");
    await page.getByRole("combobox", { name: "Look in" }).selectOption("ollama");
    await page.getByRole("searchbox", { name: "Search models by name" }).fill("qwen");
    const hit = page.getByRole("listitem", { name: "Hit qwen2.5", exact: true });
    await textMatching(
      hit.getByRole("listitem", { name: "Quant qwen2.5 0.5b" }),
      /0\.5b\s*~289 MiB\s*fits on GPU/,
      "the library tag's estimated size and fit",
    );
    await hit.getByRole("button", { name: "Serve qwen2.5:0.5b" }).click();
    const link = hit.getByRole("dialog").getByRole("link", { name: "Second app" });
    expect(await link.getAttribute("href")).toBe(
      "/projects/second-app/workloads/new?model=qwen2.5%3A0.5b&backend=ollama",
    );
    await link.click();
    await until(
      () => page.url().endsWith("/projects/second-app/workloads/new?model=qwen2.5%3A0.5b&backend=ollama"),
      "the ollama workload form",
    );
    ui.expectNoErrors("ollama library search");
  });

  test("a failed pull wraps its error, is never offered in the model picker (whose search fills the field), and is dismissed", async () => {
    const { ui, srv } = world;
    const { page } = ui;
    await ui.visit("/models");
    await page.getByRole("textbox", { name: /^Source/ }).fill(`${GATED}:Q4_K_M`);
    await page.getByRole("button", { name: "Pull", exact: true }).click();
    const card = page.getByRole("listitem", { name: `Model hf:${GATED}:Q4_K_M` });
    await card.locator(".badge", { hasText: "failed" }).waitFor();
    await textMatching(card.locator(".reason"), /is gated or private: set HF_TOKEN/, "the gated repo's error");
    await page.setViewportSize({ width: 1440, height: 900 });
    expect(await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth)).toBeLessThanOrEqual(1);
    const box = (await card.boundingBox())!;
    const reason = (await card.locator(".reason").boundingBox())!;
    expect(reason.x + reason.width).toBeLessThanOrEqual(box.x + box.width);
    await ui.checkWidths("models-failed");
    // The workload form's picker offers pulled models only; its own search fills the field.
    await ui.visit(`/projects/${srv.project}/workloads/new`);
    await page.getByRole("radio", { name: /^llama\.cpp/ }).check();
    const pick = page.getByRole("combobox", { name: "Pick a model" });
    await pick.locator("option", { hasText: `hf:${TINY}:Q8_0` }).waitFor({ state: "attached" });
    expect(await pick.locator("option", { hasText: GATED }).count()).toBe(0);
    await page.getByRole("searchbox", { name: "Search models by name" }).fill("single");
    await page.getByRole("button", { name: `Use ${SINGLE} Q8_0` }).click();
    expect(await page.getByRole("textbox", { name: /^GGUF file or Hugging Face model/ }).inputValue()).toBe(
      `${SINGLE}:Q8_0`,
    );
    await ui.visit("/models");
    await card.getByRole("button", { name: "Dismiss" }).click();
    await card.waitFor({ state: "detached" });
    expect(
      ((await (await srv.admin("/admin/models")).json()) as { source: string }[]).some((m) => m.source.includes(GATED)),
    ).toBe(false);
    ui.expectNoErrors("failed pull dismissed");
  });
});
