import { closeSync, existsSync, openSync, readSync, statSync } from "node:fs";

const MAGIC = "SQLite format 3\0";

/** Reads the first `n` bytes of a file (fewer when it is shorter). */
function head(path: string, n: number): Buffer {
  const fd = openSync(path, "r");
  try {
    const buf = Buffer.alloc(n);
    return buf.subarray(0, readSync(fd, buf, 0, n, 0));
  } finally {
    closeSync(fd);
  }
}

/** Whether a file exists and is not empty. */
const nonEmpty = (path: string) => existsSync(path) && statSync(path).size > 0;

/**
 * What is wrong with an SQLite file as its header tells, cheaply (no page beyond the first is read):
 * a missing or bad magic string, an impossible page size, or a file shorter than the page count its
 * header vouches for (trusted only when "version-valid-for" equals the change counter and no WAL or
 * journal could still supply the missing pages). Null when the header looks sound or the file is new.
 * @example headerProblem("/data/inferd.db") // → "truncated: 40960 of 81920 bytes are there"
 */
export function headerProblem(path: string): string | null {
  if (!existsSync(path)) return null;
  const size = statSync(path).size;
  if (size === 0) return null;
  const h = head(path, 100);
  if (h.length < 100) return `truncated: ${size} bytes, shorter than the 100-byte SQLite header`;
  if (h.subarray(0, 16).toString("latin1") !== MAGIC) return "not an SQLite database: the header is damaged";
  const raw = h.readUInt16BE(16);
  const pageSize = raw === 1 ? 65536 : raw;
  if (pageSize < 512 || pageSize > 65536 || (pageSize & (pageSize - 1)) !== 0)
    return `the header is damaged (page size ${raw})`;
  const pages = h.readUInt32BE(28);
  const trusted = pages > 0 && h.readUInt32BE(24) === h.readUInt32BE(92);
  if (trusted && !nonEmpty(`${path}-wal`) && !existsSync(`${path}-journal`) && size < pages * pageSize) {
    return `truncated: ${size} of ${pages * pageSize} bytes are there`;
  }
  return null;
}

/** Whether a file begins as an SQLite database does (a `.db` backup of the embedded store); false when it cannot be read. */
export function isSqliteFile(path: string): boolean {
  try {
    return head(path, 16).toString("latin1") === MAGIC;
  } catch {
    return false;
  }
}

/** Whether an error from SQLite says the file is corrupt or not a database. */
export function isCorruption(e: unknown): boolean {
  const code = (e as { code?: unknown })?.code;
  return code === "SQLITE_CORRUPT" || code === "SQLITE_NOTADB";
}
