import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { seedProject, startTestServer, type TestServer } from "../helpers/server";
import { sql } from "drizzle-orm";
import { rows as dbRows } from "../../src/db/raw";
import type { Engine } from "../helpers/postgres";

/**
 * `POST /endpoint/<p>/<w>/jobs:batch` on an in-process server without agents (jobs stay queued):
 * ids in order, JSON and NDJSON, the 1000-envelope limit, a bad envelope refusing the whole batch by
 * its index, and the same auth, toggle and quota rules as `POST …/jobs`.
 */
export function jobsBatchSuite(engine: Engine): void {
  let s: TestServer;
  let ctx: Awaited<ReturnType<typeof seedProject>>;
  let wl: { id: string; slug: string };
  const QUOTA = 200_000;

  beforeAll(async () => {
    s = await startTestServer({ INFERD_MAX_JOB_BYTES_PER_PROJECT: String(QUOTA) }, { engine });
    ctx = await seedProject(s, "Batch", "batch");
    // Pinned to a worker that never joins: jobs stay queued (one waits as running), none fails.
    const worker = await (await s.admin("/admin/workers", { body: { name: "never-joins" } })).json();
    wl = await (
      await s.admin("/admin/projects/batch/workloads", {
        body: {
          name: "b",
          backend: "vllm",
          model_name: "m",
          worker_id: worker.id,
          config: { command: "vllm serve m" },
        },
      })
    ).json();
  });
  afterAll(() => s.close());

  const env = (i: number, extra: Record<string, unknown> = {}) => ({
    kind: "embeddings",
    body: { input: `item ${i}` },
    context: { i },
    ...extra,
  });
  const batch = (
    body: unknown,
    init: { token?: string | null; path?: string; headers?: Record<string, string>; raw?: string } = {},
  ) =>
    s.call(
      init.path ?? "/endpoint/batch/b/jobs:batch",
      init.token === undefined ? ctx.live : (init.token ?? undefined),
      init.raw !== undefined
        ? { raw: init.raw, method: "POST", headers: init.headers }
        : { body, headers: init.headers },
    );
  const ndjson = (lines: string) =>
    batch(undefined, { raw: lines, headers: { "content-type": "application/x-ndjson" } });
  /** The stored rows of these job ids, in the order given. */
  const rows = (ids: string[]) =>
    Promise.all(
      ids.map(
        async (id) =>
          (
            await dbRows<{ context: string | null; kind: string }>(
              s.store.db,
              sql`SELECT context, kind FROM jobs WHERE id = ${id}`,
            )
          )[0],
      ),
    );
  const count = async () =>
    Number((await dbRows<{ n: number | string }>(s.store.db, sql`SELECT count(*) AS n FROM jobs`))[0].n);
  const errorOf = async (r: Response) =>
    ((await r.json()) as { error: { code: string; message: string; field?: string } }).error;

  describe("ids in order", () => {
    test("a JSON array answers {job_ids} in envelope order; contexts are kept byte for byte", async () => {
      const text = `[${[0, 1, 2, 3, 4].map((i) => `{"kind":"embeddings","body":{"input":"item ${i}"},"context":{"i": ${i}, "price": 1.50}}`).join(",\n ")}]`;
      const r = await batch(undefined, { raw: text, headers: { "content-type": "application/json" } });
      expect(r.status).toBe(202);
      const { job_ids } = (await r.json()) as { job_ids: string[] };
      expect(job_ids).toHaveLength(5);
      expect((await rows(job_ids)).map((row) => row!.context)).toEqual(
        [0, 1, 2, 3, 4].map((i) => `{"i": ${i}, "price": 1.50}`),
      );
      for (const id of job_ids)
        expect((await (await s.call(`/endpoint/batch/b/jobs/${id}`, ctx.live)).json()).status).toMatch(
          /queued|running/,
        );
    });

    test("NDJSON answers NDJSON lines in order; blank lines and CRLF are fine", async () => {
      const lines = [0, 1, 2].map((i) => JSON.stringify(env(i))).join("\r\n") + "\n\n" + JSON.stringify(env(3)) + "\n";
      const r = await ndjson(lines);
      expect(r.status).toBe(202);
      expect(r.headers.get("content-type")).toContain("application/x-ndjson");
      const text = await r.text();
      expect(text.endsWith("\n")).toBe(true);
      const ids = text
        .trim()
        .split("\n")
        .map((l) => (JSON.parse(l) as { job_id: string }).job_id);
      expect((await rows(ids)).map((row) => JSON.parse(row!.context!).i)).toEqual([0, 1, 2, 3]);
    });

    test("1000 envelopes are accepted; 1001 are refused with 413 batch_too_large, nothing stored", async () => {
      const ok = await batch(Array.from({ length: 1000 }, (_, i) => env(i)));
      expect(ok.status).toBe(202);
      expect(((await ok.json()) as { job_ids: string[] }).job_ids).toHaveLength(1000);
      const before = await count();
      for (const r of [
        await batch(Array.from({ length: 1001 }, (_, i) => env(i))),
        await ndjson(Array.from({ length: 1001 }, (_, i) => JSON.stringify(env(i))).join("\n")),
      ]) {
        expect(r.status).toBe(413);
        const e = await errorOf(r);
        expect(e.code).toBe("batch_too_large");
        expect(e.message).toContain("at most 1000");
      }
      expect(await count()).toBe(before);
    });
  });

  describe("a bad envelope refuses the whole batch, named by its index", () => {
    test.each([
      ["a missing kind", [env(0), env(1), { body: { input: "x" } }], 400, "validation_error", "body[2].kind"],
      ["an unknown kind", [env(0), { kind: "telepathy", body: {} }], 400, "invalid_kind", "body[1]"],
      [
        "a chat body without messages",
        [{ kind: "chat", body: { messages: [] } }],
        400,
        "validation_error",
        "body[0].body.messages",
      ],
      [
        "both body and body_b64",
        [env(0), env(1), env(2), { kind: "embeddings", body: {}, body_b64: "AA==" }],
        400,
        "invalid_envelope",
        "body[3]",
      ],
      ["an unknown field", [env(0), { ...env(1), priority: 1 }], 400, "validation_error", "body[1].priority"],
      ["an envelope that is not an object", [env(0), "embeddings"], 400, "validation_error", "body[1]"],
      [
        "a model the workload does not serve",
        [env(0), { kind: "embeddings", body: { model: "other", input: "x" } }],
        400,
        "model_not_available",
        "body[1]",
      ],
    ])("%s", async (_name, envelopes, status, code, field) => {
      const before = await count();
      const r = await batch(envelopes);
      expect(r.status).toBe(status);
      const e = await errorOf(r);
      expect(e.code).toBe(code);
      expect(e.field).toBe(field);
      expect(e.message).toStartWith(`${field}: `);
      expect(await count()).toBe(before);
    });

    test("NDJSON: a line that is not JSON is named by its index and line", async () => {
      const r = await ndjson(`${JSON.stringify(env(0))}\n\n{"kind":\n`);
      expect(r.status).toBe(400);
      const e = await errorOf(r);
      expect(e.code).toBe("invalid_json");
      expect(e.message).toStartWith("body[1]:");
      expect(e.message).toContain("NDJSON line 3");
    });

    test("not an array, an empty array, invalid JSON", async () => {
      expect((await errorOf(await batch(env(0)))).message).toContain("must be a JSON array");
      expect((await errorOf(await batch([]))).message).toContain("holds no job envelope");
      expect((await errorOf(await ndjson("\n \n"))).message).toContain("holds no job envelope");
      const bad = await batch(undefined, { raw: "[{", headers: { "content-type": "application/json" } });
      expect(bad.status).toBe(400);
      expect((await errorOf(bad)).code).toBe("invalid_json");
    });
  });

  describe("same rules as POST …/jobs", () => {
    test("auth: no token 401, an sdk key or the admin token 403, another project's key 403", async () => {
      expect((await batch([env(0)], { token: null })).status).toBe(401);
      expect((await errorOf(await batch([env(0)], { token: ctx.sdk }))).code).toBe("wrong_credential_type");
      expect((await errorOf(await batch([env(0)], { token: s.adminToken }))).code).toBe("wrong_credential_type");
      const other = await seedProject(s, "Other", "other");
      expect((await errorOf(await batch([env(0)], { token: other.live }))).code).toBe("project_scope_mismatch");
      expect((await batch([env(0)], { path: "/endpoint/batch/nope/jobs:batch" })).status).toBe(404);
    });

    test("toggles: jobs off refuses the batch; a kind's toggle off refuses it naming the envelope", async () => {
      await s.admin(`/admin/workloads/${wl.id}/endpoints`, { method: "PATCH", body: { jobs: false } });
      const off = await batch([env(0)]);
      expect(off.status).toBe(409);
      expect((await errorOf(off)).code).toBe("endpoint_disabled");
      await s.admin(`/admin/workloads/${wl.id}/endpoints`, {
        method: "PATCH",
        body: { jobs: true, embeddings: false },
      });
      const kindOff = await batch([{ kind: "chat", body: { messages: [{ role: "user", content: "hi" }] } }, env(1)]);
      expect(kindOff.status).toBe(409);
      const e = await errorOf(kindOff);
      expect(e.code).toBe("endpoint_disabled");
      expect(e.message).toStartWith("body[1]:");
      await s.admin(`/admin/workloads/${wl.id}/endpoints`, { method: "PATCH", body: { embeddings: true } });
      expect((await batch([env(0)])).status).toBe(202);
    });

    test("the project's job-bytes quota applies to the whole batch: 429 past it, 413 for a batch larger than it", async () => {
      const q = await seedProject(s, "Quota", "quota");
      await s.admin("/admin/projects/quota/workloads", { body: { name: "q", backend: "ollama", model_name: "m" } });
      const big = (i: number) => ({ kind: "embeddings", body: { input: "x".repeat(45_000), i } });
      const send = (n: number) =>
        batch(
          Array.from({ length: n }, (_, i) => big(i)),
          { token: q.live, path: "/endpoint/quota/q/jobs:batch" },
        );
      expect((await send(2)).status).toBe(202);
      expect((await send(2)).status).toBe(202);
      const over = await send(2);
      expect(over.status).toBe(429);
      expect(over.headers.get("retry-after")).toBe("60");
      expect((await errorOf(over)).code).toBe("job_storage_full");
      const huge = await send(5);
      expect(huge.status).toBe(413);
      expect((await errorOf(huge)).message).toContain("the batch (5 jobs)");
    });
  });

  describe("routing", () => {
    test("/jobs:batch is no job id, /jobs/:job_id still works, other suffixes are 404", async () => {
      const single = await s.call("/endpoint/batch/b/jobs", ctx.live, { body: env(0) });
      expect(single.status).toBe(202);
      const { job_id } = (await single.json()) as { job_id: string };
      expect((await s.call(`/endpoint/batch/b/jobs/${job_id}`, ctx.live)).status).toBe(200);
      expect((await s.call("/endpoint/batch/b/jobs:batch", ctx.live)).status).toBe(404);
      expect((await s.call("/endpoint/batch/b/jobs/:batch", ctx.live)).status).toBe(404);
      const other = await s.call("/endpoint/batch/b/jobs:bulk", ctx.live, { body: [env(0)] });
      expect(other.status).toBe(404);
      expect((await errorOf(other)).code).toBe("not_found");
      expect((await batch([env(0)], { path: "/endpoint/batch/b/jobs%3Abatch" })).status).toBe(202);
    });
  });
}
