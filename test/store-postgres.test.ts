import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { SQL } from "bun";
import { createHash, randomBytes } from "node:crypto";
import { mkdirSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cleanup, runInferd, startInferd, tempDir } from "./helpers/proc";
import { stopTestPostgres, testPostgres, type TestPostgres } from "./helpers/postgres";
import { freePort } from "./fixtures";
import { openStore } from "../src/db";
import { PG_MIGRATIONS } from "../src/db/migrations";
import { auditLog, deliveries, deliveryAttempts, jobs, usageDaily, webhooks, workloadUsage } from "../src/db/schema";
import { dataPaths } from "../src/datadir";
import { withActor } from "../src/audit/service";
import { createProject } from "../src/projects/service";
import { createKey } from "../src/keys/service";
import { createWorkload } from "../src/workloads/service";
import { WorkloadCreate } from "../src/workloads/schema";
import { findPgTool, missingTool } from "../src/store/pg-backup";
import { countsTable } from "../src/store/migrate";

/**
 * The embedded store moved into PostgreSQL (`inferd store migrate --to`) and looked after there:
 * every row arrives (counts, bytes, identity sequences), a server on the database answers as the
 * SQLite one did, refusals are clear, and backup, restore and doctor speak PostgreSQL. A real
 * PostgreSQL (test/helpers/postgres.ts), real inferd processes.
 */
let pg: TestPostgres;
const pools: SQL[] = [];
beforeAll(async () => {
  pg = await testPostgres();
});
afterAll(async () => {
  await Promise.all(pools.map((p) => p.close()));
  await cleanup();
  await stopTestPostgres();
});

const inferd = (dataDir: string, ...args: string[]) => runInferd({ args: [...args, "--data-dir", dataDir] });

/** A connection to a test database, closed after the suite. */
function connect(url: string): SQL {
  const sql = new SQL({ url, max: 2 });
  pools.push(sql);
  return sql;
}

const sha = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

/** What `seedStore` wrote, to compare with what PostgreSQL holds. */
interface Seeded {
  projectSlugs: string[];
  keyIds: string[];
  liveSecret: string;
  workloadSlug: string;
  jsonJob: { id: string; body: Buffer; data: string };
  binaryJob: { id: string; body: Buffer };
  bigJobs: { id: string; sha: string }[];
  /** The highest audit id SQLite ever handed out (the newest entry was deleted: above max(id)). */
  auditSeq: number;
}

