#!/usr/bin/env bun
/**
 * A PostgreSQL for the benchmarks: either one started here (Debian's `initdb` and `pg_ctl`, a
 * cluster in a temporary directory listening on a free loopback port, as the `postgres` user when
 * run as root) with PostgreSQL's DEFAULT, DURABLE settings — fsync, synchronous_commit and
 * full_page_writes on, unlike the test helper, which turns them off — or the server of a
 * `--database-url` given on the command line. Each benchmark run gets its own new database in it
 * (dropped afterwards); the settings in force are read back from the server and printed.
 *
 * Run on its own, it starts a server, prints its URL and settings and keeps it up until Ctrl-C:
 *
 *   bun bench/pg.ts
 *
 * The benchmarks take `--store postgres` (a server started here) or `--database-url URL`
 * (`takeStoreArgs`); without either they keep the embedded SQLite store.
 */
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { SQL } from "bun";
import { freePort } from "../test/fixtures";
import { cpuMsOf } from "./lib";

/** Which store a benchmark runs inferd on, from its command line. */
export interface StoreChoice {
  store: "sqlite" | "postgres";
  /** A server to use instead of starting one (`--database-url`). */
  databaseUrl?: string;
}

/** The usage text of the store flags, to append to a benchmark's own. */
export const STORE_USAGE = "[--store sqlite|postgres | --database-url postgres://…]";

/**
 * Takes `--store sqlite|postgres` and `--database-url URL` out of `argv` (a URL implies postgres);
 * returns the choice and the other arguments, for the benchmark's own parser. Exits 2 on a bad value.
 * @example const { choice, rest } = takeStoreArgs(process.argv.slice(2)); parseQuickArgs(rest, USAGE)
 */
export function takeStoreArgs(argv: string[]): { choice: StoreChoice; rest: string[] } {
  const choice: StoreChoice = { store: "sqlite" };
  const rest: string[] = [];
  const bad = (why: string) => {
    console.error(`${why}\nstore flags: ${STORE_USAGE}`);
    process.exit(2);
  };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--store") {
      const v = argv[++i];
      if (v !== "sqlite" && v !== "postgres") bad(`--store takes sqlite or postgres, not "${v ?? ""}"`);
      choice.store = v as StoreChoice["store"];
    } else if (argv[i] === "--database-url") {
      const v = argv[++i];
      if (!v || !/^postgres(ql)?:\/\//.test(v)) bad(`--database-url takes a postgres:// URL`);
      choice.databaseUrl = v;
    } else rest.push(argv[i]);
  }
  if (choice.databaseUrl) {
    if (choice.store === "sqlite" && argv.includes("--store")) bad("--database-url is PostgreSQL: drop --store sqlite");
    choice.store = "postgres";
  }
  return { choice, rest };
}

/** The server settings that decide what a commit costs, and a few that bound the load. */
const SHOWN_SETTINGS = [
  "server_version",
  "fsync",
  "synchronous_commit",
  "full_page_writes",
  "wal_sync_method",
  "wal_level",
  "commit_delay",
  "shared_buffers",
  "max_connections",
];

/** A PostgreSQL server for one benchmark run, and the new database made for it. */
export interface BenchPostgres {
  /** The run's own new, empty database (`postgres://…/<name>`). */
  url: string;
  /** Whether this process started the server (else it is the one of `--database-url`). */
  started: boolean;
  /** The settings in force, as the server reports them (`SHOW`). */
  settings: Record<string, string>;
  /** One line naming the server and its commit settings. */
  describe(): string;
  /** Another new database in the same server, dropped at `stop()`. */
  createDatabase(): Promise<string>;
  /** CPU time (ms) used so far by the server's processes (postmaster and its children); NaN when not started here. */
  cpuMs(): number;
  /** Drops the databases made here, stops a server started here and removes its directory. Idempotent. */
  stop(): Promise<void>;
}

/** A URL with the password replaced by `***`. */
export function redact(url: string): string {
  return url.replace(/\/\/([^:/@]+):[^@]*@/, "//$1:***@");
}

/** The same URL naming another database. */
function withDatabase(url: string, db: string): string {
  const u = new URL(url);
  u.pathname = `/${db}`;
  return u.toString();
}

/** Reads `SHOWN_SETTINGS` from a server. */
export async function readSettings(url: string): Promise<Record<string, string>> {
  const sql = new SQL({ url, max: 1 });
  try {
    const out: Record<string, string> = {};
    for (const name of SHOWN_SETTINGS) {
      const [row] = (await sql.unsafe(`SHOW ${name}`)) as Record<string, string>[];
      out[name] = String(Object.values(row)[0]);
    }
    return out;
  } finally {
    await sql.close();
  }
}

/**
 * The directory holding `initdb` and `pg_ctl`: on PATH, else Debian's newest versioned one. (The
 * test helper has the same; this copy keeps the benchmarks runnable against older checkouts.)
 */
function postgresBinDir(): string {
  for (const dir of (process.env.PATH ?? "").split(":"))
    if (dir && existsSync(join(dir, "pg_ctl")) && existsSync(join(dir, "initdb"))) return dir;
  const root = "/usr/lib/postgresql";
  const versions = existsSync(root)
    ? readdirSync(root)
        .filter((v) => existsSync(join(root, v, "bin", "pg_ctl")))
        .sort((x, y) => Number(y) - Number(x))
    : [];
  if (!versions.length)
    throw new Error(
      "PostgreSQL is not installed: --store postgres needs Debian's postgresql package (apt-get install postgresql)",
    );
  return join(root, versions[0], "bin");
}

