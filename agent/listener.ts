/**
 * Who listens on a loopback port, read from Linux's /proc: a runtime is ready only when the socket
 * listening on its port belongs to the process inferd started (or one of its descendants), so a
 * command cannot point inferd at another runtime or any other service on this machine.
 */
import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { readFile } from "node:fs/promises";

/** Where the process table lives (a parameter for tests). */
export interface ProcFs {
  root: string;
}

const LINUX: ProcFs = { root: "/proc" };

/**
 * The inodes of TCP sockets listening on `port` (IPv4 and IPv6). Read asynchronously: the kernel can
 * take tens of milliseconds to produce these tables on a busy machine.
 */
export async function listeningInodes(port: number, fs: ProcFs = LINUX): Promise<Set<string>> {
  const out = new Set<string>();
  for (const table of ["net/tcp", "net/tcp6"]) {
    let text = "";
    try {
      text = await readFile(`${fs.root}/${table}`, "utf8");
    } catch {
      continue;
    }
    for (const line of text.split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      // sl local_address rem_address st … inode: state 0A is LISTEN; the port is the hex after ':'.
      if (f.length < 10 || f[3] !== "0A") continue;
      if (Number.parseInt(f[1].split(":").pop() ?? "", 16) === port) out.add(f[9]);
    }
  }
  return out;
}

/** The pid and every descendant of it, from each process's parent in /proc/<pid>/stat. */
export function processTree(pid: number, fs: ProcFs = LINUX): number[] {
  const children = new Map<number, number[]>();
  for (const name of readdirSync(fs.root)) {
    if (!/^\d+$/.test(name)) continue;
    let stat = "";
    try {
      stat = readFileSync(`${fs.root}/${name}/stat`, "utf8");
    } catch {
      continue; // the process ended meanwhile
    }
    // "pid (comm) state ppid …": comm may hold spaces and parentheses, so read after the last ')'.
    const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
    const list = children.get(ppid) ?? [];
    list.push(Number(name));
    children.set(ppid, list);
  }
  const tree: number[] = [];
  const todo = [pid];
  while (todo.length) {
    const p = todo.pop()!;
    tree.push(p);
    todo.push(...(children.get(p) ?? []));
  }
  return tree;
}

/** Whether process `pid` holds a socket with one of `inodes` open. */
function holdsSocket(pid: number, inodes: Set<string>, fs: ProcFs): boolean {
  let fds: string[] = [];
  try {
    fds = readdirSync(`${fs.root}/${pid}/fd`);
  } catch {
    return false;
  }
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`${fs.root}/${pid}/fd/${fd}`));
      if (m && inodes.has(m[1])) return true;
    } catch {
      // closed meanwhile
    }
  }
  return false;
}

/**
 * Whether the listener on `port` belongs to `pid` or one of its descendants: true or false on
 * Linux; null where /proc cannot tell (other systems), and the caller then trusts the port.
 * @example await listenerOwnedBy(8001, runtimePid) // → false when another program holds port 8001
 */
export async function listenerOwnedBy(port: number, pid: number, fs: ProcFs = LINUX): Promise<boolean | null> {
  try {
    readdirSync(`${fs.root}/self/fd`);
  } catch {
    return null;
  }
  const inodes = await listeningInodes(port, fs);
  if (inodes.size === 0) return false;
  return processTree(pid, fs).some((p) => holdsSocket(p, inodes, fs));
}
