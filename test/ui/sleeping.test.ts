import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { writeFileSync } from "node:fs";
import { tempDir } from "../helpers/proc";
import { textMatching } from "../helpers/browser";
import { servedUi } from "../helpers/ui-suite";

/**
 * A sleeping replica in the dashboard (issue 38), in a real browser against a real `inferd serve`
 * whose fake vLLM sleeps and wakes with vLLM's endpoints: the workload page shows it `sleeping`
 * ("asleep on GPU 0", the scaler's reason), the worker's page what sleeping replicas hold, and a
 * request brings it back to `ready` in the same process.
 */
const ram = join(tempDir("host-ram"), "ram.json");
writeFileSync(ram, JSON.stringify({ free_mib: 30_000 }));
const world = servedUi({
  FAKE_GPUS: "1x NVIDIA L4:24000",
  FAKE_GPU_USAGE_DIR: tempDir("usage"),
  FAKE_WEIGHTS_MIB: "21600",
  FAKE_HOST_RAM_FILE: ram,
  INFERD_SLEEP_RAM_MIB: "30000",
  // A slow wake, so the playground's wait can be seen.
  FAKE_WAKE_MS: "5000",
});

describe("sleeping replicas in the dashboard", () => {
  test("an idle replica shows sleeping on its workload and worker pages, then ready again after a request", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    const w = await srv.createWorkload({
      name: "dozer",
      backend: "vllm",
      model_name: "dozer",
      config: { command: "vllm serve dozer" },
      execution_policy: "autoscaling",
      execution_params: { min_replicas: 0, max_replicas: 1, idle_timeout_s: 1 },
    });
    const chat = () =>
      srv.data(w.slug, "/v1/chat/completions", {
        body: { messages: [{ role: "user", content: "hi" }], max_tokens: 4 },
      });
    expect((await chat()).status).toBe(200);
    await ui.visit(`/workloads/${w.id}`);
    const status = page.getByTestId("replica-status");
    await status.locator(".badge", { hasText: "sleeping" }).waitFor({ timeout: 30_000 });
    await textMatching(
      page.getByTestId("replica-gpus").first(),
      /^asleep on GPU 0 \(GPU memory freed\)$/,
      "where it sleeps",
    );
    await textMatching(status, /asleep \(level 1/, "why it sleeps");
    await ui.checkWidths("sleeping-workload");

    await ui.visit("/workers");
    await textMatching(page.getByTestId("sleep-ram"), /^1 asleep, holding/, "what the worker's sleeping replicas hold");
    await ui.checkWidths("sleeping-worker");

    // A question in the playground wakes it, and the wait says so.
    await ui.visit(`/workloads/${w.id}/playground`);
    const box = page.getByRole("textbox", { name: "Message" });
    await box.fill("wake up");
    await box.press("Enter");
    await textMatching(
      page.getByTestId("cold-start").locator("strong"),
      /^Waking the model/,
      "the wake in the playground",
    );
    await ui.checkWidths("sleeping-playground");
    await page.locator(".msg.assistant .md").first().waitFor({ timeout: 30_000 });
    await ui.visit(`/workloads/${w.id}`);
    await page.getByTestId("replica-status").locator(".badge", { hasText: "ready" }).waitFor();
    const starts = srv.events((e) => e.event === "start" && (e.argv as string[]).includes("dozer"));
    expect(starts.length).toBe(1);
  });
});
