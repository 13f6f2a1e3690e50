import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readFileSync, unlinkSync, writeFileSync, writeSync } from "node:fs";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { startTime } from "../agent/pidfiles";

/** Files inside the data dir. */
export const dataPaths = (dir: string) => ({
  db: join(dir, "inferd.db"),
  lock: join(dir, "inferd.lock"),
  adminToken: join(dir, "admin-token"),
  logs: join(dir, "logs"),
  runtimes: join(dir, "runtimes"),
});

/** Creates the data dir (owner-only) if it does not exist. */
export function ensureDataDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
}

function alive(pid: number, start: string | null): boolean {
  try {
    process.kill(pid, 0);
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
  return start === null || startTime(pid) === null || startTime(pid) === start;
}

/** Lock files held by this process (a second server in one process is refused too). */
const heldHere = new Set<string>();

/** A second server on one data dir; the message says which process holds it. */
export class DataDirLocked extends Error {}

/**
 * Takes the data dir for this process: one `inferd serve` per data dir. A lock left by a process
 * that died (even by `kill -9`) is taken over; one held by a live process is refused clearly.
 * Returns a release function.
 */
export function lockDataDir(dir: string): { release(): void; update(info: string): void } {
  const path = dataPaths(dir).lock;
  if (heldHere.has(path)) throw new DataDirLocked(`this inferd is already serving the data dir ${dir}`);
  let info = "starting";
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(path, "wx", 0o600);
      const body = () => JSON.stringify({ pid: process.pid, start: startTime(process.pid), info });
      writeSync(fd, body());
      closeSync(fd);
      heldHere.add(path);
      return {
        release: () => {
          heldHere.delete(path);
          try {
            const held = JSON.parse(readFileSync(path, "utf8"));
            if (held.pid === process.pid) unlinkSync(path);
          } catch {}
        },
        update: (next: string) => {
          info = next;
          writeFileSync(path, body());
        },
      };
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
      let held: { pid?: number; start?: string | null; info?: string } = {};
      try {
        held = JSON.parse(readFileSync(path, "utf8"));
      } catch {}
      if (typeof held.pid === "number" && held.pid !== process.pid && alive(held.pid, held.start ?? null)) {
        throw new DataDirLocked(`another inferd (pid ${held.pid}${held.info ? `, ${held.info}` : ""}) is already serving the data dir ${dir}; stop it first or pass a different --data-dir`);
      }
      try {
        unlinkSync(path);
      } catch {}
    }
  }
  throw new DataDirLocked(`could not take the lock ${path}`);
}

/**
 * The admin token: from the setting when given, else the one saved in the data dir, else a new
 * one saved there with mode 0600. `created` tells the caller to print it (first start only).
 */
export function adminToken(dir: string, fromConfig: string | undefined): { token: string; created: boolean } {
  if (fromConfig) return { token: fromConfig, created: false };
  const path = dataPaths(dir).adminToken;
  if (existsSync(path)) {
    const saved = readFileSync(path, "utf8").trim();
    if (saved) return { token: saved, created: false };
  }
  const token = `ik_admin_${randomBytes(32).toString("base64url")}`;
  writeFileSync(path, `${token}\n`, { mode: 0o600 });
  chmodSync(path, 0o600);
  return { token, created: true };
}
