/**
 * A real PostgreSQL for the tests, started by the test itself: Debian's `postgresql` package
 * (`initdb`, `pg_ctl`), a database cluster in a temporary directory listening on a free loopback
 * port, removed afterwards; nothing depends on a system service. When the tests run as root (CI),
 * the server runs as the package's unprivileged `postgres` user, as PostgreSQL requires.
 * One cluster per test process (started on first use); each caller gets its own empty database.
 */
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQL } from "bun";
import { freePort } from "../fixtures";

/** A running test cluster: where it listens, and how to make and drop databases in it. */
export interface TestPostgres {
  port: number;
  /** `postgres://inferd@127.0.0.1:<port>/<name>` of a new, empty database. */
  createDatabase(name?: string): Promise<string>;
  stop(): Promise<void>;
}

/** The directory holding `initdb` and `pg_ctl` (on PATH, else Debian's newest versioned one), or undefined when PostgreSQL is not installed. */
export function findPostgresBin(): string | undefined {
  for (const dir of (process.env.PATH ?? "").split(":"))
    if (dir && existsSync(join(dir, "pg_ctl")) && existsSync(join(dir, "initdb"))) return dir;
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root)
    ? readdirSync(root).filter(
        (v) => existsSync(join(root, v, "bin", "pg_ctl")) && existsSync(join(root, v, "bin", "initdb")),
      )
    : [];
  const newest = versions.sort((a, b) => Number(b) - Number(a))[0];
  return newest ? join(root, newest, "bin") : undefined;
}

/** The directory holding `initdb` and `pg_ctl`; throws, saying how to install them, when there is none. */
export function postgresBinDir(): string {
  const dir = findPostgresBin();
  if (!dir)
    throw new Error(
      "PostgreSQL is not installed: the cluster-mode tests need Debian's postgresql package (apt-get install postgresql); bun run test installs it when run as root",
    );
  return dir;
}

/** Runs a PostgreSQL tool, as the `postgres` user when we are root; throws with its output on failure. */
async function run(bin: string, args: string[]): Promise<void> {
  const asRoot = process.getuid?.() === 0;
  const argv = asRoot ? ["runuser", "-u", "postgres", "--", bin, ...args] : [bin, ...args];
  const p = Bun.spawn(argv, { stdin: "ignore", stdout: "pipe", stderr: "pipe", env: { ...process.env, LC_ALL: "C" } });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`${argv.join(" ")} exited with ${code}:\n${out}${err}`);
}

let shared: Promise<TestPostgres> | undefined;

/** Which store a test server runs on: the embedded SQLite file, or a database of the test cluster. */
export type Engine = "sqlite" | "postgres";

/**
 * The settings that put a server on `engine`'s store: none for SQLite (the data dir's file), a fresh
 * database of the test cluster as `INFERD_DATABASE_URL` for PostgreSQL.
 * @example const srv = await startInferd({ env: { ...(await storeEnv("postgres")) } }); // or engine: "postgres"
 */
export async function storeEnv(engine: Engine = "sqlite"): Promise<Record<string, string>> {
  if (engine === "sqlite") return {};
  return { INFERD_DATABASE_URL: await (await testPostgres()).createDatabase() };
}

/**
 * The test cluster of this process, started on first use (`initdb` into a temp dir, `pg_ctl start`
 * on a free loopback port, trust authentication for the `inferd` user on loopback only).
 * @example const pg = await testPostgres(); const url = await pg.createDatabase();
 */
export function testPostgres(): Promise<TestPostgres> {
  shared ??= startCluster();
  return shared;
}

/** Stops the shared cluster (if one was started) and removes its directory. */
export async function stopTestPostgres(): Promise<void> {
  const s = shared;
  shared = undefined;
  if (s) await (await s).stop();
}

async function startCluster(): Promise<TestPostgres> {
  const bin = postgresBinDir();
  const dir = mkdtempSync(join(tmpdir(), "inferd-pg-"));
  const data = join(dir, "data");
  if (process.getuid?.() === 0) {
    // The server's own user must own its directory and may create the socket and log beside it.
    chmodSync(dir, 0o777);
    const pg = Bun.spawnSync(["id", "-u", "postgres"]).stdout.toString().trim();
    const gid = Bun.spawnSync(["id", "-g", "postgres"]).stdout.toString().trim();
    if (!pg) throw new Error("the postgres user does not exist: install Debian's postgresql package");
    mkdirSync(data, { mode: 0o700 });
    chownSync(data, Number(pg), Number(gid));
  }
  await run(join(bin, "initdb"), ["-D", data, "-U", "inferd", "--auth=trust", "-E", "UTF8", "--no-sync"]);
  const port = await freePort();
  const opts = `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200`;
  await run(join(bin, "pg_ctl"), ["-D", data, "-o", opts, "-l", join(dir, "server.log"), "-w", "-t", "60", "start"]);
  let n = 0;
  const admin = new SQL({ url: `postgres://inferd@127.0.0.1:${port}/postgres`, max: 1 });
  return {
    port,
    async createDatabase(name?: string) {
      const db = name ?? `t${process.pid}_${++n}_${Math.random().toString(36).slice(2, 8)}`;
      await admin.unsafe(`CREATE DATABASE "${db}"`);
      return `postgres://inferd@127.0.0.1:${port}/${db}`;
    },
    async stop() {
      await admin.close().catch(() => {});
      await run(join(bin, "pg_ctl"), ["-D", data, "-m", "immediate", "-w", "stop"]).catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
