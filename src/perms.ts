import { chmodSync, existsSync, lstatSync, readdirSync } from "node:fs";
import { join } from "node:path";

/** Files at the top of a data dir that hold secrets or data: owner-only. */
const PRIVATE_FILES = [
  "inferd.db",
  "inferd.db-wal",
  "inferd.db-shm",
  "admin-token",
  "agent.json",
  "inferd.lock",
  "inferd.pid",
];
/** Folders whose whole tree is owner-only (runtime logs, TLS key, pid files). */
const PRIVATE_TREES = ["logs", "tls", "run", "backups"];

/**
 * Makes everything inferd creates from now on owner-only (umask 077: files 0600, folders 0700),
 * runtimes included, since they inherit it.
 */
export function restrictUmask(): void {
  process.umask(0o077);
}

/**
 * Tightens an existing data dir: the dir itself 0700, the store, its WAL, the admin token and the
 * agent credential 0600, and the logs, TLS and backup trees owner-only. Returns one line per path
 * that was wider (the caller warns with them). Symbolic links are left alone.
 * @example tightenDataDir("/var/lib/inferd") // → ["/var/lib/inferd/inferd.db was 0644, now 0600"]
 */
export function tightenDataDir(dir: string): string[] {
  const changed: string[] = [];
  const fix = (path: string) => {
    const st = lstatSync(path, { throwIfNoEntry: false });
    if (!st || st.isSymbolicLink() || (st.mode & 0o077) === 0) return;
    // Owner bits kept (an executable stays executable), group and others removed.
    const want = (st.mode & 0o700) | (st.isDirectory() ? 0o700 : 0o600);
    chmodSync(path, want);
    const octal = (m: number) => (m & 0o777).toString(8).padStart(4, "0");
    changed.push(`${path} was ${octal(st.mode)}, now ${octal(want)}`);
  };
  const tree = (path: string) => {
    fix(path);
    const st = lstatSync(path, { throwIfNoEntry: false });
    if (st?.isDirectory()) for (const name of readdirSync(path)) tree(join(path, name));
  };
  fix(dir);
  for (const f of PRIVATE_FILES) fix(join(dir, f));
  for (const t of PRIVATE_TREES) if (existsSync(join(dir, t))) tree(join(dir, t));
  return changed;
}
