import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ptySpawn, type SpawnFn } from "./supervisor";

/** The kernel's start time of a process (Linux), to tell a live process from a reused pid. */
export function startTime(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19] ?? null;
  } catch {
    return null;
  }
}

const dirOf = (dataDir: string) => join(dataDir, "run");

/**
 * A spawn that leaves a pid file per runtime process group in `<dataDir>/run`, removed when the
 * process exits, so a restart after `kill -9` of inferd can stop runtimes the crash left behind.
 */
export function trackedSpawn(dataDir: string, spawn: SpawnFn = ptySpawn): SpawnFn {
  return (req) => {
    const proc = spawn(req);
    const file = join(dirOf(dataDir), `${proc.pid}.json`);
    try {
      mkdirSync(dirOf(dataDir), { recursive: true });
      writeFileSync(file, JSON.stringify({ pid: proc.pid, start: startTime(proc.pid), argv: req.argv }));
    } catch {}
    void proc.exited.then(() => rmSync(file, { force: true }));
    return proc;
  };
}

/**
 * Stops runtime process groups a previous inferd left running (it died without stopping them):
 * SIGTERM, then SIGKILL after `graceMs`. Returns the pids it stopped.
 */
export async function reapStale(dataDir: string, graceMs = 5000): Promise<number[]> {
  let files: string[];
  try {
    files = readdirSync(dirOf(dataDir)).filter((f) => f.endsWith(".json"));
  } catch {
    return [];
  }
  const stale: number[] = [];
  for (const f of files) {
    const path = join(dirOf(dataDir), f);
    try {
      const { pid, start } = JSON.parse(readFileSync(path, "utf8")) as { pid: number; start: string | null };
      if (start && startTime(pid) === start) {
        process.kill(-pid, "SIGTERM");
        stale.push(pid);
      }
    } catch {}
    rmSync(path, { force: true });
  }
  const deadline = Date.now() + graceMs;
  while (stale.some((p) => startTime(p) !== null) && Date.now() < deadline) await Bun.sleep(50);
  for (const p of stale) {
    try {
      process.kill(-p, "SIGKILL");
    } catch {}
  }
  return stale;
}
