/**
 * `inferd doctor`'s store lines in PostgreSQL mode (`--database-url`): the connection, the server's
 * version, the migrations, the newest `pg_dump` archive, then the cluster's own lines. The SQLite
 * file checks do not apply: the store is the database. Reads only; creates and migrates nothing.
 */
import { PG_MIGRATIONS } from "../db/migrations";
import { isPostgresUrl, pgStore, redactUrl, type Store } from "../db";
import { listBackups } from "./backup";
import { ago, shellWord } from "./check";
import { clusterChecks } from "./doctor-cluster";
import { check, type Check } from "./report";

/** The oldest PostgreSQL inferd's migrations run on (identity columns, `EXECUTE FUNCTION` triggers). */
const MIN_SERVER_VERSION = 110000;

/** An error's message with the URL's password taken out, wherever it appears. */
function hidden(url: string, message: string): string {
  const password = (() => {
    try {
      return decodeURIComponent(new URL(url).password);
    } catch {
      return "";
    }
  })();
  return password ? message.split(password).join("***") : message;
}

/** The hint for a database that cannot be reached. */
export const CONNECT_HINT =
  "check the URL, that PostgreSQL runs and accepts this host (listen_addresses, pg_hba.conf), and the user's password";

/** Why `store` cannot reach its database (the message, its code, the password hidden), or null when `SELECT 1` answers. */
export async function unreachable(store: Store, url: string): Promise<string | null> {
  try {
    await store.pg!.unsafe("SELECT 1");
    return null;
  } catch (e) {
    const code = (e as { code?: unknown }).code;
    return hidden(url, `${(e as Error).message}${typeof code === "string" ? ` (${code})` : ""}`);
  }
}

/** One query's rows. */
const query = async <T>(store: Store, text: string) => [...((await store.pg!.unsafe(text)) as T[])];

/** The server's version: ok from PostgreSQL 11 on, older fails (the migrations need it). */
async function versionCheck(store: Store): Promise<Check> {
  const [row] = await query<{ version: string; num: string }>(
    store,
    "SELECT current_setting('server_version') AS version, current_setting('server_version_num') AS num",
  );
  const detail = `PostgreSQL ${row.version}`;
  if (Number(row.num) < MIN_SERVER_VERSION)
    return check("postgres", "fail", `${detail}: too old`, "inferd needs PostgreSQL 11 or newer");
  return check("postgres", "ok", detail);
}

/** The PostgreSQL migrations recorded: all applied is ok, some missing a warning, an unknown one a failure. */
async function migrationsCheck(store: Store): Promise<Check> {
  const [{ present }] = await query<{ present: boolean }>(
    store,
    "SELECT to_regclass('__inferd_migrations') IS NOT NULL AS present",
  );
  const total = PG_MIGRATIONS.length;
  if (!present)
    return check(
      "migrations",
      "warn",
      `no inferd tables in ${store.location} yet (0 of ${total} applied)`,
      "inferd serve --database-url … creates them at its first start",
    );
  const applied = (await query<{ tag: string }>(store, "SELECT tag FROM __inferd_migrations")).map((r) => r.tag);
  const unknown = applied.find((tag) => !PG_MIGRATIONS.some((m) => m.tag === tag));
  if (unknown)
    return check(
      "migrations",
      "fail",
      `migration ${unknown} was applied by a newer inferd`,
      "run that newer inferd on this database",
    );
  const pending = total - applied.length;
  if (pending > 0)
    return check(
      "migrations",
      "warn",
      `${applied.length} of ${total} PostgreSQL migrations applied`,
      `the other ${pending} are applied at the next start of inferd serve`,
    );
  return check("migrations", "ok", `all ${total} PostgreSQL migrations applied`);
}

/** The newest `pg_dump` archive in `<data-dir>/backups/` (serve takes none by itself in this mode). */
function pgBackupCheck(dataDir: string, now: number): Check {
  const newest = listBackups(dataDir, "pgdump")[0];
  const take = `inferd backup --data-dir ${shellWord(dataDir)} --database-url …`;
  if (!newest)
    return check(
      "backups",
      "warn",
      `no pg_dump archive in ${dataDir}/backups`,
      `${take} (runs pg_dump), or rely on the database's own backups`,
    );
  return check("backups", "ok", `newest ${newest.path} (${ago(now - newest.takenAt.getTime())})`);
}

/** The line saying why the SQLite file checks are left out. */
const storeLine = (url: string) =>
  check(
    "store",
    "ok",
    `the store is the PostgreSQL database ${redactUrl(url)} (--database-url); the SQLite file checks do not apply`,
  );

/**
 * The store checks in PostgreSQL mode: the store line, the connection (password hidden), the
 * server's version, the migrations, backups, and `clusterChecks` once the schema is current.
 * A connection that fails is one `fail` line, and the database checks after it are left out.
 */
export async function pgChecks(url: string, dataDir: string, now: number): Promise<Check[]> {
  const shown = redactUrl(url);
  if (!isPostgresUrl(url))
    return [
      check(
        "connection",
        "fail",
        `--database-url is not a postgres:// URL`,
        "give a postgres://user:password@host:port/database URL, or leave it unset for the embedded store",
      ),
    ];
  const store = pgStore(url, 1, 5);
  try {
    const why = await unreachable(store, url);
    if (why !== null)
      return [storeLine(url), check("connection", "fail", `cannot connect to ${shown}: ${why}`, CONNECT_HINT)];
    const out = [
      storeLine(url),
      check("connection", "ok", `connected to ${shown}`),
      await versionCheck(store),
      await migrationsCheck(store),
      pgBackupCheck(dataDir, now),
    ];
    const current = out.every((c) => c.status === "ok" || c.name === "backups");
    return current ? [...out, ...(await clusterChecks(store))] : out;
  } finally {
    await store.close().catch(() => {});
  }
}
