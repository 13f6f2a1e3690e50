import { existsSync, statSync } from "node:fs";
import { join } from "node:path";
import type { Config } from "../config";
import { dataPaths } from "../datadir";
import { MIGRATIONS } from "../db/migrations";
import { inspectDatabase, lastGoodBackup, unknownMigration } from "./backup";
import { ago, freeBytes, shellWord } from "./check";
import { headerProblem } from "./header";
import { hostChecks, type HostDeps } from "./doctor-host";
import { pgChecks } from "./doctor-pg";
import { check, type Check } from "./report";
import { plural } from "../words";

const mode = (path: string) => statSync(path).mode & 0o777;
const octal = (m: number) => `0${m.toString(8)}`;

/** The data dir's own mode (0700) and its secrets' (0600): wider is a warning. */
function modeChecks(dir: string): Check[] {
  const dirMode = mode(dir);
  const out = [
    dirMode & 0o077
      ? check("data dir", "warn", `${dir} is mode ${octal(dirMode)}, readable by others`, `chmod 700 ${shellWord(dir)}`)
      : check("data dir", "ok", `${dir} (mode ${octal(dirMode)})`),
  ];
  const files = [dataPaths(dir).db, dataPaths(dir).adminToken, join(dir, "tls", "host-key.pem")].filter(existsSync);
  const wide = files.filter((f) => mode(f) & 0o077);
  out.push(
    wide.length
      ? check(
          "file modes",
          "warn",
          wide.map((f) => `${f} is mode ${octal(mode(f))}`).join("; "),
          `chmod 600 ${wide.map(shellWord).join(" ")}`,
        )
      : check(
          "file modes",
          "ok",
          files.length ? `${plural(files.length, "secret file")} owner-only (0600)` : "no store or secrets yet",
        ),
  );
  return out;
}

/** The store's header, a full `integrity_check` (read-only: fine while a server runs), and its migrations. */
function storeChecks(dir: string): Check[] {
  const db = dataPaths(dir).db;
  if (!existsSync(db) || statSync(db).size === 0)
    return [check("store", "warn", `no store yet at ${db}`, "inferd serve creates it")];
  const backup = lastGoodBackup(dir);
  const restoreHint = backup
    ? `restore the last good backup: inferd restore ${shellWord(backup.path)} --data-dir ${shellWord(dir)}`
    : "there is no backup to restore; see the README's Store safety section";
  const header = headerProblem(db);
  if (header) return [check("store", "fail", `${db}: ${header}`, restoreHint)];
  let inspection;
  try {
    inspection = inspectDatabase(db);
  } catch (e) {
    return [check("store", "fail", `${db}: ${(e as Error).message}`, restoreHint)];
  }
  const { integrity, migrations } = inspection;
  const size = `${(statSync(db).size / 1024 / 1024).toFixed(1)} MiB`;
  const out = [
    integrity.join() === "ok"
      ? check("store", "ok", `integrity_check ok (${db}, ${size})`)
      : check("store", "fail", `integrity_check: ${integrity.slice(0, 3).join("; ")}`, restoreHint),
  ];
  const unknown = unknownMigration(migrations ?? []);
  const pending = MIGRATIONS.filter((m) => !migrations?.includes(m.tag)).length;
  if (!migrations)
    out.push(check("migrations", "fail", "no __inferd_migrations table: not an inferd store", restoreHint));
  else if (unknown)
    out.push(
      check(
        "migrations",
        "fail",
        `migration ${unknown} was applied by a newer inferd`,
        "run that newer inferd (or restore an older backup)",
      ),
    );
  else if (pending)
    out.push(
      check(
        "migrations",
        "warn",
        `${migrations.length} of ${MIGRATIONS.length} applied`,
        `the other ${pending} are applied at the next start`,
      ),
    );
  else out.push(check("migrations", "ok", `all ${MIGRATIONS.length} applied`));
  return out;
}

/** The newest verified backup and its age against the automatic backup interval. */
function backupCheck(config: Config, now: number): Check {
  const backup = lastGoodBackup(config.dataDir);
  const take = `inferd backup --data-dir ${shellWord(config.dataDir)}`;
  if (!backup)
    return check(
      "backups",
      "warn",
      `no backup in ${dataPaths(config.dataDir).backups}`,
      config.backupIntervalHours
        ? `serve takes one within its first ${config.backupIntervalHours} h; now: ${take}`
        : take,
    );
  const age = now - backup.takenAt.getTime();
  const detail = `newest ${backup.path} (${ago(age)})`;
  if (config.backupIntervalHours === 0)
    return check("backups", "warn", `${detail}; automatic backups are off`, "--backup-interval-hours 24");
  if (age > 2 * config.backupIntervalHours * 3_600_000)
    return check(
      "backups",
      "warn",
      `${detail}: older than twice --backup-interval-hours`,
      `look for "automatic backup failed" in the server log, or run ${take}`,
    );
  return check("backups", "ok", detail);
}

/** Free space on the data dir's file system against `--min-free-disk-mb`. */
function diskCheck(config: Config): Check {
  const free = freeBytes(config.dataDir);
  if (free === null) return check("free disk", "warn", "this platform does not tell the free space");
  const mb = free / 1024 / 1024;
  const detail = `${mb >= 10_240 ? `${(mb / 1024).toFixed(1)} GiB` : `${mb.toFixed(0)} MiB`} free`;
  if (mb < config.minFreeDiskMb)
    return check(
      "free disk",
      "fail",
      `${detail}, less than --min-free-disk-mb (${config.minFreeDiskMb}): serve refuses to start`,
      "free disk space",
    );
  if (mb < 4 * config.minFreeDiskMb)
    return check(
      "free disk",
      "warn",
      `${detail}, close to --min-free-disk-mb (${config.minFreeDiskMb})`,
      "free disk space",
    );
  return check("free disk", "ok", detail);
}

/**
 * Settings that widen what tenants' workloads may reach: allowing private model URLs lets a
 * tenant's model download reach this machine's loopback services and the LAN.
 */
function policyCheck(config: Config): Check {
  if (config.allowPrivateModelUrls)
    return check(
      "launch policy",
      "warn",
      "--allow-private-model-urls is on: tenants' model URLs (llama.cpp -mu) may reach loopback and private addresses, including services on this machine",
      "turn it off unless every tenant is trusted (unset INFERD_ALLOW_PRIVATE_MODEL_URLS)",
    );
  return check("launch policy", "ok", "tenants' model URLs must be public https addresses");
}

/**
 * `inferd doctor`: the data dir, its modes, the store's integrity and migrations, backups, free
 * disk, then the host (GPUs, runtimes, ports, certificate). With `--database-url` the store lines
 * are PostgreSQL's (./doctor-pg.ts) instead of the SQLite file's. Changes nothing; safe while serving.
 */
export async function runDoctor(config: Config, deps: Partial<HostDeps> = {}): Promise<Check[]> {
  const now = (deps.now ?? Date.now)();
  const dir = config.dataDir;
  const db = config.databaseUrl !== undefined ? await pgChecks(config.databaseUrl, dir, now) : undefined;
  const store = existsSync(dir)
    ? [
        ...modeChecks(dir),
        ...(db ?? [...storeChecks(dir), backupCheck(config, now)]),
        diskCheck(config),
        policyCheck(config),
      ]
    : [
        check("data dir", "fail", `${dir} does not exist`, "inferd serve creates it; or pass the right --data-dir"),
        ...(db ?? []),
      ];
  return [...store, ...(await hostChecks(config, deps))];
}
