import { afterAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { existsSync, mkdirSync, readdirSync, statSync, truncateSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { cleanup, runInferd, startInferd, tempDir, waitFor, type Inferd } from "./helpers/proc";
import { loadConfig } from "../src/config";
import { startServer } from "../src/server";
import { AutoBackups, childBackup } from "../src/store/auto";
import { databaseProblem, listBackups } from "../src/store/backup";

/**
 * The store survives: online backups under write load restore to a consistent store, a damaged
 * store is refused with the way back, `inferd doctor` tells health from damage, and a full disk is a
 * 503 rather than a crash.
 */
afterAll(cleanup);

const inferd = (dataDir: string, ...args: string[]) => runInferd({ args: [...args, "--data-dir", dataDir] });

/** POSTs JSON to the admin API. */
const post = (srv: { url: string; adminToken: string }, path: string, body: unknown) =>
  fetch(srv.url + path, {
    method: "POST",
    headers: { authorization: `Bearer ${srv.adminToken}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });

/** `PRAGMA integrity_check`, project slugs and each key's project, read straight from a store file. */
function readStore(file: string) {
  const db = new Database(file, { readonly: true });
  try {
    return {
      integrity: db
        .query<{ integrity_check: string }, []>("PRAGMA integrity_check")
        .all()
        .map((r) => r.integrity_check)
        .join(),
      slugs: db
        .query<{ slug: string }, []>("SELECT slug FROM projects")
        .all()
        .map((r) => r.slug),
      keyProjects: db
        .query<{ slug: string | null }, []>("SELECT p.slug FROM api_keys k LEFT JOIN projects p ON p.id = k.project_id")
        .all()
        .map((r) => r.slug),
    };
  } finally {
    db.close();
  }
}

describe("backup and restore", () => {
  test("a backup taken while the server writes restores to a consistent store the server starts on", async () => {
    const dataDir = tempDir("backup-load");
    const srv = await startInferd({ dataDir });
    let made = 0;
    let stop = false;
    // Each step: project p<i>, then a key of it. A consistent snapshot holds p0…p(k-1), with keys for all but maybe the last.
    const load = (async () => {
      for (let i = 0; !stop; i++) {
        expect((await post(srv, "/admin/projects", { name: `p${i}`, slug: `p${i}` })).status).toBe(201);
        expect((await post(srv, `/admin/projects/p${i}/keys`, { name: "k", type: "live" })).status).toBe(201);
        made = i + 1;
      }
    })();
    await waitFor(() => made >= 20, { what: "20 projects written", timeoutMs: 30_000 });
    const file = join(tempDir("backup-file"), "copy.db");
    const backup = await inferd(dataDir, "backup", file);
    expect(backup.stdout).toContain(`backup written to ${file}`);
    expect(backup.code).toBe(0);
    const atBackup = made;
    await waitFor(() => made >= atBackup + 5, { what: "writes going on after the backup", timeoutMs: 30_000 });
    stop = true;
    await load;
    expect(statSync(file).mode & 0o777).toBe(0o600);

    const refused = await inferd(dataDir, "restore", file);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain(`cannot restore now: another inferd (pid ${srv.proc.pid}, ${srv.url})`);
    expect(await srv.stop()).toBe(0);

    const restored = await inferd(dataDir, "restore", file);
    expect(restored.code).toBe(0);
    const aside = readdirSync(dataDir).find((f) => /^inferd\.db\.before-restore-[\dTZ-]+$/.test(f));
    expect(aside).toBeString();
    expect(readStore(join(dataDir, aside!)).slugs).toHaveLength(made);
    expect(statSync(join(dataDir, "inferd.db")).mode & 0o777).toBe(0o600);

    const store = readStore(join(dataDir, "inferd.db"));
    expect(store.integrity).toBe("ok");
    const indices = store.slugs.map((s) => Number(s.slice(1))).sort((a, b) => a - b);
    expect(indices.length).toBeGreaterThanOrEqual(20);
    expect(indices.length).toBeLessThan(made);
    expect(indices).toEqual([...Array(indices.length).keys()]); // a prefix: p0 … p(k-1)
    expect(store.keyProjects.every((slug) => slug !== null)).toBe(true);
    expect(store.keyProjects.length).toBeGreaterThanOrEqual(indices.length - 1);

    const again = await startInferd({ dataDir });
    const listed = await (
      await fetch(`${again.url}/admin/projects`, { headers: { authorization: `Bearer ${again.adminToken}` } })
    ).json();
    expect(listed).toHaveLength(indices.length);
    expect(await again.stop()).toBe(0);
  });

  test("restore refuses a file that is not a sound inferd database", async () => {
    const dataDir = tempDir("restore-bad");
    const garbage = join(dataDir, "garbage.db");
    writeFileSync(garbage, "not a database at all: ".repeat(20));
    const notOurs = join(dataDir, "other.db");
    new Database(notOurs, { create: true }).exec("CREATE TABLE t (a)");
    for (const [file, why] of [
      [garbage, "not an SQLite database"],
      [notOurs, "not an inferd store"],
      [join(dataDir, "missing.db"), "does not exist"],
    ]) {
      const r = await inferd(dataDir, "restore", file);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`cannot be restored: `);
      expect(r.stderr).toContain(why);
    }
    expect(existsSync(join(dataDir, "inferd.db"))).toBe(false);
  });
});

describe("a damaged store", () => {
  test("truncated or with a garbage header: a clear refusal naming the last good backup, exit 1; doctor fails; restore brings it back", async () => {
    const dataDir = tempDir("damaged");
    const srv = await startInferd({ dataDir });
    for (let i = 0; i < 30; i++)
      expect((await post(srv, "/admin/projects", { name: `project ${i} ${"x".repeat(150)}` })).status).toBe(201);
    const backup = await inferd(dataDir, "backup");
    expect(backup.code).toBe(0);
    const backupFile = /backup written to (\S+)/.exec(backup.stdout)![1];
    expect(backupFile.startsWith(join(dataDir, "backups", "inferd-"))).toBe(true);
    expect(await srv.stop()).toBe(0);
    const db = join(dataDir, "inferd.db");
    expect(existsSync(`${db}-wal`)).toBe(false); // the clean stop checkpointed
    const restoreLine = `inferd restore ${backupFile} --data-dir ${dataDir}`;

    truncateSync(db, Math.floor(statSync(db).size / 2));
    const truncated = await inferd(dataDir, "serve", "--port", "0");
    expect(truncated.code).toBe(1);
    expect(truncated.stderr).toContain(`the store ${db} is damaged (truncated: `);
    expect(truncated.stderr).toContain(`The last good backup is ${backupFile}`);
    expect(truncated.stderr).toContain(restoreLine);
    expect(truncated.output).not.toContain("    at ");
    const doctor = await inferd(dataDir, "doctor");
    expect(doctor.code).toBe(1);
    expect(doctor.stdout).toMatch(/^fail {2}store .*truncated/m);

    expect((await inferd(dataDir, "restore", backupFile)).code).toBe(0);
    writeFileSync(db, Buffer.alloc(100, 0xa5), { flag: "r+" });
    const garbage = await inferd(dataDir, "serve", "--port", "0");
    expect(garbage.code).toBe(1);
    expect(garbage.stderr).toContain(`the store ${db} is damaged (not an SQLite database`);
    expect(garbage.stderr).toContain(restoreLine);
    expect(garbage.output).not.toContain("    at ");

    expect((await inferd(dataDir, ...restoreLine.split(" ").slice(1, 3))).code).toBe(0);
    const back = await startInferd({ dataDir });
    const listed = await (
      await fetch(`${back.url}/admin/projects`, { headers: { authorization: `Bearer ${back.adminToken}` } })
    ).json();
    expect(listed).toHaveLength(30);
    expect(await back.stop()).toBe(0);
  });
});

describe("doctor and disk space", () => {
  let srv: Inferd | undefined;
  afterAll(() => srv?.stop());

  test("doctor on a healthy data dir while its server runs: exit 0, the store checks ok, the ports held by that server", async () => {
    const dataDir = tempDir("doctor");
    const running = await startInferd({ dataDir });
    srv = running;
    expect((await inferd(dataDir, "backup")).code).toBe(0);
    const port = new URL(running.url).port;
    // The line after "listening on" may reach the pipe a moment later: wait for it.
    const tlsPort = (
      await waitFor(async () => /agents join at https:\/\/[^:]+:(\d+)/.exec(running.output()) ?? undefined, {
        what: "the agents' join line",
      })
    )[1];
    const r = await inferd(dataDir, "doctor", "--port", port, "--tls-port", tlsPort);
    expect(r.code).toBe(0);
    for (const name of ["data dir", "file modes", "store", "migrations", "backups", "free disk", "certificate"]) {
      expect(r.stdout).toMatch(new RegExp(`^ok {4}${name} `, "m"));
    }
    expect(r.stdout).toMatch(
      new RegExp(
        `^ok {4}tls port +127\\.0\\.0\\.1:${tlsPort} is held by this data dir's server \\(pid ${srv.proc.pid}, ${srv.url}\\): same certificate`,
        "m",
      ),
    );
    expect(r.stdout).toMatch(
      new RegExp(
        `^ok {4}http port +127\\.0\\.0\\.1:${port} is held by this data dir's server \\(pid ${srv.proc.pid}, ${srv.url}\\)`,
        "m",
      ),
    );
    expect(r.stdout).toMatch(/^(ok {4}|warn {2})gpus /m);
    expect(r.stdout).toMatch(/^(ok {4}|warn {2})runtimes .*built-in llama.cpp/m);
    expect(r.stdout).toMatch(/^\d+ ok, \d+ warn, 0 fail$/m);
    const json = JSON.parse((await inferd(dataDir, "doctor", "--json", "--port", port, "--tls-port", tlsPort)).stdout);
    expect(json.ok).toBe(true);
    expect(json.checks.find((c: { name: string }) => c.name === "store")).toMatchObject({ status: "ok" });
    const other = await inferd(tempDir("doctor-other"), "doctor", "--port", port, "--tls-port", tlsPort);
    expect(other.code).toBe(1);
    expect(other.stdout).toMatch(
      new RegExp(`^fail {2}http port +127\\.0\\.0\\.1:${port} is in use by another program`, "m"),
    );
    expect(other.stdout).toMatch(/^fail {2}tls port .* in use by another program/m);
  });

  test("doctor warns while tenants' model URLs may reach private addresses (--allow-private-model-urls)", async () => {
    const dataDir = tempDir("doctor-policy");
    const quiet = await inferd(dataDir, "doctor", "--port", "0");
    expect(quiet.stdout).toMatch(/^ok {4}launch policy +tenants' model URLs must be public https addresses/m);
    const r = await inferd(dataDir, "doctor", "--port", "0", "--allow-private-model-urls");
    expect(r.stdout).toMatch(/^warn {2}launch policy +--allow-private-model-urls is on/m);
  });

  test("doctor fails on a data dir that does not exist, naming the check", async () => {
    const r = await inferd(join(tempDir("doctor-missing"), "nowhere"), "doctor", "--port", "0");
    expect(r.code).toBe(1);
    expect(r.stdout).toMatch(/^fail {2}data dir .*does not exist/m);
  });

  test("--min-free-disk-mb above the free space: serve refuses to start with a message", async () => {
    const dataDir = tempDir("disk");
    const r = await inferd(dataDir, "serve", "--port", "0", "--min-free-disk-mb", "999999999");
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`the file system of the data dir ${dataDir} has `);
    expect(r.stderr).toContain("less than --min-free-disk-mb (999999999)");
    expect(existsSync(join(dataDir, "inferd.db"))).toBe(false);
  });

  test("a full store (SQLITE_FULL) answers 503 storage_full with Retry-After, reads go on, writes resume when space returns", async () => {
    const { config } = loadConfig(
      ["--port", "0", "--data-dir", tempDir("full"), "--no-local-agent", "--admin-token", "full-admin"],
      {},
    );
    const server = await startServer(config, () => {});
    const admin = { url: server.url, adminToken: "full-admin" };
    try {
      const pages = server.store.sqlite!.query<{ page_count: number }, []>("PRAGMA page_count").get()!.page_count;
      server.store.sqlite!.exec(`PRAGMA max_page_count = ${pages}`);
      let full: Response | undefined;
      for (let i = 0; i < 500 && !full; i++) {
        const r = await post(admin, "/admin/projects", { name: `filler ${i} ${"y".repeat(190)}` });
        if (r.status !== 201) full = r;
      }
      expect(full?.status).toBe(503);
      expect(full!.headers.get("retry-after")).toBe("60");
      const body = await full!.json();
      expect(body.error.code).toBe("storage_full");
      expect(body.error.message).toContain("storage is full");
      expect(JSON.stringify(body)).not.toContain("SQLITE");
      expect(
        (await fetch(`${server.url}/admin/projects`, { headers: { authorization: "Bearer full-admin" } })).status,
      ).toBe(200);
      server.store.sqlite!.exec(`PRAGMA max_page_count = ${pages * 100}`);
      expect((await post(admin, "/admin/projects", { name: "after" })).status).toBe(201);
    } finally {
      await server.stop();
    }
  });
});

describe("automatic backups", () => {
  test("due one interval after the newest backup, never before the first delay after start", () => {
    const dataDir = tempDir("auto-due");
    const start = Date.parse("2030-01-01T00:00:00.000Z");
    let now = start;
    const auto = new AutoBackups({
      dataDir,
      intervalMs: 3_600_000,
      keep: 3,
      firstDelayMs: 600_000,
      now: () => now,
      run: async () => "unused",
    });
    expect(auto.dueAt()).toBe(start + 600_000); // no backup yet: the first delay
    mkdirSync(join(dataDir, "backups"));
    writeFileSync(join(dataDir, "backups", "inferd-2029-12-31T23-30-00-000Z.db"), "");
    writeFileSync(join(dataDir, "backups", "inferd-2029-12-31T12-00-00-000Z.db"), "");
    expect(auto.dueAt()).toBe(Date.parse("2030-01-01T00:30:00.000Z")); // the newest + 1 h
    writeFileSync(join(dataDir, "backups", "inferd-2029-12-31T20-00-00-000Z.db"), "");
    now += 3_600_000;
    expect(auto.dueAt()).toBe(Date.parse("2030-01-01T00:30:00.000Z")); // overdue: runs at once
  });

  test("in a cluster only the leading host takes them: none while it does not lead, the next one once it does", async () => {
    const dataDir = tempDir("auto-lead");
    let leading = false;
    let runs = 0;
    let asked = 0;
    const auto = new AutoBackups({
      dataDir,
      intervalMs: 100,
      keep: 2,
      firstDelayMs: 0,
      kind: "pgdump",
      when: () => (asked++, leading),
      run: async () => `run ${++runs}`,
    });
    auto.start();
    try {
      await waitFor(() => asked >= 3, { what: "the schedule asking three times whether this host leads" });
      expect(runs).toBe(0);
      leading = true;
      await waitFor(() => runs >= 1, { what: "a backup once this host leads" });
    } finally {
      auto.stop();
    }
  });

  test("backups run in a child process, are verified and pruned to --backup-keep", async () => {
    const dataDir = tempDir("auto-run");
    expect((await inferd(dataDir, "project", "create", "Kept")).code).toBe(0);
    let runs = 0;
    const child = childBackup(dataDir, 2);
    const auto = new AutoBackups({
      dataDir,
      intervalMs: 200,
      keep: 2,
      firstDelayMs: 0,
      run: (signal) => child(signal).then((line) => ((runs += 1), line)),
    });
    auto.start();
    try {
      await waitFor(() => runs >= 3, { what: "three automatic backups", timeoutMs: 30_000 });
    } finally {
      auto.stop();
    }
    const kept = listBackups(dataDir);
    expect(kept).toHaveLength(2);
    for (const b of kept) expect(databaseProblem(b.path)).toBeNull();
  });
});