/** Fills a fresh embedded store with every kind of row: projects, keys, a workload, jobs with bodies (binary, large), webhook, delivery with attempts, usage, audit. */
async function seedStore(dataDir: string): Promise<Seeded> {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const store = openStore(dataPaths(dataDir).db);
  const { db } = store;
  const now = new Date().toISOString();
  try {
    return await withActor({ type: "cli", label: "seed" }, async () => {
      const alpha = await createProject(db, { name: "Alpha" });
      const beta = await createProject(db, { name: "Beta" });
      const live = await createKey(db, alpha, { name: "live one", type: "live" });
      const sdk = await createKey(db, beta, { name: "sdk one", type: "sdk" });
      const w = await createWorkload(
        db,
        alpha,
        WorkloadCreate.parse({ name: "chat", backend: "vllm", model_name: "m", config: { command: "vllm serve m" } }),
      );
      const job = (id: string, body: Buffer, data: string | null) => ({
        id,
        workloadId: w.id,
        keyId: live.id,
        kind: "chat",
        body,
        contentType: "application/json",
        context: null,
        status: "completed" as const,
        data,
        runs: 1,
        createdAt: now,
        startedAt: now,
        finishedAt: now,
      });
      const jsonJob = {
        id: "job-json",
        body: Buffer.from(JSON.stringify({ messages: [{ role: "user", content: "héllo ✓" }] })),
        data: JSON.stringify({ choices: [{ message: { content: "wörld \u0000 ✓" } }] }),
      };
      const binaryJob = {
        id: "job-binary",
        body: Buffer.concat([Buffer.from([0, 255, 0xc3, 0x28, 0, 1]), randomBytes(4096)]),
      };
      const big = [1, 2, 3].map((i) => ({ id: `job-big-${i}`, body: randomBytes(3 << 20) }));
      await db
        .insert(jobs)
        .values([job(jsonJob.id, jsonJob.body, jsonJob.data), job(binaryJob.id, binaryJob.body, null)]);
      for (const b of big) await db.insert(jobs).values(job(b.id, b.body, null));
      await db.insert(webhooks).values({
        id: "whk-1",
        workloadId: w.id,
        url: "https://hooks.example.com/in",
        secret: "whsec_x",
        secretPrefix: "whsec_x",
        createdAt: now,
      });
      await db.insert(deliveries).values({
        id: "dlv-1",
        jobId: jsonJob.id,
        webhookId: "whk-1",
        event: "job.completed",
        state: "delivered",
        attempts: 2,
        lastStatusCode: 200,
        deliveredAt: now,
        createdAt: now,
      });
      await db.insert(deliveryAttempts).values(
        [1, 2].map((n) => ({
          deliveryId: "dlv-1",
          n,
          at: now,
          statusCode: n === 1 ? 503 : 200,
          error: n === 1 ? "busy" : null,
          durationMs: 12,
        })),
      );
      await db
        .insert(workloadUsage)
        .values({ workloadId: w.id, requests: 7, errors: 1, inputTokens: 2 ** 40, outputTokens: 3 });
      // More rows than one batch holds (500), so the copy runs in several.
      for (let i = 0; i < 3; i++) {
        await db.insert(usageDaily).values(
          Array.from({ length: 400 }, (_, j) => ({
            day: `2030-01-${String((j % 28) + 1).padStart(2, "0")}`,
            keyId: `k${i}-${j}`,
            workloadId: w.id,
            projectId: alpha.id,
            requests: j,
            inputTokens: j * 10,
          })),
        );
      }
      await db.insert(auditLog).values(
        Array.from({ length: 700 }, (_, i) => ({
          at: now,
          actorType: "system",
          actorLabel: "seed",
          action: "seed.entry",
          targetType: "test",
          targetLabel: `entry ${i}`,
        })),
      );
      const auditSeq = store
        .sqlite!.query<{ seq: number }, []>("SELECT seq FROM sqlite_sequence WHERE name = 'audit_log'")
        .get()!.seq;
      store.sqlite!.exec(`DELETE FROM audit_log WHERE id = ${auditSeq}`);
      return {
        projectSlugs: [alpha.slug, beta.slug],
        keyIds: [live.id, sdk.id],
        liveSecret: live.secret,
        workloadSlug: w.slug,
        jsonJob,
        binaryJob,
        bigJobs: big.map((b) => ({ id: b.id, sha: sha(b.body) })),
        auditSeq,
      };
    });
  } finally {
    await store.close();
  }
}

/** Rows per table of an SQLite store file, read straight from it. */
function sqliteCounts(file: string): Map<string, number> {
  const db = new Database(file, { readonly: true });
  try {
    const tables = db
      .query<{ name: string }, []>(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name NOT IN ('__inferd_migrations', '__inferd_changes')",
      )
      .all();
    return new Map(
      tables.map(({ name }) => [name, db.query<{ n: number }, []>(`SELECT count(*) AS n FROM "${name}"`).get()!.n]),
    );
  } finally {
    db.close();
  }
}

/** Whether the database has inferd's tables at all. */
const hasTables = async (sql: SQL) =>
  ((await sql`SELECT to_regclass('projects') IS NOT NULL AS t`) as { t: boolean }[])[0].t;

