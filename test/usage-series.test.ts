/**
 * The dashboard's chart series (`GET /admin/metrics/series`) holds complete 10 s buckets only: the
 * bucket still filling is left out (drawn, it always dipped), `complete_until` says until when, and
 * a request shows up once its bucket is complete, with its errors and time to first token.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { BUCKET_MS, completeUntil, MetricsStore } from "../src/usage/series";
import type { Finished } from "../src/usage/meter";
import { cleanup, waitFor } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";

const finished = (over: Partial<Finished> = {}): Finished => ({
  workloadId: "w",
  projectId: "p",
  keyId: null,
  kind: "sync",
  ok: true,
  usage: { inputTokens: 3, outputTokens: 7 },
  durationMs: 120,
  queueMs: 0,
  firstByteMs: 40,
  ...over,
});

describe("MetricsStore.points (injected time)", () => {
  const t0 = Date.parse("2026-03-01T12:00:00Z");

  test("the bucket still filling is left out; the last point is the last complete bucket", () => {
    const m = new MetricsStore(t0 - 60_000);
    m.observe(finished(), t0 + 2_000);
    m.observe(finished({ ok: false, firstByteMs: 90 }), t0 + 9_000);
    const during = m.points("w", 1, t0 + 9_500);
    expect(during).toHaveLength(6);
    expect(Date.parse(during.at(-1)!.t) + BUCKET_MS).toBe(completeUntil(t0 + 9_500));
    expect(during.every((p) => p.rps === 0)).toBe(true);
    const after = m.points("w", 1, t0 + 10_000);
    expect(after).toHaveLength(6);
    expect(after.at(-1)).toMatchObject({
      t: new Date(t0).toISOString(),
      rps: 0.2,
      errors_per_s: 0.1,
      error_rate: 0.5,
      tokens_per_s: 2,
      p50_ms: 120,
      ttft_p50_ms: 40,
      ttft_p99_ms: 90,
    });
  });

  test("completeUntil is the start of the bucket `now` falls in", () => {
    expect(completeUntil(t0 + 17_000)).toBe(t0 + 10_000);
    expect(completeUntil(t0 + 10_000)).toBe(t0 + 10_000);
  });
});

describe("GET /admin/metrics/series against a real server", () => {
  let s: Serving;
  let w: { id: string; slug: string };
  beforeAll(async () => {
    s = await startServing({ FAKE_FIRST_TOKEN_MS: "120" });
    w = await s.createWorkload({
      name: "series",
      backend: "vllm",
      model_name: "series",
      config: { command: "vllm serve series" },
    });
    await s.waitState(w.id);
  }, 60_000);
  afterAll(async () => {
    await s?.stop();
    await cleanup();
  });

  type Answer = {
    interval_s: number;
    from: string;
    complete_until: string;
    workloads: {
      id: string;
      points: {
        t: string;
        rps: number;
        errors_per_s: number;
        ttft_p50_ms: number | null;
        ttft_p99_ms: number | null;
      }[];
    }[];
  };
  const series = async (): Promise<Answer> =>
    (await s.admin(`/admin/metrics/series?minutes=5&workload=${w.id}`)).json();
  const counted = (a: Answer) => a.workloads[0].points.reduce((n, p) => n + Math.round(p.rps * a.interval_s), 0);

  test("a request is counted only once its bucket is complete, and then in the last point", async () => {
    // Start early in a bucket so the request and the first read fall in the same one.
    await waitFor(() => Date.now() % BUCKET_MS < BUCKET_MS / 2, {
      what: "the first half of a bucket",
      timeoutMs: 15_000,
    });
    const sent = Date.now();
    const ok = await s.data(w.slug, "/v1/chat/completions", {
      body: { stream: true, messages: [{ role: "user", content: "count me" }] },
    });
    await ok.text();
    const bad = await s.data(w.slug, "/v1/chat/completions", { body: { prompt: "no messages" } });
    expect(bad.status).toBe(400);
    const bucket = Math.floor(sent / BUCKET_MS) * BUCKET_MS;
    const early = await series();
    if (Date.parse(early.complete_until) <= bucket) {
      expect(counted(early)).toBe(0);
      expect(Date.parse(early.workloads[0].points.at(-1)!.t)).toBe(Date.parse(early.complete_until) - BUCKET_MS);
    }
    const later = await waitFor(
      async () => {
        const a = await series();
        return counted(a) === 2 ? a : undefined;
      },
      { what: "the two requests in a complete bucket", timeoutMs: 25_000, intervalMs: 250 },
    );
    const points = later.workloads[0].points;
    expect(points).toHaveLength(30);
    expect(Date.parse(later.complete_until) % BUCKET_MS).toBe(0);
    expect(Date.parse(later.complete_until)).toBeLessThanOrEqual(Date.now());
    expect(Date.parse(points.at(-1)!.t)).toBe(Date.parse(later.complete_until) - BUCKET_MS);
    expect(Date.parse(points[0].t)).toBe(Date.parse(later.from));
    const last = points.at(-1)!;
    expect(last).toMatchObject({ rps: 0.2, errors_per_s: 0.1 });
    // The refused one answered at once; the stream's first token came after FAKE_FIRST_TOKEN_MS.
    expect(last.ttft_p50_ms!).toBeLessThan(120);
    expect(last.ttft_p99_ms!).toBeGreaterThanOrEqual(120);
  }, 60_000);

  test("every workload without ?workload; an unknown one is a 404 in the contract's shape", async () => {
    const all = await series();
    expect(all.workloads.map((x) => x.id)).toContain(w.id);
    const whole: Answer = await (await s.admin("/admin/metrics/series?minutes=60")).json();
    expect(whole.workloads.find((x) => x.id === w.id)!.points).toHaveLength(360);
    const missing = await s.admin("/admin/metrics/series?workload=nope");
    expect(missing.status).toBe(404);
    expect((await missing.json()).error).toMatchObject({ code: "not_found" });
  });
});
