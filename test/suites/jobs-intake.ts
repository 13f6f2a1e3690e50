import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { sql } from "drizzle-orm";
import { openPgStore, openStore, type Store } from "../../src/db";
import { storeFailure } from "../../src/db/errors";
import { exec } from "../../src/db/raw";
import { jobs } from "../../src/db/schema";
import { AppError } from "../../src/errors";
import { jobIntake, type JobInsert } from "../../src/jobs/intake";
import { claimJobs } from "../../src/jobs/service";
import { cleanup, tempDir } from "../helpers/proc";
import { storeEnv, type Engine } from "../helpers/postgres";

/** A fresh store of `engine`, and how to open another connection to the same one. */
async function freshStore(engine: Engine): Promise<{ store: Store; another(): Promise<Store> }> {
  if (engine === "postgres") {
    const url = (await storeEnv("postgres")).INFERD_DATABASE_URL;
    return { store: await openPgStore(url), another: () => openPgStore(url, 1) };
  }
  const path = join(tempDir("intake"), "inferd.db");
  return { store: openStore(path), another: async () => openStore(path) };
}

/** The job intake and the queue's claim on a real store of `engine`: commits seen by other connections, all or none per caller, queue order. */
export function jobsIntakeSuite(engine: Engine): void {
  describe("the job intake on a real store", () => {
    let store: Store;
    let another: () => Promise<Store>;
    const row = (id: string, workloadId = "wl_1", at = new Date().toISOString()): JobInsert => ({
      id,
      workloadId,
      keyId: null,
      requestId: null,
      traceparent: null,
      kind: "embeddings",
      body: new TextEncoder().encode('{"input":"x"}'),
      contentType: "application/json",
      context: '{"n": 1.50}',
      createdAt: at,
    });
    beforeAll(async () => {
      ({ store, another } = await freshStore(engine));
      const now = new Date().toISOString();
      await exec(store.db, sql`INSERT INTO projects (id, name, slug, created_at) VALUES ('prj_1', 'P', 'p', ${now})`);
      await exec(
        store.db,
        sql`INSERT INTO workloads (id, project_id, name, slug, task_type, backend, model_name, endpoints, created_at, updated_at) VALUES ('wl_1', 'prj_1', 'W', 'w', 'chat', 'vllm', 'm', '{}', ${now}, ${now})`,
      );
    });
    afterAll(async () => {
      await store.close();
      await cleanup();
    });

    test("committed rows are visible to another connection when the promise resolves; a caller's rows are all or none", async () => {
      const intake = jobIntake(store.db);
      const other = await another();
      const ok = intake.submit([row("j1"), row("j2")]);
      const mixed = intake.submit([row("j3"), row("j4", "wl_missing")]).catch((x) => x); // may fail while `ok` is read back
      await ok;
      const seen = await other.db
        .select({ id: jobs.id, status: jobs.status, runs: jobs.runs, context: jobs.context })
        .from(jobs)
        .orderBy(jobs.id);
      expect(seen).toEqual([
        { id: "j1", status: "queued", runs: 0, context: '{"n": 1.50}' },
        { id: "j2", status: "queued", runs: 0, context: '{"n": 1.50}' },
      ]);
      expect(storeFailure(await mixed)).toBe("foreign_key");
      expect(await other.db.$count(jobs, sql`${jobs.id} IN ('j3', 'j4')`)).toBe(0);
      await other.close();
    });

    test("claimJobs takes the oldest queued jobs in one statement, in queue order", async () => {
      const intake = jobIntake(store.db);
      await exec(store.db, sql`DELETE FROM jobs`);
      const t0 = Date.now();
      const at = (ms: number) => new Date(t0 + ms).toISOString();
      await intake.submit([
        row("c3", "wl_1", at(5)),
        row("c1", "wl_1", at(0)),
        row("c2", "wl_1", at(0)),
        row("c4", "wl_1", at(9)),
      ]);
      const first = await claimJobs(store.db, "wl_1", 3);
      expect(first.map((j) => j.id)).toEqual(["c1", "c2", "c3"]);
      expect(first.every((j) => j.status === "running" && j.runs === 1 && j.startedAt)).toBe(true);
      expect(Buffer.from(first[0].body).toString()).toBe('{"input":"x"}');
      expect((await claimJobs(store.db, "wl_1", 5)).map((j) => j.id)).toEqual(["c4"]);
      expect(await claimJobs(store.db, "wl_1", 5)).toEqual([]);
    });

    test("a closed store fails the callers with 503 job_not_stored, not a 500", async () => {
      const { store: s } = await freshStore(engine);
      const intake = jobIntake(s.db);
      await s.close();
      const e = await intake.submit([row("x")]).catch((x) => x);
      expect(e).toBeInstanceOf(AppError);
      expect(e.status).toBe(503);
      expect(e.code).toBe("job_not_stored");
    });
  });
}
