import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "./helpers/server";
import { cleanup, waitFor } from "./helpers/proc";
import { sseEvents, startServing, type Serving } from "./helpers/serving";

/** The admin API behind the dashboard's extras: launch preview, server info, /metrics, series, playground. */
let t: TestServer;
beforeAll(async () => {
  t = await startTestServer({ INFERD_METRICS_TOKEN: "scrape-me" });
});
afterAll(async () => {
  await t.close();
  await cleanup();
});

describe("launch preview", () => {
  test("vLLM: the final command with the TP and port flags the agent adds", async () => {
    const r = await t.admin("/admin/launch-preview", {
      body: { backend: "vllm", model_name: "m", config: { command: "vllm serve m --max-model-len 4096" }, gpus: 2 },
    });
    expect(r.status).toBe(200);
    const p = await r.json();
    expect(p.argv).toEqual([
      "vllm",
      "serve",
      "m",
      "--max-model-len",
      "4096",
      "--tensor-parallel-size",
      "2",
      "--host",
      "127.0.0.1",
      "--port",
      "<free port>",
    ]);
    expect(p).toMatchObject({ port_added: true, tp_added: true, builtin: false });
  });
  test("an explicit port and TP are kept as written; the runtime still listens on loopback only", async () => {
    const p = await (
      await t.admin("/admin/launch-preview", {
        body: {
          backend: "vllm",
          model_name: "m",
          config: { command: "vllm serve m --port 9000 -tp 4 --host 0.0.0.0" },
        },
      })
    ).json();
    expect(p.argv).toEqual(["vllm", "serve", "m", "--port", "9000", "-tp", "4", "--host", "127.0.0.1"]);
    expect(p).toMatchObject({ port_added: false, tp_added: false });
  });
  test("llama.cpp without llama-server installed says the built-in runtime will serve it", async () => {
    const p = await (
      await t.admin("/admin/launch-preview", {
        body: { backend: "llamacpp", model_name: "m", config: { command: "llama-server -m /models/a.gguf" } },
      })
    ).json();
    expect(p.builtin).toBe(true);
    expect(p.argv.slice(-4)).toEqual(["--host", "127.0.0.1", "--port", "<free port>"]);
  });
  test("a config the backend does not take is the same 400 as on create", async () => {
    const r = await t.admin("/admin/launch-preview", { body: { backend: "vllm", model_name: "m", config: {} } });
    expect(r.status).toBe(400);
    expect((await r.json()).error.field).toBe("config.command");
  });
});

describe("server info and /metrics", () => {
  test("info says what this server is", async () => {
    const info = await (await t.admin("/admin/info")).json();
    expect(info).toMatchObject({
      allow_private_webhooks: false,
      builtin_llama: true,
      ollama: { running: expect.any(Boolean) },
    });
    expect(info.version).toBeString();
  });
  test("/metrics needs the admin token or the metrics token, and speaks Prometheus text", async () => {
    expect((await fetch(`${t.url}/metrics`)).status).toBe(401);
    expect((await t.call("/metrics", "wrong")).status).toBe(401);
    const r = await t.call("/metrics", "scrape-me");
    expect(r.status).toBe(200);
    expect(r.headers.get("content-type")).toContain("text/plain");
    const text = await r.text();
    expect(text).toContain("# TYPE inferd_requests_total counter");
    expect(text).toContain("# TYPE inferd_queue_depth gauge");
    expect((await t.admin("/metrics")).status).toBe(200);
  });
});

