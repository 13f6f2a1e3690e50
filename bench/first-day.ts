/**
 * The first-day path, timed and counted: a fresh `inferd serve` (built-in llama.cpp runtime, the fake
 * Hugging Face hub standing for huggingface.co) and Debian's chromium, from the signed-in dashboard to
 * the first answer in the playground on a model the user knows only by name ("SmolLM2").
 *
 * Paths (`bun bench/first-day.ts [path…]`, default every path this checkout has):
 * - `exact-id`: Get started with the model typed as `owner/repo:QUANT` (the user found the id on the
 *   hub's website first; that time is not counted here).
 * - `by-name`: the Models page's search → Pull the quant that fits → Serve this model → Create →
 *   playground.
 * Prints one line per path: `first day (<path>): <s> s, <n> clicks, <m> fields typed`.
 */
import { join } from "node:path";
import type { Locator, Page } from "playwright-core";
import { startFakeHub } from "../test/fixtures/hf-hub";
import { ggufRepo } from "../test/fixtures/hf-repos";
import { cleanup, startInferd, tempDir } from "../test/helpers/proc";
import { launchBrowser, openPage, signIn } from "../test/helpers/browser";

const REPO = "HuggingFaceTB/SmolLM2-135M-Instruct-GGUF";
const MiB = 1 << 20;
/** Longest a step may take (a pull and a cold start included). */
const STEP_MS = 120_000;

/** Counts what the user does. */
interface Tally {
  clicks: number;
  fields: number;
}

async function click(t: Tally, loc: Locator): Promise<void> {
  await loc.click({ timeout: STEP_MS });
  t.clicks++;
}

async function type(t: Tally, loc: Locator, text: string): Promise<void> {
  await loc.fill(text, { timeout: STEP_MS });
  t.fields++;
}

/**
 * Sends "hello" in the playground and waits for the whole answer. The answer is capped at 8 tokens
 * first (not counted as the user's doing): a model with random weights never stops on its own.
 */
async function firstAnswer(t: Tally, page: Page): Promise<void> {
  await page.getByText("Parameters").click();
  await page.getByLabel("Max tokens").fill("8");
  await type(t, page.getByRole("textbox", { name: "Message" }), "hello");
  await click(t, page.getByRole("button", { name: "Send" }));
  await page.locator(".msg.assistant").getByTestId("answer-stats").waitFor({ timeout: STEP_MS });
}

/** Get started with the exact id typed in. */
async function exactId(t: Tally, page: Page): Promise<void> {
  await click(t, page.getByRole("link", { name: "Get started" }).first());
  await type(t, page.getByLabel("Project name"), "Demo app");
  await click(t, page.getByRole("button", { name: "Create project" }));
  await type(t, page.getByRole("textbox", { name: /^Hugging Face model/ }), `${REPO}:Q4_K_M`);
  await click(t, page.getByRole("button", { name: "Create workload" }));
  await type(t, page.getByLabel("Key name"), "first-app");
  await click(t, page.getByRole("button", { name: "Create key" }));
  await click(t, page.getByRole("link", { name: "Try it in the playground" }));
  await firstAnswer(t, page);
}

/** The Models page's search, one-click pull and Serve this model (a project made in its dialog). */
async function byName(t: Tally, page: Page): Promise<void> {
  await click(t, page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Models" }));
  await type(t, page.getByRole("searchbox", { name: "Search models by name" }), "smollm2");
  await click(t, page.getByRole("button", { name: `Pull ${REPO} Q4_K_M` }));
  const card = page.getByRole("listitem", { name: `Model hf:${REPO}:Q4_K_M` });
  await click(t, card.getByRole("button", { name: "Serve this model" }));
  await click(t, card.getByRole("dialog").getByRole("button", { name: "Create project and continue" }));
  await click(t, page.getByRole("button", { name: "Create workload" }));
  await click(t, page.getByRole("link", { name: "Playground" }).first());
  await firstAnswer(t, page);
}

const PATHS: Record<string, (t: Tally, page: Page) => Promise<void>> = { "exact-id": exactId, "by-name": byName };

const wanted = process.argv.slice(2).length ? process.argv.slice(2) : Object.keys(PATHS);
for (const name of wanted) {
  const src = tempDir("first-day-hub");
  const files = ["SmolLM2-135M-Instruct-Q4_K_M.gguf", "SmolLM2-135M-Instruct-Q8_0.gguf"];
  const hub = await startFakeHub({
    repos: {
      [REPO]: ggufRepo(join(src, "smol"), {
        name: "SmolLM2-135M-Instruct",
        files,
        sizes: { [files[0]]: 3 * MiB, [files[1]]: 5 * MiB },
      }),
    },
  });
  const [srv, browser] = await Promise.all([
    startInferd({ env: { INFERD_LOCAL_AGENT: "1", INFERD_LOG_LEVEL: "warn", HF_ENDPOINT: hub.url } }),
    launchBrowser(),
  ]);
  try {
    const ui = await openPage(browser, srv.url);
    await signIn(ui, srv.adminToken);
    await ui.visit("/");
    const t: Tally = { clicks: 0, fields: 0 };
    const started = performance.now();
    await PATHS[name](t, ui.page);
    const secs = (performance.now() - started) / 1000;
    console.log(`first day (${name}): ${secs.toFixed(1)} s, ${t.clicks} clicks, ${t.fields} fields typed`);
  } catch (e) {
    console.log(`first day (${name}): not possible here (${(e as Error).message.split("\n")[0]})`);
  } finally {
    await browser.close();
    await srv.stop().catch(() => 0);
    await hub.stop();
  }
}
await cleanup();