describe("inferd store migrate --to postgres://…", () => {
  test("copies every row: counts match table by table, and a server on the database answers as before (keys, job bytes, audit ids)", async () => {
    const dataDir = tempDir("pg-migrate");
    const seeded = await seedStore(dataDir);
    const url = await pg.createDatabase();
    const sql = connect(url);

    const dry = await inferd(dataDir, "store", "migrate", "--to", url, "--dry-run", "--json");
    expect(dry.code).toBe(0);
    const plan = JSON.parse(dry.stdout);
    expect(plan).toMatchObject({ ok: true, dry_run: true });
    expect(plan.tables.find((t: { table: string }) => t.table === "jobs")).toEqual({
      table: "jobs",
      sqlite: 5,
      postgres: null,
    });
    expect(await hasTables(sql)).toBe(false);

    const r = await inferd(dataDir, "store", "migrate", "--to", url);
    expect(r.code).toBe(0);
    const counts = sqliteCounts(dataPaths(dataDir).db);
    expect(counts.size).toBeGreaterThanOrEqual(17);
    for (const [table, n] of counts) {
      expect(r.stdout).toMatch(new RegExp(`^${table} +${n} +${n}$`, "m"));
      expect(Number(((await sql.unsafe(`SELECT count(*) AS n FROM "${table}"`)) as { n: string }[])[0].n)).toBe(n);
    }
    expect(r.stdout).toContain("the counts match");
    expect(r.stdout).toContain(`inferd serve --database-url ${url} --data-dir ${dataDir}`);
    expect(r.stdout).toContain(`keep ${dataPaths(dataDir).db} as the backup`);

    const [binary] = (await sql`SELECT body FROM jobs WHERE id = ${seeded.binaryJob.id}`) as { body: Buffer }[];
    expect(Buffer.compare(binary.body, seeded.binaryJob.body)).toBe(0);
    for (const big of seeded.bigJobs) {
      const [row] = (await sql`SELECT body FROM jobs WHERE id = ${big.id}`) as { body: Buffer }[];
      expect(sha(row.body)).toBe(big.sha);
    }
    const [json] = (await sql`SELECT body, data FROM jobs WHERE id = ${seeded.jsonJob.id}`) as {
      body: Buffer;
      data: string;
    }[];
    expect(Buffer.compare(json.body, seeded.jsonJob.body)).toBe(0);
    expect(json.data).toBe(seeded.jsonJob.data);

    const srv = await startInferd({ dataDir, args: ["--database-url", url] });
    const admin = (path: string, init: RequestInit = {}) =>
      fetch(srv.url + path, {
        ...init,
        headers: { authorization: `Bearer ${srv.adminToken}`, "content-type": "application/json" },
      });
    const projects = (await (await admin("/admin/projects")).json()) as { slug: string }[];
    expect(projects.map((p) => p.slug).sort()).toEqual([...seeded.projectSlugs].sort());
    const keys = (await (await admin(`/admin/projects/${seeded.projectSlugs[0]}/keys`)).json()) as { id: string }[];
    expect(keys.map((k) => k.id)).toEqual([seeded.keyIds[0]]);

    const read = await fetch(
      `${srv.url}/endpoint/${seeded.projectSlugs[0]}/${seeded.workloadSlug}/jobs/${seeded.jsonJob.id}`,
      { headers: { authorization: `Bearer ${seeded.liveSecret}` } },
    );
    expect(read.status).toBe(200);
    const view = await read.json();
    expect(view).toMatchObject({
      job_id: seeded.jsonJob.id,
      status: "completed",
      data: JSON.parse(seeded.jsonJob.data),
    });
    expect(view.deliveries).toMatchObject([{ id: "dlv-1", state: "delivered", attempts: 2 }]);

    expect((await admin("/admin/projects", { method: "POST", body: JSON.stringify({ name: "Gamma" }) })).status).toBe(
      201,
    );
    const [created] =
      (await sql`SELECT id FROM audit_log WHERE action = 'project.create' AND target_label LIKE ${"%gamma%"}`) as {
        id: number;
      }[];
    expect(created.id).toBeGreaterThan(seeded.auditSeq);
    expect(await srv.stop()).toBe(0);
  });

  test("refuses a database that already holds rows, and a data dir a server holds, changing nothing", async () => {
    const dataDir = tempDir("pg-refuse");
    expect((await inferd(dataDir, "project", "create", "Only")).code).toBe(0);
    const url = await pg.createDatabase();
    expect((await inferd(dataDir, "store", "migrate", "--to", url)).code).toBe(0);
    const again = await inferd(dataDir, "store", "migrate", "--to", url);
    expect(again.code).toBe(1);
    expect(again.stderr).toMatch(
      /^inferd: the database postgres:\/\/\S+ is not empty: table \w+ already holds rows\. .*createdb/m,
    );
    expect(again.output).not.toContain("    at ");
    expect(((await connect(url)`SELECT count(*) AS n FROM projects`) as { n: string }[])[0].n).toBe("1");

    const srv = await startInferd({ dataDir });
    const empty = await pg.createDatabase();
    const locked = await inferd(dataDir, "store", "migrate", "--to", empty);
    expect(locked.code).toBe(1);
    expect(locked.stderr).toContain(
      `inferd: cannot migrate now: another inferd (pid ${srv.proc.pid}, ${srv.url}) is already serving the data dir ${dataDir}`,
    );
    expect(locked.output).not.toContain("    at ");
    expect(await hasTables(connect(empty))).toBe(false);
    expect(await srv.stop()).toBe(0);

    const nothing = await inferd(tempDir("pg-nothing"), "store", "migrate", "--to", empty);
    expect(nothing.code).toBe(1);
    expect(nothing.stderr).toContain("there is no store to migrate at ");

    const port = await freePort();
    const down = await inferd(dataDir, "store", "migrate", "--to", `postgres://inferd:s3cret@127.0.0.1:${port}/x`);
    expect(down.code).toBe(1);
    expect(down.stderr).toContain(`inferd: cannot connect to postgres://inferd:***@127.0.0.1:${port}/x: `);
    expect(down.output).not.toContain("s3cret");

    const wrong = await inferd(dataDir, "store", "migrate", "--to", "mysql://x/y");
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toContain("--to must be a postgres:// URL");
  });
});

