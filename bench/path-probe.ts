/**
 * The request that bench/path.ts measures, run by `bun test --coverage` (not part of the test suite):
 * inferd started in this process as `inferd serve` starts it, with the local agent and the fake vLLM
 * (test/fixtures/bin, on PATH with FAKE_GPUS from bench/path.ts), one project key and one workload;
 * then five warm-up chat requests on the project base URL and `PROBE_REQUESTS` more, one at a time.
 * `PROBE_STREAM=1` streams them. Any answer other than 200 fails the run.
 */
import { expect, test } from "bun:test";
import { startTestServer } from "../test/helpers/server";

const REQUESTS = Number(process.env.PROBE_REQUESTS ?? 10);
const STREAM = process.env.PROBE_STREAM === "1";
const MODEL = "path-model";
/** With bench/path-trace.ts preloaded: where to write the entries of `TRACED` requests. */
const TRACE = process.env.PROBE_TRACE;
const TRACED = 5;
const state = globalThis as unknown as { __pathEntries?: unknown[] | null };

test("chat requests on the project base URL", async () => {
  const s = await startTestServer({ INFERD_LOCAL_AGENT: "1", INFERD_RUNTIME_ENV: "FAKE_*", HF_HUB_OFFLINE: "1" });
  try {
    expect((await s.admin("/admin/projects", { body: { name: "Path", slug: "path" } })).status).toBe(201);
    const key = (await (await s.admin("/admin/projects/path/keys", { body: { name: "k", type: "live" } })).json())
      .secret as string;
    const made = await s.admin("/admin/projects/path/workloads", {
      body: { name: MODEL, backend: "vllm", model_name: MODEL, config: { command: `vllm serve ${MODEL}` } },
    });
    const workload = (await made.json()).id as string;
    const deadline = Date.now() + 60_000;
    for (;;) {
      const w = await (await s.admin(`/admin/workloads/${workload}`)).json();
      if (w.assignments?.[0]?.state === "ready") break;
      if (Date.now() > deadline) throw new Error(`the workload is not ready: ${JSON.stringify(w.assignments)}`);
      await Bun.sleep(50);
    }
    const body = JSON.stringify({
      model: MODEL,
      messages: [{ role: "user", content: "one two three" }],
      max_tokens: 8,
      stream: STREAM,
    });
    const chat = async () => {
      const r = await fetch(`${s.url}/endpoint/path/v1/chat/completions`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body,
      });
      const text = await r.text();
      if (r.status !== 200) throw new Error(`${r.status} ${text}`);
    };
    for (let i = 0; i < 5 + REQUESTS; i++) await chat();
    if (TRACE) {
      // Each request's entries run until the next request starts, so its end (metering after the
      // answer went out) is in them; the last one gets a moment for its end.
      const traced: unknown[] = [];
      for (let i = 0; i < TRACED; i++) {
        if (i > 0) traced.push(state.__pathEntries);
        state.__pathEntries = [];
        await chat();
      }
      await Bun.sleep(200);
      traced.push(state.__pathEntries);
      state.__pathEntries = null;
      await Bun.write(TRACE, JSON.stringify(traced));
    }
  } finally {
    await s.close();
  }
}, 120_000);
