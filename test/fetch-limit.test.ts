/**
 * Bun's `fetch` runs at most 256 requests at once per process unless BUN_CONFIG_MAX_HTTP_REQUESTS
 * was set when the process started (issue 34): an inferd in front of a runtime with 400 slots must
 * still let 300 concurrent requests reach it, not 256 (src/fetch-limit.ts).
 */
import { afterAll, expect, test } from "bun:test";
import { cleanup, waitFor } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";

let s: Serving | undefined;
let client: Bun.Subprocess | undefined;
afterAll(async () => {
  client?.kill();
  await s?.stop();
  await cleanup();
});

test("300 requests at once reach a runtime with 400 slots through inferd", async () => {
  // Every answer takes a minute: the requests stay in flight while the test counts them.
  s = await startServing({ FAKE_DELAY_MS: "60000", FAKE_LOAD_MS: "50" });
  const w = await s.createWorkload({
    name: "wide",
    backend: "vllm",
    model_name: "wide",
    config: { command: "vllm serve wide --max-num-seqs 400" },
  });
  const ready = await s.waitState(w.id);
  expect(ready.assignments[0].concurrency).toBe(400);
  // The client is a process of its own with the limit raised (this test process keeps Bun's 256).
  const url = `${s.url}/endpoint/${s.project}/${w.slug}/v1/chat/completions`;
  const code = `
    const body = JSON.stringify({ messages: [{ role: "user", content: "hi" }], max_tokens: 2 });
    const headers = { authorization: "Bearer ${s.live}", "content-type": "application/json" };
    await Promise.all(Array.from({ length: 300 }, () => fetch(${JSON.stringify(url)}, { method: "POST", headers, body }).catch(() => {})));
  `;
  client = Bun.spawn([process.execPath, "-e", code], {
    env: { ...process.env, BUN_CONFIG_MAX_HTTP_REQUESTS: "1024" },
    stdout: "ignore",
    stderr: "ignore",
  });
  const most = () => Math.max(0, ...s!.events((e) => e.event === "request").map((e) => Number(e.in_flight)));
  await waitFor(async () => (most() >= 300 ? true : undefined), {
    what: "300 requests in flight at the runtime",
    timeoutMs: 45_000,
    detail: () => `the runtime saw at most ${most()} at once`,
  });
  expect(most()).toBe(300);
});