test("the counts table marks every table whose rows differ, with totals", () => {
  const table = countsTable([
    { table: "projects", sqlite: 3, postgres: 3 },
    { table: "jobs", sqlite: 5, postgres: 4 },
  ]);
  expect(table).toMatch(/^projects +3 +3$/m);
  expect(table).toMatch(/^jobs +5 +4 +differs$/m);
  expect(table).toMatch(/^total +8 +7 +differs$/m);
});

describe("backup, restore and doctor in PostgreSQL mode", () => {
  let dataDir: string;
  let url: string;
  beforeAll(async () => {
    dataDir = tempDir("pg-ops");
    expect((await inferd(dataDir, "project", "create", "Kept")).code).toBe(0);
    url = await pg.createDatabase();
    expect((await inferd(dataDir, "store", "migrate", "--to", url)).code).toBe(0);
  });

  test("backup writes 0600 .pgdump archives pg_restore reads, keeps --backup-keep; restore prints the pg_restore command (exit 2) and that command works", async () => {
    const written: string[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await inferd(dataDir, "backup", "--database-url", url, "--backup-keep", "2");
      expect(r.code).toBe(0);
      expect(r.stdout).toContain("--format=custom of postgres://");
      expect(r.stdout).toContain("--list");
      written.push(/backup written to (\S+\.pgdump)/.exec(r.stdout)![1]);
    }
    const kept = readdirSync(join(dataDir, "backups"))
      .filter((f) => f.endsWith(".pgdump"))
      .map((f) => join(dataDir, "backups", f))
      .sort();
    expect(kept).toEqual(written.slice(1).sort());
    const file = written[2];
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const pgRestore = findPgTool("pg_restore")!; // Debian's postgresql package, which the test cluster needs anyway
    const list = Bun.spawnSync([pgRestore, "--list", file]);
    expect(list.exitCode).toBe(0);
    expect(list.stdout.toString()).toMatch(/TABLE public projects/);

    const restore = await inferd(dataDir, "restore", file, "--database-url", url);
    expect(restore.code).toBe(2);
    expect(restore.stderr).toContain("does not touch a PostgreSQL store");
    const command = /^ {2}(pg_restore .*)$/m.exec(restore.stderr)![1];
    expect(command).toBe(`pg_restore --exit-on-error --no-owner --dbname ${url} ${file}`);
    const fresh = await pg.createDatabase();
    const argv = command.replace(url, fresh).split(" ");
    const restored = Bun.spawnSync([pgRestore, ...argv.slice(1)]);
    expect(restored.stderr.toString()).toBe("");
    expect(restored.exitCode).toBe(0);
    expect(((await connect(fresh)`SELECT slug FROM projects`) as { slug: string }[]).map((p) => p.slug)).toEqual([
      "kept",
    ]);

    const sqliteFile = await inferd(dataDir, "restore", dataPaths(dataDir).db, "--database-url", url);
    expect(sqliteFile.code).toBe(2);
    expect(sqliteFile.stderr).toContain("is a backup of the embedded (SQLite) store, not of PostgreSQL");
    expect(sqliteFile.stderr).toContain("inferd store migrate --to ");

    const port = await freePort();
    const down = await inferd(
      dataDir,
      "backup",
      "--database-url",
      `postgres://inferd:s3cret@127.0.0.1:${port}/nowhere`,
    );
    expect(down.code).toBe(1);
    expect(down.stderr).toMatch(
      new RegExp(
        `^inferd: \\S*pg_dump failed for postgres://inferd:\\*\\*\\*@127\\.0\\.0\\.1:${port}/nowhere \\(exit 1\\): `,
        "m",
      ),
    );
    expect(down.output).not.toContain("s3cret");
    expect(readdirSync(join(dataDir, "backups")).filter((f) => !f.endsWith(".pgdump"))).toEqual([]);
  });

  test("without pg_dump anywhere, the way to get one is named", () => {
    const root = tempDir("no-pg");
    expect(findPgTool("pg_dump", root, root)).toBeUndefined();
    const bin = join(root, "16", "bin");
    mkdirSync(bin, { recursive: true });
    writeFileSync(join(bin, "pg_dump"), "");
    expect(findPgTool("pg_dump", "", root)).toBe(join(bin, "pg_dump"));
    expect(missingTool("pg_dump")).toContain("apt-get install postgresql-client");
  });

  test("doctor: connection, server version and migrations ok (exit 0); an unknown migration or an unreachable database fails with a clear line", async () => {
    const r = await inferd(dataDir, "doctor", "--database-url", url, "--port", "0");
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(
      /^ok {4}store +the store is the PostgreSQL database postgres:\/\/.*the SQLite file checks do not apply$/m,
    );
    expect(r.stdout).toMatch(new RegExp(`^ok {4}connection +connected to ${url.replace(/[.]/g, "\\.")}$`, "m"));
    expect(r.stdout).toMatch(/^ok {4}postgres +PostgreSQL \d+/m);
    expect(r.stdout).toMatch(
      new RegExp(`^ok {4}migrations +all ${PG_MIGRATIONS.length} PostgreSQL migrations applied$`, "m"),
    );
    expect(r.stdout).not.toContain("integrity_check");

    const future = await pg.createDatabase();
    await connect(future)`CREATE TABLE __inferd_migrations (tag text PRIMARY KEY, applied_at text NOT NULL)`;
    await connect(future)`INSERT INTO __inferd_migrations VALUES ('9999_future', 'now')`;
    const newer = await inferd(dataDir, "doctor", "--database-url", future, "--port", "0");
    expect(newer.code).toBe(1);
    expect(newer.stdout).toMatch(/^fail {2}migrations +migration 9999_future was applied by a newer inferd/m);

    const port = await freePort();
    const down = await inferd(
      dataDir,
      "doctor",
      "--database-url",
      `postgres://inferd:s3cret@127.0.0.1:${port}/nowhere`,
      "--port",
      "0",
    );
    expect(down.code).toBe(1);
    expect(down.stdout).toMatch(
      new RegExp(
        `^fail {2}connection +cannot connect to postgres://inferd:\\*\\*\\*@127\\.0\\.0\\.1:${port}/nowhere: `,
        "m",
      ),
    );
    expect(down.output).not.toContain("s3cret");
  });
});