/** Runs a PostgreSQL program, as the `postgres` user when root; throws with its output on failure. */
async function runPg(bin: string, args: string[]): Promise<void> {
  const argv = process.getuid?.() === 0 ? ["runuser", "-u", "postgres", "--", bin, ...args] : [bin, ...args];
  const p = Bun.spawn(argv, { stdin: "ignore", stdout: "pipe", stderr: "pipe", env: { ...process.env, LC_ALL: "C" } });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`${argv.join(" ")} exited with ${code}:\n${out}${err}`);
}

/** CPU time (ms) of a process and its children (one level: a postmaster's backends and helpers). */
function treeCpuMs(pid: number): number {
  let total = cpuMsOf(pid) ?? NaN;
  let children: string[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean);
  } catch {}
  for (const c of children) total += cpuMsOf(Number(c)) ?? 0;
  return total;
}

/**
 * Starts a server with default settings in a new temporary directory (or takes the one of
 * `databaseUrl`) and makes the run's database in it.
 * @example const pg = await startBenchPostgres(); console.log(pg.describe()); … await pg.stop();
 */
export async function startBenchPostgres(opts: { databaseUrl?: string } = {}): Promise<BenchPostgres> {
  let adminUrl: string;
  let stopServer = async () => {};
  let postmasterPid: () => number | undefined = () => undefined;
  if (opts.databaseUrl) {
    adminUrl = opts.databaseUrl;
  } else {
    const bin = postgresBinDir();
    const dir = mkdtempSync(join(tmpdir(), "inferd-bench-pg-"));
    const data = join(dir, "data");
    if (process.getuid?.() === 0) {
      // PostgreSQL refuses to run as root: its own user owns the data dir and may write beside it.
      chmodSync(dir, 0o777);
      const uid = Number(Bun.spawnSync(["id", "-u", "postgres"]).stdout.toString().trim());
      const gid = Number(Bun.spawnSync(["id", "-g", "postgres"]).stdout.toString().trim());
      if (!uid) throw new Error("the postgres user does not exist: install Debian's postgresql package");
      mkdirSync(data, { mode: 0o700 });
      chownSync(data, uid, gid);
    }
    let started = false;
    stopServer = async () => {
      if (started)
        await runPg(join(bin, "pg_ctl"), ["-D", data, "-m", "fast", "-w", "-t", "60", "stop"]).catch((e) =>
          console.error(`stopping the benchmark PostgreSQL: ${e.message}`),
        );
      rmSync(dir, { recursive: true, force: true });
    };
    try {
      await runPg(join(bin, "initdb"), ["-D", data, "-U", "inferd", "--auth=trust", "-E", "UTF8"]);
      const port = await freePort();
      // Only where it listens: every other setting is PostgreSQL's default (durable commits).
      await runPg(join(bin, "pg_ctl"), [
        "-D",
        data,
        "-o",
        `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1`,
        "-l",
        join(dir, "server.log"),
        "-w",
        "-t",
        "60",
        "start",
      ]);
      started = true;
      adminUrl = `postgres://inferd@127.0.0.1:${port}/postgres`;
      postmasterPid = () => {
        try {
          return Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]) || undefined;
        } catch {
          return undefined;
        }
      };
    } catch (e) {
      await stopServer();
      throw e;
    }
  }
  const admin = new SQL({ url: adminUrl, max: 1 });
  const made: string[] = [];
  let n = 0;
  const createDatabase = async () => {
    const name = `inferd_bench_${process.pid}_${++n}_${Math.random().toString(36).slice(2, 8)}`;
    await admin.unsafe(`CREATE DATABASE "${name}"`);
    made.push(name);
    return withDatabase(adminUrl, name);
  };
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      for (const name of made.splice(0))
        await admin
          .unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)
          .catch((e) => console.error(`dropping database ${name}: ${e.message}`));
      await admin.close().catch(() => {});
      await stopServer();
    })());
  try {
    const url = await createDatabase();
    const settings = await readSettings(url);
    const where = opts.databaseUrl
      ? `the server of --database-url ${redact(opts.databaseUrl)}`
      : `a server started for this run (${adminUrl.replace(/\/postgres$/, "")}, default settings)`;
    const shown = SHOWN_SETTINGS.filter((k) => k !== "server_version")
      .map((k) => `${k}=${settings[k]}`)
      .join(" ");
    return {
      url,
      started: !opts.databaseUrl,
      settings,
      describe: () => `PostgreSQL ${settings.server_version}: ${where}; ${shown}`,
      createDatabase,
      cpuMs: () => {
        const pid = postmasterPid();
        return pid ? treeCpuMs(pid) : NaN;
      },
      stop,
    };
  } catch (e) {
    await stop();
    throw new Error(
      `cannot make a benchmark database in ${redact(adminUrl)} (it needs CREATEDB): ${e instanceof Error ? e.message : String(e)}`,
    );
  }
}

if (import.meta.main) {
  const pg = await startBenchPostgres();
  console.log(pg.describe());
  console.log(`database: ${pg.url}\n(Ctrl-C stops the server and removes it)`);
  const done = () => void pg.stop().finally(() => process.exit(0));
  process.on("SIGINT", done);
  process.on("SIGTERM", done);
  setInterval(() => {}, 1 << 30); // stay up until a signal
}