describe("with a running workload", () => {
  let s: Serving;
  let w: { id: string; slug: string };
  beforeAll(async () => {
    s = await startServing();
    w = await s.createWorkload({
      name: "charts",
      backend: "vllm",
      model_name: "charts",
      config: { command: "vllm serve charts" },
    });
    await s.waitState(w.id);
  });
  afterAll(() => s.stop());

  test("the playground chats (and streams) without a data-plane key", async () => {
    const r = await s.admin(`/admin/workloads/${w.id}/chat`, {
      body: { messages: [{ role: "user", content: "from the dashboard" }] },
    });
    expect(r.status).toBe(200);
    expect((await r.json()).choices[0].message.content).toBe("You said: from the dashboard");
    const st = await s.admin(`/admin/workloads/${w.id}/chat`, {
      body: { stream: true, messages: [{ role: "user", content: "stream" }] },
    });
    expect((await sseEvents(st)).at(-1)).toBe("[DONE]");
    const noAuth = await fetch(`${s.url}/admin/workloads/${w.id}/chat`, { method: "POST", body: "{}" });
    expect(noAuth.status).toBe(401);
  });

  test("series and /metrics count requests, tokens and latency per workload, and GPUs per worker", async () => {
    for (let i = 0; i < 3; i++)
      await s.data(w.slug, "/v1/chat/completions", { body: { messages: [{ role: "user", content: `n ${i}` }] } });
    const series = await waitFor(
      async () => {
        const body = await (await s.admin("/admin/metrics/series?minutes=5")).json();
        const mine = body.workloads.find((x: { id: string }) => x.id === w.id);
        const total = mine.points.reduce((n: number, p: { rps: number }) => n + p.rps * body.interval_s, 0);
        return total >= 3 ? mine : undefined;
      },
      { what: "requests in the series (complete 10 s buckets only)", timeoutMs: 25_000, intervalMs: 250 },
    );
    expect(
      series.points.some(
        (p: { p50_ms: number | null; tokens_per_s: number }) => p.p50_ms !== null && p.tokens_per_s > 0,
      ),
    ).toBe(true);
    const text = await (await s.admin("/metrics")).text();
    expect(text).toMatch(new RegExp(`inferd_requests_total\\{workload="${s.project}/${w.slug}"\\} [3-9]`));
    expect(text).toMatch(/inferd_gpu_utilization_percent\{worker="[^"]+",gpu="0",name="NVIDIA GeForce RTX 4090"\} \d+/);
    expect(text).toContain(`inferd_replicas{workload="${s.project}/${w.slug}",state="ready"} 1`);
    expect(text).toMatch(
      new RegExp(
        `inferd_request_duration_seconds_bucket\\{workload="${s.project}/${w.slug}",kind="sync",le="\\+Inf"\\} [3-9]`,
      ),
    );
    expect(text).toMatch(
      new RegExp(`inferd_time_to_first_token_seconds_count\\{workload="${s.project}/${w.slug}",kind="sync"\\} [3-9]`),
    );
  });
});

describe("inferd desktop", () => {
  test("a one-time sign-in link sets the session cookie once; a used or unknown code is refused", async () => {
    const { loginCode } = await import("../src/desktop");
    const code = await loginCode({ dataDir: t.dataDir });
    const r = await fetch(`${t.url}/login?code=${code}`, { redirect: "manual" });
    expect(r.status).toBe(302);
    expect(r.headers.get("location")).toBe("/?signed_in=1");
    const cookie = r.headers.get("set-cookie")!;
    expect(cookie).toContain("HttpOnly");
    expect((await fetch(`${t.url}/admin/projects`, { headers: { cookie: cookie.split(";")[0] } })).status).toBe(200);
    expect((await fetch(`${t.url}/login?code=${code}`, { redirect: "manual" })).status).toBe(401);
    expect((await fetch(`${t.url}/login?code=nope`, { redirect: "manual" })).status).toBe(401);
  });

  test("the window is a chromeless app window of a Chromium-family browser", async () => {
    const { browserCommand } = await import("../src/desktop");
    expect(browserCommand("http://x/", { INFERD_BROWSER: "/usr/bin/chromium" })).toEqual([
      "/usr/bin/chromium",
      "--app=http://x/",
      "--new-window",
      "--window-size=1280,800",
    ]);
  });
});
