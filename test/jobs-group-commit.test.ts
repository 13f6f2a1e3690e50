import { afterAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { cleanup, startInferd, waitFor, type Inferd } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";

/**
 * Group commit end to end: `kill -9` of an `inferd serve` child while many single and batch
 * submissions are in flight, then a restart on the same data dir (every 202 is on disk, nothing
 * twice, no batch half-written); and the runner still takes every job, batch or single, exactly
 * once through the queue and the replica's slots.
 */
let server: Inferd | undefined;
let serving: Serving | undefined;
afterAll(async () => {
  await server?.stop().catch(() => 0);
  await serving?.stop().catch(() => 0);
  await cleanup();
});

/** One submission as the client saw it: what it sent (contexts) and the ids a 202 gave back, if any. */
interface Sent {
  tags: string[];
  ids?: string[];
}

const INPUT = "group commit ".repeat(8);
const envelope = (tag: string) => `{"kind":"embeddings","body":{"input":"${INPUT}${tag}"},"context":{"tag": "${tag}"}}`;

describe("group commit under kill -9", () => {
  test("every job answered 202 is there after the restart, none twice, no batch half-written", async () => {
    server = await startInferd();
    const s = server;
    const admin = async (path: string, body?: unknown) => {
      const r = await fetch(s.url + path, {
        method: body ? "POST" : "GET",
        headers: { authorization: `Bearer ${s.adminToken}`, "content-type": "application/json" },
        body: body ? JSON.stringify(body) : undefined,
      });
      return r.json();
    };
    await admin("/admin/projects", { name: "Crash", slug: "crash" });
    const live = (await admin("/admin/projects/crash/keys", { name: "k", type: "live" })).secret as string;
    // Pinned to a worker that never joins: jobs only pile up.
    const worker = await admin("/admin/workers", { name: "never-joins" });
    const wl = await admin("/admin/projects/crash/workloads", {
      name: "parked",
      backend: "vllm",
      model_name: "m",
      worker_id: worker.id,
      config: { command: "vllm serve m" },
    });
    const base = `${s.url}/endpoint/crash/${wl.slug}`;
    const headers = (type = "application/json") => ({ authorization: `Bearer ${live}`, "content-type": type });

    const sent: Sent[] = [];
    let acked = 0;
    let stop = false;
    const single = async (c: number) => {
      for (let n = 0; !stop; n++) {
        const one: Sent = { tags: [`s${c}-${n}`] };
        sent.push(one);
        try {
          const r = await fetch(`${base}/jobs`, { method: "POST", headers: headers(), body: envelope(one.tags[0]) });
          if (r.status !== 202) throw new Error(`HTTP ${r.status}: ${await r.text()}`);
          one.ids = [((await r.json()) as { job_id: string }).job_id];
          acked++;
        } catch {
          return; // the server is gone
        }
      }
    };
    const batch = async (c: number) => {
      for (let n = 0; !stop; n++) {
        const one: Sent = { tags: Array.from({ length: 40 }, (_, i) => `b${c}-${n}-${i}`) };
        sent.push(one);
        const ndjson = n % 2 === 1;
        const lines = one.tags.map(envelope);
        try {
          const r = await fetch(`${base}/jobs:batch`, {
            method: "POST",
            headers: headers(ndjson ? "application/x-ndjson" : "application/json"),
            body: ndjson ? lines.join("\n") : `[${lines.join(",")}]`,
          });
          if (r.status !== 202) throw new Error(`HTTP ${r.status}: ${await r.text()}`);
          const text = await r.text();
          one.ids = ndjson
            ? text
                .trim()
                .split("\n")
                .map((l) => (JSON.parse(l) as { job_id: string }).job_id)
            : (JSON.parse(text) as { job_ids: string[] }).job_ids;
          acked += one.ids.length;
        } catch {
          return;
        }
      }
    };
    const clients = [
      ...Array.from({ length: 16 }, (_, c) => single(c)),
      ...Array.from({ length: 3 }, (_, c) => batch(c)),
    ];
    await waitFor(() => acked >= 2000, { what: "2000 jobs acknowledged", timeoutMs: 60_000, detail: () => s.output() });
    await s.kill9();
    stop = true;
    await Promise.all(clients);
    const answered = sent.filter((x) => x.ids);
    const unanswered = sent.filter((x) => !x.ids);
    expect(unanswered.length).toBeGreaterThan(0); // some were in flight at the kill

    server = await startInferd({ dataDir: s.dataDir });
    // Through the API: a sample of the acknowledged jobs is there after the restart.
    for (const x of answered.filter((_, i) => i % 50 === 0)) {
      const r = await fetch(`${server.url}/endpoint/crash/${wl.slug}/jobs/${x.ids![0]}`, {
        headers: { authorization: `Bearer ${live}` },
      });
      expect(r.status).toBe(200);
    }
    expect(await server.stop()).toBe(0);
    server = undefined;

    const db = new Database(join(s.dataDir, "inferd.db"), { readonly: true });
    const rows = db
      .query<{ id: string; context: string; body: Uint8Array }, []>("SELECT id, context, body FROM jobs")
      .all();
    db.close();
    const byTag = new Map<string, { id: string; body: string }[]>();
    for (const r of rows) {
      const tag = (JSON.parse(r.context) as { tag: string }).tag;
      byTag.set(tag, [...(byTag.get(tag) ?? []), { id: r.id, body: Buffer.from(r.body).toString() }]);
    }
    // None twice.
    expect([...byTag.values()].filter((l) => l.length > 1)).toEqual([]);
    // Every acknowledged id is there, with its own envelope's body.
    for (const x of answered) {
      x.tags.forEach((tag, i) => {
        expect(byTag.get(tag)?.[0]?.id).toBe(x.ids![i]);
        expect(JSON.parse(byTag.get(tag)![0].body)).toEqual({ input: `${INPUT}${tag}` });
      });
    }
    // Never answered: all of a submission's jobs or none (a batch is one transaction).
    for (const x of unanswered) {
      const present = x.tags.filter((t) => byTag.has(t)).length;
      expect(present === 0 || present === x.tags.length).toBe(true);
    }
    expect(rows.length).toBeGreaterThanOrEqual(acked);
  });
});

describe("the runner claims in batches", () => {
  test("a batch and single jobs each run exactly once through the replica's slots", async () => {
    serving = await startServing({ FAKE_DELAY_MS: "20" });
    const s = serving;
    const w = await s.createWorkload({
      name: "runs",
      backend: "vllm",
      model_name: "runs-model",
      config: { command: "vllm serve runs-model" },
    });
    const detail = await s.waitState(w.id);
    const a = detail.assignments[0];
    expect((await s.admin(`/admin/assignments/${a.id}`, { method: "PATCH", body: { concurrency: 4 } })).status).toBe(
      200,
    );
    const batch = s.data(w.slug, "/jobs:batch", {
      body: Array.from({ length: 60 }, (_, i) => ({
        kind: "embeddings",
        body: { input: `batch ${i}` },
        context: { i },
      })),
    });
    const singles = Array.from({ length: 20 }, (_, i) =>
      s.data(w.slug, "/jobs", { body: { kind: "embeddings", body: { input: `single ${i}` } } }),
    );
    const answers = await Promise.all([batch, ...singles]);
    expect(answers.map((r) => r.status)).toEqual(answers.map(() => 202));
    const ids = [
      ...((await answers[0].json()) as { job_ids: string[] }).job_ids,
      ...(await Promise.all(answers.slice(1).map(async (r) => ((await r.json()) as { job_id: string }).job_id))),
    ];
    expect(new Set(ids).size).toBe(80);
    const done = await waitFor(
      async () => {
        const list = (await (await s.admin(`/admin/workloads/${w.id}/jobs?status=completed&limit=500`)).json()) as {
          job_id: string;
          runs: number;
        }[];
        return list.length === 80 ? list : undefined;
      },
      { what: "80 jobs completed", timeoutMs: 60_000, intervalMs: 100 },
    );
    expect(done.map((j) => j.job_id).sort()).toEqual([...ids].sort());
    expect(done.every((j) => j.runs === 1)).toBe(true);
    const stats = (await (await fetch(`${a.base_url}/fake/stats`)).json()) as { total: number; max_in_flight: number };
    expect(stats.total).toBe(80);
    expect(stats.max_in_flight).toBeLessThanOrEqual(4);
  });
});
