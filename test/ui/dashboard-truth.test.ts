import { describe, expect, test } from "bun:test";
import { join } from "node:path";
import { tempDir, waitFor } from "../helpers/proc";
import { textMatching, until } from "../helpers/browser";
import { servedUi } from "../helpers/ui-suite";
import { writeTinyGguf } from "../fixtures/gguf";

/**
 * The dashboard never contradicts the server, in a real browser against a real `inferd serve`
 * (fake 2× RTX 4090, fake llama-server and vLLM): a failed replica is counted failed, not running;
 * Restart's note goes once the restart is done; each replica row names the GPU its runtime was
 * given (as the fake runtime recorded it); "In flight" shows the runtime's own slots (`-np 4`) from
 * the start, failed or not; counts say "1 request"; no API call is suggested beside its button.
 */
// Runtimes take 3 s to load, so "starting" can be seen; two crashes make "failed".
const world = servedUi({ FAKE_LOAD_MS: "3000", INFERD_MAX_CRASHES: "2", FAKE_GPU_USAGE_DIR: tempDir("gpu-usage") });

/** A tiny GGUF for the fake llama-server (it checks the file's magic). */
function gguf(): string {
  const path = join(tempDir("gguf"), "tiny.gguf");
  writeTinyGguf(path);
  return path;
}

/** Leaves the workload's pages (whose polls would get 404s), then deletes it. */
async function removeWorkload(id: string): Promise<void> {
  await world.ui.visit("/projects");
  expect((await world.srv.admin(`/admin/workloads/${id}`, { method: "DELETE" })).status).toBeLessThan(300);
}

describe("the dashboard says what the server knows", () => {
  test("a replica that crashes at start is failed, not running, and still shows its 4 slots", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    const w = await srv.createWorkload({
      name: "crashy",
      backend: "llamacpp",
      model_name: "crashy",
      config: { command: `env FAKE_CRASH_AT_START=9 llama-server -m ${gguf()} -np 4` },
    });
    await ui.visit(`/workloads/${w.id}`);
    const status = page.getByTestId("replica-status");
    await status.locator(".badge", { hasText: "starting" }).waitFor();
    await textMatching(page.getByTestId("in-flight"), /^0 \/ 4$/, "the slots while it starts");
    await status.locator(".badge", { hasText: "failed" }).waitFor({ timeout: 30_000 });
    expect((await srv.workload(w.id)).assignments[0].state).toBe("failed");
    await textMatching(page.getByTestId("scaling-failed"), /^1$/, "the failed count");
    expect(await page.getByTestId("scaling-running").textContent()).toBe("0");
    expect(await page.getByTestId("in-flight").textContent()).toBe("0 / 4");
    await ui.checkWidths("dashboard-truth-failed");
    await removeWorkload(w.id);
  });

  test("two replicas show the GPUs their runtimes were given; In flight is 0 / 4 while starting and ready", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    const w = await srv.createWorkload({
      name: "pair",
      backend: "vllm",
      model_name: "pair",
      execution_policy: "fixed",
      execution_params: { replicas: 2 },
      config: { command: "vllm serve pair --max-num-seqs 4" },
    });
    await ui.visit(`/workloads/${w.id}`);
    const rows = page.locator("section[aria-labelledby=replicas] tbody tr");
    await until(async () => (await rows.count()) === 2, "two replica rows");
    await textMatching(rows.first().getByTestId("in-flight"), /^0 \/ 4$/, "the slots before ready");
    const ready = await srv.waitState(w.id);
    // What each runtime process was really given, as the fake recorded it, by the port it listens on.
    const given = new Map(
      srv
        .events((e) => e.event === "start" && e.persona === "vllm")
        .map((e) => [Number(e.port), String((e.env as Record<string, string>).CUDA_VISIBLE_DEVICES)]),
    );
    const expected = ready.assignments
      .map(
        (a) =>
          `GPU ${given
            .get(Number(new URL(a.base_url!).port))!
            .split(",")
            .join(", ")}`,
      )
      .sort();
    expect(expected).toEqual(["GPU 0", "GPU 1"]);
    await until(
      async () =>
        JSON.stringify((await rows.getByTestId("replica-gpus").allTextContents()).sort()) === JSON.stringify(expected),
      "the GPUs the runtimes were given",
    );
    await until(
      async () => (await rows.getByTestId("in-flight").allTextContents()).every((t) => t === "0 / 4"),
      "0 / 4 on both once ready",
    );
    await ui.checkWidths("dashboard-truth-gpus");
    await removeWorkload(w.id);
  });

  test("Restart's note goes once the restart is done; Stop's reason suggests no API call beside the Start button", async () => {
    const { srv, ui } = world;
    const { page } = ui;
    const w = await srv.createWorkload({
      name: "again",
      backend: "llamacpp",
      model_name: "again",
      config: { command: `llama-server -m ${gguf()} -np 4` },
    });
    const before = await srv.waitState(w.id);
    await ui.visit(`/workloads/${w.id}`);
    await page.getByTestId("replica-status").locator(".badge", { hasText: "ready" }).waitFor();
    await page.getByRole("button", { name: "Restart" }).click();
    const note = page.getByTestId("control-note");
    await textMatching(note, /^Restarting: /, "the note after Restart");
    await textMatching(note, /^$/, "the note gone once the restart is done");
    const after = await srv.workload(w.id);
    expect(after.assignments.every((a) => a.state === "ready")).toBe(true);
    const started = (list: typeof before.assignments) =>
      list.map((a) => `${a.id}:${(a as { generation?: number }).generation}`);
    expect(started(after.assignments)).not.toEqual(started(before.assignments));

    await page.getByRole("button", { name: "Stop" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Stop workload" }).click();
    await page.getByRole("button", { name: "Start" }).waitFor();
    const now = page.getByTestId("scaling").locator("p.muted", { hasText: "Now:" });
    await textMatching(now, /stopped by the operator/, "the reason once stopped");
    expect(await now.textContent()).not.toContain("POST");
    await textMatching(note, /^$/, "Stop's note gone once its replica stopped");
    await page.getByRole("button", { name: "Start" }).click();
    await textMatching(note, /^Started: /, "the note after Start");
    await textMatching(note, /^$/, "Start's note gone once its replica is ready");
    await removeWorkload(w.id);
  });

  test('counts read "1 request", not "1 requests"', async () => {
    const { srv, ui } = world;
    const { page } = ui;
    const w = await srv.createWorkload({
      name: "once",
      backend: "llamacpp",
      model_name: "once",
      config: { command: `llama-server -m ${gguf()}` },
    });
    await srv.waitState(w.id);
    expect(
      (await srv.data(w.slug, "/v1/chat/completions", { body: { messages: [{ role: "user", content: "hi" }] } }))
        .status,
    ).toBe(200);
    await waitFor(async () => (await srv.workload(w.id)).usage.requests === 1 || undefined, {
      what: "the request counted",
    });
    await ui.visit(`/workloads/${w.id}`);
    const stats = page.locator(".stats .stat");
    await textMatching(stats.first(), /^1 request$/, "one request, singular");
    expect(await stats.allTextContents()).toContain("0 errors");
    await ui.visit("/");
    await textMatching(page.locator(".stats .stat", { hasText: "GPU" }), /^2 GPUs$/, "the GPU count, plural");
    ui.expectNoErrors("plurals");
    await removeWorkload(w.id);
  });
});
