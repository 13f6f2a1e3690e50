/**
 * Operations through the real server and the fake vLLM: latency histograms measured from each
 * request's arrival against a fixed runtime delay, per-key limits seen by the official OpenAI SDK
 * (429, x-ratelimit headers, its own retry), token quotas that hold across a restart, the audit log
 * (every kind of change, never a secret) and the usage export matching what was sent.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { cleanup, waitFor } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";

const servers: Serving[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop().catch(() => 0)));
  await cleanup();
});
async function serve(env: Record<string, string> = {}, dataDir?: string) {
  const s = await startServing({ FAKE_LOAD_MS: "50", ...env }, [], dataDir);
  servers.push(s);
  return s;
}
const liveKey = async (s: Serving, limits?: Record<string, number | null>) =>
  (await (await s.admin(`/admin/projects/${s.project}/keys`, { body: { name: "limited", type: "live", ...(limits ? { limits } : {}) } })).json()) as { id: string; secret: string; prefix: string };
const chat = (s: Serving, w: string, key: string, extra: Record<string, unknown> = {}) => s.data(w, "/v1/chat/completions", { token: key, body: { messages: [{ role: "user", content: "one two three" }], ...extra } });
/** The value of a Prometheus sample line. */
const sample = (text: string, name: string, labels: string) => Number(new RegExp(`^${name}\\{${labels.replace(/[+.]/g, "\\$&")}\\} ([\\d.e+-]+)$`, "m").exec(text)?.[1] ?? "NaN");

describe("metrics that are true", () => {
  let s: Serving;
  let w: { id: string; slug: string };
  beforeAll(async () => {
    s = await serve({ FAKE_DELAY_MS: "300", FAKE_FIRST_TOKEN_MS: "150" });
    w = await s.createWorkload({ name: "slow", backend: "vllm", model_name: "slow", config: { command: "vllm serve slow" } });
    const [worker] = await (await s.admin("/admin/workers")).json();
    await s.admin(`/admin/workloads/${w.id}/assignments`, { body: { worker_id: worker.id, concurrency: 1 } });
    await waitFor(async () => {
      const d = await s.workload(w.id);
      return d.assignments.length === 1 && d.assignments[0].concurrency === 1 && d.assignments[0].state === "ready" ? true : undefined;
    }, { what: "one slot ready" });
  });

  test("a 300 ms runtime shows as ≥ 0.3 s in the duration histogram and the chart; a wait for the one slot in the queue histogram; streams in time to first token", async () => {
    // Two at once on one slot: the second waits ~300 ms in the queue.
    const answers = await Promise.all([1, 2].map(() => chat(s, w.slug, s.live)));
    expect(answers.map((r) => r.status)).toEqual([200, 200]);
    const l = `workload="${s.project}/slow",kind="sync"`;
    const before = await (await s.admin("/metrics")).text();
    expect(sample(before, "inferd_request_duration_seconds_bucket", `${l},le="0.2"`)).toBe(0);
    expect(sample(before, "inferd_request_duration_seconds_count", l)).toBe(2);
    // 300 ms each, and the second waited for the first: at least 0.9 s together.
    expect(sample(before, "inferd_request_duration_seconds_sum", l)).toBeGreaterThanOrEqual(0.9);
    const stream = await chat(s, w.slug, s.live, { stream: true });
    await stream.text();
    const text = await (await s.admin("/metrics")).text();
    // The queued one waited for the other's 300 ms.
    expect(sample(text, "inferd_queue_wait_seconds_bucket", `${l},le="0.2"`)).toBe(2);
    expect(sample(text, "inferd_queue_wait_seconds_count", l)).toBe(3);
    expect(sample(text, "inferd_queue_wait_seconds_sum", l)).toBeGreaterThanOrEqual(0.25);
    // The stream's first token came after FAKE_FIRST_TOKEN_MS; non-streams count their headers.
    expect(sample(text, "inferd_time_to_first_token_seconds_bucket", `${l},le="0.1"`)).toBe(0);
    expect(sample(text, "inferd_time_to_first_token_seconds_count", l)).toBe(3);
    // The chart series holds complete 10 s buckets only: wait until the buckets of all three are complete.
    const points = await waitFor(async () => {
      const body = await (await s.admin(`/admin/metrics/series?minutes=5&workload=${w.id}`)).json();
      const list = body.workloads[0].points as { rps: number; p50_ms: number | null; ttft_p50_ms: number | null }[];
      return list.reduce((n, p) => n + p.rps * body.interval_s, 0) >= 3 ? list : undefined;
    }, { what: "the three requests in complete buckets", timeoutMs: 25_000, intervalMs: 250 });
    const point = points.find((p) => p.p50_ms !== null)!;
    expect(point.p50_ms).toBeGreaterThanOrEqual(300);
    expect(point.ttft_p50_ms).toBeGreaterThanOrEqual(150);
  });
});

