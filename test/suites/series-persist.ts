import { afterAll, describe, expect, test } from "bun:test";
import { openPgStore, openStore, type Store } from "../../src/db";
import { seriesBuckets } from "../../src/db/schema";
import { BUCKET_MS, completeUntil, MetricsStore, type BucketSummary } from "../../src/usage/series";
import { SeriesKeeper } from "../../src/usage/series-store";
import type { Finished } from "../../src/usage/meter";
import { TelemetryHistory } from "../../src/workers/telemetry";
import { cleanup, tempDir, waitFor } from "../helpers/proc";
import { testPostgres, type Engine } from "../helpers/postgres";
import { startServing, type Serving } from "../helpers/serving";

/**
 * The charts survive a restart: completed buckets are kept in the store, so after `inferd serve`
 * stops and starts again on the same store the earlier traffic is still charted, the time it was
 * down is a gap (null, never 0), and new traffic continues the series; GPU telemetry likewise. And
 * the store's merge: a restart within one bucket loses nothing, another host's buckets add up.
 */
export function seriesPersistSuite(engine: Engine): void {
  afterAll(() => cleanup());

  describe("series kept in the store across a restart", () => {
    type Point = {
      t: string;
      rps: number | null;
      errors_per_s: number | null;
      p99_ms: number | null;
      queue_depth: number | null;
    };
    type Answer = { from: string; complete_until: string; workloads: { id: string; points: Point[] }[] };
    const count = (p: Point | undefined) => Math.round((p?.rps ?? 0) * 10);

    test("requests → stop → restart: the old points stay, the down time is null, new points continue", async () => {
      const env = { FAKE_DELAY_MS: "30" };
      let srv: Serving = await startServing(env, [], undefined, engine);
      try {
        const w = await srv.createWorkload({
          name: "kept",
          backend: "vllm",
          model_name: "kept",
          config: { command: "vllm serve kept" },
        });
        await srv.waitState(w.id);
        const series = async (): Promise<Answer> =>
          (await srv.admin(`/admin/metrics/series?minutes=5&workload=${w.id}`)).json();
        const at = (a: Answer, t: number) => a.workloads[0].points.find((p) => Date.parse(p.t) === t);
        const chat = (text: string) =>
          srv
            .data(w.slug, "/v1/chat/completions", { body: { messages: [{ role: "user", content: text }] } })
            .then((r) => r.text());

        // Three requests in one bucket, counted once it completes.
        await waitFor(() => Date.now() % BUCKET_MS < BUCKET_MS / 2, {
          what: "the first half of a bucket",
          timeoutMs: 15_000,
        });
        const before = completeUntil();
        for (const n of [1, 2, 3]) await chat(`before ${n}`);
        await waitFor(async () => count(at(await series(), before)) === 3 || undefined, {
          what: "the three requests charted",
          timeoutMs: 30_000,
          intervalMs: 250,
        });
        const workers: { id: string }[] = await (await srv.admin("/admin/workers")).json();
        const worker = workers[0].id;
        const stoppedAt = Date.now();
        expect(await srv.stop()).toBe(0);

        // Down for at least one whole bucket.
        await waitFor(() => completeUntil() >= completeUntil(stoppedAt) + 2 * BUCKET_MS || undefined, {
          what: "a whole bucket to pass while the server is down",
          timeoutMs: 30_000,
          intervalMs: 200,
        });
        srv = await startServing({ ...env, ...srv.storeEnv }, [], srv.dataDir, engine);
        const restartedAt = Date.now();
        await srv.waitState(w.id);

        const after = await series();
        expect(count(at(after, before))).toBe(3);
        expect(at(after, before)!.p99_ms).toBeGreaterThanOrEqual(30);
        // Buckets between the stop's and the restart's: nobody was up. A gap, not zeros.
        const down = after.workloads[0].points.filter(
          (p) => Date.parse(p.t) > completeUntil(stoppedAt) && Date.parse(p.t) < completeUntil(restartedAt),
        );
        expect(down.length).toBeGreaterThan(0);
        for (const p of down)
          expect(p).toMatchObject({ rps: null, errors_per_s: null, p99_ms: null, queue_depth: null });
        // Up without traffic is a zero; before the first server started, a gap too.
        const idleUp = after.workloads[0].points.filter(
          (p) => Date.parse(p.t) > before && Date.parse(p.t) < completeUntil(stoppedAt),
        );
        for (const p of idleUp) expect(p.rps).toBe(0);

        // New traffic continues the series, the old points stay.
        const fresh = completeUntil();
        for (const n of [1, 2]) await chat(`after ${n}`);
        const later = await waitFor(
          async () => {
            const a = await series();
            return count(at(a, fresh)) + count(at(a, fresh + BUCKET_MS)) === 2 ? a : undefined;
          },
          { what: "the two new requests charted", timeoutMs: 30_000, intervalMs: 250 },
        );
        expect(count(at(later, before))).toBe(3);
        expect(at(later, completeUntil(restartedAt) - BUCKET_MS)?.rps ?? null).toBeNull();

        // GPU telemetry: samples from before the stop, none while down, new ones after.
        const history: { t: string }[] = (await (await srv.admin(`/admin/workers/${worker}`)).json()).history;
        const times = history.map((s) => Date.parse(s.t));
        expect(times.some((t) => t < stoppedAt)).toBe(true);
        expect(times.some((t) => t > restartedAt)).toBe(true);
        expect(
          times.some((t) => t >= completeUntil(stoppedAt) + BUCKET_MS && t < completeUntil(stoppedAt) + 2 * BUCKET_MS),
        ).toBe(false);
      } finally {
        await srv.stop().catch(() => 0);
      }
    }, 150_000);
  });

  describe("SeriesKeeper on the store itself (injected time)", () => {
    const t0 = completeUntil(Date.now()) - 10 * BUCKET_MS;
    const finished = (durationMs: number): Finished => ({
      workloadId: "w",
      projectId: "p",
      keyId: null,
      kind: "sync",
      ok: true,
      usage: { inputTokens: 1, outputTokens: 1 },
      durationMs,
      queueMs: 0,
      firstByteMs: null,
    });
    const open = async (): Promise<Store> =>
      engine === "postgres"
        ? openPgStore(await (await testPostgres()).createDatabase())
        : openStore(`${tempDir("series")}/inferd.db`);

    test("a restart within one bucket keeps both runs' requests; another host's bucket adds up (p99: the larger)", async () => {
      const store = await open();
      try {
        const first = new MetricsStore(t0);
        const keeper1 = new SeriesKeeper(store.db, "hst_a", [first, new TelemetryHistory()], t0);
        await keeper1.start();
        first.observe(finished(100), t0 + 1_000);
        first.observe(finished(100), t0 + 2_000);
        await keeper1.flush(t0 + 3_000, true);

        // The same host again, in the same bucket.
        const second = new MetricsStore(t0 + 4_000);
        const keeper2 = new SeriesKeeper(store.db, "hst_a", [second, new TelemetryHistory()], t0 + 4_000);
        await keeper2.start();
        second.observe(finished(300), t0 + 5_000);
        // Another host's row for the same bucket, as its own keeper writes it.
        const other: BucketSummary = {
          requests: 4,
          errors: 1,
          input_tokens: 4,
          output_tokens: 4,
          p50_ms: 200,
          p99_ms: 900,
          ttft_n: 0,
          ttft_p50_ms: null,
          ttft_p99_ms: null,
          queue_depth: 2,
        };
        await store.db
          .insert(seriesBuckets)
          .values({ kind: "workload", subject: "w", t: t0, hostId: "hst_b", data: JSON.stringify(other) });
        await keeper2.flush(t0 + BUCKET_MS + 500);

        const read = async (k: SeriesKeeper, m: MetricsStore, now: number) =>
          m.points("w", 1, now, (await k.workloads(now - 60_000, completeUntil(now), "w")).of("w"));
        const now = t0 + 2 * BUCKET_MS + 100;
        const p = (await read(keeper2, second, now)).find((x) => Date.parse(x.t) === t0)!;
        expect(p).toMatchObject({ rps: 0.7, errors_per_s: 0.1, p99_ms: 900, queue_depth: 2 });
        expect(p.p50_ms!).toBeGreaterThan(100);
        expect(p.p50_ms!).toBeLessThan(300);
        // What the store holds for this host: one row, both runs' three requests.
        const third = new MetricsStore(now);
        const k3 = new SeriesKeeper(store.db, "hst_a", [third, new TelemetryHistory()], now);
        const again = (await read(k3, third, now)).find((x) => Date.parse(x.t) === t0)!;
        expect(again.rps).toBe(0.7);
        // Before anyone was up: a gap.
        expect((await read(k3, third, now)).find((x) => Date.parse(x.t) === t0 - BUCKET_MS)!.rps).toBeNull();
      } finally {
        await store.close();
      }
    }, 60_000);
  });
}
