/**
 * Operations through the real server and the fake vLLM: latency histograms measured from each
 * request's arrival against a fixed runtime delay; then the limits and quotas of
 * ./suites/operations.ts on the embedded store (operations.pg.test.ts runs them on PostgreSQL).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { waitFor } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";
import { chat, operationsSuite } from "./suites/operations";

/** The value of a Prometheus sample line. */
const sample = (text: string, name: string, labels: string) =>
  Number(new RegExp(`^${name}\\{${labels.replace(/[+.]/g, "\\$&")}\\} ([\\d.e+-]+)$`, "m").exec(text)?.[1] ?? "NaN");

describe("metrics that are true", () => {
  let s: Serving;
  let w: { id: string; slug: string };
  beforeAll(async () => {
    s = await startServing({ FAKE_LOAD_MS: "50", FAKE_DELAY_MS: "300", FAKE_FIRST_TOKEN_MS: "150" });
    w = await s.createWorkload({
      name: "slow",
      backend: "vllm",
      model_name: "slow",
      config: { command: "vllm serve slow" },
    });
    const [worker] = await (await s.admin("/admin/workers")).json();
    await s.admin(`/admin/workloads/${w.id}/assignments`, { body: { worker_id: worker.id, concurrency: 1 } });
    await waitFor(
      async () => {
        const d = await s.workload(w.id);
        return d.assignments.length === 1 && d.assignments[0].concurrency === 1 && d.assignments[0].state === "ready"
          ? true
          : undefined;
      },
      { what: "one slot ready" },
    );
  });
  afterAll(() => s.stop());

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
    const points = await waitFor(
      async () => {
        const body = await (await s.admin(`/admin/metrics/series?minutes=5&workload=${w.id}`)).json();
        const list = body.workloads[0].points as { rps: number; p50_ms: number | null; ttft_p50_ms: number | null }[];
        return list.reduce((n, p) => n + p.rps * body.interval_s, 0) >= 3 ? list : undefined;
      },
      { what: "the three requests in complete buckets", timeoutMs: 25_000, intervalMs: 250 },
    );
    const point = points.find((p) => p.p50_ms !== null)!;
    expect(point.p50_ms).toBeGreaterThanOrEqual(300);
    expect(point.ttft_p50_ms).toBeGreaterThanOrEqual(150);
  });
});

operationsSuite("sqlite");
