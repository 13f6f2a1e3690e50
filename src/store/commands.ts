import type { Config } from "../config";
import { dataPaths } from "../datadir";
import { takeBackup } from "./backup";
import { runDoctor } from "./doctor";
import { formatChecks } from "./report";
import { restoreStore } from "./restore";

const mib = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(1)} MiB`;

/** `inferd backup [<file>]`: a verified copy of the store, safe while a server serves; returns what to print. */
export function backupCommand(config: Config, file?: string): string {
  const b = takeBackup(config.dataDir, config.backupKeep, file);
  return `backup written to ${b.path} (${mib(b.bytes)}, integrity checked)`;
}

/** `inferd restore <file>`: the backup in place of the store (refused while a server holds the data dir); returns what to print. */
export function restoreCommand(config: Config, file: string): string {
  const r = restoreStore(config.dataDir, file);
  const kept = r.setAside ? `; the store it replaced is kept as ${r.setAside}` : "";
  return `restored ${r.from} as ${dataPaths(config.dataDir).db}${kept}. Start inferd serve again.`;
}

/** `inferd doctor [--json]`: prints the checks; the exit code is 1 when one failed. */
export async function doctorCommand(config: Config, json: boolean, out: (s: string) => void): Promise<number> {
  const checks = await runDoctor(config);
  const failed = checks.some((c) => c.status === "fail");
  out(json ? JSON.stringify({ ok: !failed, checks }, null, 2) : formatChecks(checks));
  return failed ? 1 : 0;
}
