import { readdirSync, readFileSync } from "node:fs";

/** Clock ticks per second of /proc's CPU times (USER_HZ, 100 on Linux). */
const TICKS_PER_S = 100;

/**
 * The CPU time (ms) used so far by every live process of process group `pgid` (a runtime and its
 * workers: the supervisor starts each in a group of its own), from /proc/<pid>/stat's utime and
 * stime (fields 14 and 15, proc(5)); null where there is no /proc (macOS).
 * @example groupCpuMs(process.pid) // → 1234 (this process's group, when it leads one)
 */
export function groupCpuMs(pgid: number): number | null {
  let pids: string[];
  try {
    pids = readdirSync("/proc").filter((d) => /^\d+$/.test(d));
  } catch {
    return null;
  }
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "latin1");
      // The command name (field 2) is in parentheses and may hold spaces: count fields after its ")".
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(f[2]) === pgid) ticks += Number(f[11]) + Number(f[12]);
    } catch {
      // gone meanwhile
    }
  }
  return (ticks * 1000) / TICKS_PER_S;
}