describe("per-key limits", () => {
  let s: Serving;
  let w: { id: string; slug: string };
  beforeAll(async () => {
    s = await serve({ FAKE_TOKEN_MS: "30" });
    w = await s.createWorkload({ name: "lim", backend: "vllm", model_name: "lim", config: { command: "vllm serve lim" } });
    await s.waitState(w.id);
  });
  const sdk = (key: string, maxRetries: number) => new OpenAI({ baseURL: `${s.url}/endpoint/${s.project}/${w.slug}/v1`, apiKey: key, maxRetries });

  test("requests per minute: over it the OpenAI SDK gets a RateLimitError with the headers OpenAI sends", async () => {
    const key = await liveKey(s, { rpm: 3 });
    const ok = await chat(s, w.slug, key.secret);
    expect(ok.status).toBe(200);
    expect(ok.headers.get("x-ratelimit-limit-requests")).toBe("3");
    expect(ok.headers.get("x-ratelimit-remaining-requests")).toBe("2");
    for (let i = 0; i < 2; i++) expect((await chat(s, w.slug, key.secret)).status).toBe(200);
    const err = await sdk(key.secret, 0).chat.completions.create({ model: "default", messages: [{ role: "user", content: "one more" }] }).catch((e) => e);
    expect(err).toBeInstanceOf(OpenAI.RateLimitError);
    expect(err.status).toBe(429);
    expect(err.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    expect(err.headers.get("x-ratelimit-reset-requests")).toMatch(/^(\d+m)?\d+(ms|s)$/);
    expect(Number(err.headers.get("retry-after"))).toBeGreaterThan(10); // 60 s / 3 requests
    expect(err.error).toMatchObject({ code: "rate_limited" });
  });

  test("requests at once: the SDK's own retry honours Retry-After and gets through once the first is done", async () => {
    const key = await liveKey(s, { max_concurrent: 1 });
    const long = chat(s, w.slug, key.secret, { stream: true, max_tokens: 12, messages: [{ role: "user", content: "a b c d e f g h i j k l" }] });
    const first = await long;
    const client = sdk(key.secret, 5);
    const started = Date.now();
    const [second] = await Promise.all([client.chat.completions.create({ model: "default", messages: [{ role: "user", content: "me too" }] }), first.text()]);
    expect(second.choices[0].message.content).toBeTruthy();
    expect(Date.now() - started).toBeGreaterThanOrEqual(900); // it waited for the Retry-After (1 s)
  });

  test("tokens per minute: once a request has used them up, the next is refused with the token headers", async () => {
    const key = await liveKey(s, { tpm: 10 });
    expect((await chat(s, w.slug, key.secret, { messages: [{ role: "user", content: "many words in this prompt for many tokens" }] })).status).toBe(200);
    const r = await chat(s, w.slug, key.secret);
    expect(r.status).toBe(429);
    expect(r.headers.get("x-ratelimit-limit-tokens")).toBe("10");
    expect(r.headers.get("x-ratelimit-remaining-tokens")).toBe("0");
  });

  test("limits change at once through the admin API and a key without limits sends no rate-limit headers", async () => {
    const key = await liveKey(s, { rpm: 1 });
    expect((await chat(s, w.slug, key.secret)).status).toBe(200);
    expect((await chat(s, w.slug, key.secret)).status).toBe(429);
    const patched = await (await s.admin(`/admin/keys/${key.id}`, { method: "PATCH", body: { limits: { rpm: null } } })).json();
    expect(patched.limits).toMatchObject({ rpm: null });
    const free = await chat(s, w.slug, key.secret);
    expect(free.status).toBe(200);
    expect(free.headers.get("x-ratelimit-limit-requests")).toBeNull();
  });
});

test("token quotas per day hold across a restart, for a key and for its project", async () => {
  const first = await serve();
  const w = await first.createWorkload({ name: "q", backend: "vllm", model_name: "q", config: { command: "vllm serve q" } });
  await first.waitState(w.id);
  const key = await liveKey(first, { tokens_per_day: 20 });
  for (let i = 0; i < 10; i++) {
    const r = await chat(first, w.slug, key.secret);
    if (r.status === 429) break;
    expect(r.status).toBe(200);
  }
  const over = await chat(first, w.slug, key.secret);
  expect(over.status).toBe(429);
  expect((await over.json()).error.code).toBe("quota_exceeded");
  await first.stop();
  const second = await serve({}, first.dataDir);
  try {
    await second.waitState(w.id);
    const still = await chat(second, w.slug, key.secret);
    expect(still.status).toBe(429);
    expect((await still.json()).error.message).toContain("daily token quota of 20");
    // A project quota covers every key of the project.
    await second.admin(`/admin/projects/${second.project}`, { method: "PATCH", body: { limits: { tokens_per_day: 1 } } });
    const other = await liveKey(second);
    const r = await chat(second, w.slug, other.secret);
    expect(r.status).toBe(429);
    expect((await r.json()).error.message).toContain("project's daily token quota");
  } finally {
    await second.stop();
  }
});
