import type { Config } from "../config";
import { dataPaths } from "../datadir";
import { takeBackup } from "./backup";
import { runDoctor } from "./doctor";
import { engineReports, formatEngineReports } from "./doctor-engines";
import { formatChecks } from "./report";
import { restoreStore } from "./restore";
import { pgBackup, pgRestoreAdvice } from "./pg-backup";
import { redactUrl } from "../db";
import { plural } from "../words";

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

/** `inferd backup [<file>]`: a verified copy of the store (a pg_dump archive in PostgreSQL mode), safe while a server serves; returns what to print. */
export async function backupCommand(config: Config, file?: string): Promise<string> {
  if (config.databaseUrl === undefined) {
    const b = takeBackup(config.dataDir, config.backupKeep, file);
    return `backup written to ${b.path} (${mib(b.bytes)}, integrity checked)`;
  }
  const b = await pgBackup(config.databaseUrl, config.dataDir, config.backupKeep, file);
  const checked = b.verifiedWith ? `read back with ${b.verifiedWith} --list` : "not read back: no pg_restore found";
  const pruned = b.removed.length
    ? `; removed ${plural(b.removed.length, "older archive")} beyond --backup-keep ${config.backupKeep}`
    : "";
  return `backup written to ${b.path} (${mib(b.bytes)}): ${b.dump} --format=custom of ${redactUrl(config.databaseUrl)}, ${checked}${pruned}. Restore it with pg_restore (inferd restore <file> prints the command).`;
}

/**
 * `inferd restore <file>`: the backup in place of the store (refused while a server holds the data
 * dir). In PostgreSQL mode nothing is touched: it prints the `pg_restore` command to run and
 * returns 2. Returns the exit code.
 */
export function restoreCommand(
  config: Config,
  file: string,
  out: (s: string) => void,
  err: (s: string) => void,
): number {
  if (config.databaseUrl !== undefined) {
    err(pgRestoreAdvice(config.databaseUrl, file, config.dataDir));
    return 2;
  }
  const r = restoreStore(config.dataDir, file);
  const kept = r.setAside ? `; the store it replaced is kept as ${r.setAside}` : "";
  out(`restored ${r.from} as ${dataPaths(config.dataDir).db}${kept}. Start inferd serve again.`);
  return 0;
}

/** `inferd doctor [--json]`: prints the checks; the exit code is 1 when one failed. With `--engines`, the engines on this machine instead (exit 0). */
export async function doctorCommand(
  config: Config,
  json: boolean,
  out: (s: string) => void,
  engines = false,
): Promise<number> {
  if (engines) {
    const reports = await engineReports(config.dataDir);
    out(json ? JSON.stringify({ engines: reports }, null, 2) : formatEngineReports(reports));
    return 0;
  }
  const checks = await runDoctor(config);
  const failed = checks.some((c) => c.status === "fail");
  out(json ? JSON.stringify({ ok: !failed, checks }, null, 2) : formatChecks(checks));
  return failed ? 1 : 0;
}
