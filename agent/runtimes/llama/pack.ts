/**
 * The built-in llama.cpp runtime's pack: one file holding the bundled llama-runner.js and the
 * node-llama-cpp files it needs, embedded in the compiled binary and unpacked once per data dir.
 *
 * Layout: the magic `INFERDPK`, a u32 (little endian) byte length, that many bytes of JSON index
 * (`{format, id, files: [{path, size, mode}]}`), then one zstd frame holding every file's bytes in
 * index order. The index is outside the compressed part so the id can be read without inflating.
 *
 * Unpacking goes into a fresh `.unpack-<pid>-*` dir that is renamed to `<base>/<id>` when complete,
 * so a reader never sees half a runtime; a rename that loses a race to another process's finished
 * copy is fine, and leftovers of a process that died while unpacking are removed on the next unpack.
 */
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { dirname, join } from "node:path";
import { zstdDecompressSync } from "node:zlib";

const MAGIC = "INFERDPK";
const FORMAT = 1;
/** Written last into a complete unpack (holds the id); its absence means the dir is damaged. */
export const COMPLETE_MARKER = ".inferd-pack";

/** One file to pack: its path relative to the unpack dir (forward slashes), bytes and mode. */
export interface PackInput {
  path: string;
  bytes: Uint8Array;
  mode: number;
}

/** A pack's index: its id (also the name of its unpack dir) and its files in data order. */
export interface PackIndex {
  format: number;
  id: string;
  files: { path: string; size: number; mode: number }[];
}

/** A path we write only under the unpack dir: relative, forward slashes, no `.`/`..` segments. */
function isSafePath(path: string): boolean {
  return (
    path.length > 0 &&
    !path.startsWith("/") &&
    !/^[A-Za-z]:/.test(path) &&
    path.split("/").every((s) => s !== "" && s !== "." && s !== ".." && !s.includes("\\"))
  );
}

/**
 * Builds a pack. The id is `<label>-<first 16 hex of sha256 over every path, mode and byte>`, so
 * the same content always unpacks into the same dir and changed content into a new one.
 * @example encodePack([{ path: "a.js", bytes, mode: 0o644 }], { label: "3.22.1" }).id // → "3.22.1-9f2c…"
 */
export function encodePack(
  files: PackInput[],
  opts: { label: string; level?: number },
): { bytes: Uint8Array; index: PackIndex } {
  const hasher = new Bun.CryptoHasher("sha256");
  for (const f of files) {
    if (!isSafePath(f.path)) throw new Error(`pack: unsafe path "${f.path}"`);
    hasher.update(`${f.path}\0${f.mode}\0${f.bytes.length}\0`);
    hasher.update(f.bytes);
  }
  const id = `${opts.label.replace(/[^\w.+-]/g, "_")}-${hasher.digest("hex").slice(0, 16)}`;
  const index: PackIndex = {
    format: FORMAT,
    id,
    files: files.map((f) => ({ path: f.path, size: f.bytes.length, mode: f.mode })),
  };
  const head = new TextEncoder().encode(JSON.stringify(index));
  const data = Bun.zstdCompressSync(Buffer.concat(files.map((f) => f.bytes)), { level: opts.level ?? 3 });
  const out = new Uint8Array(MAGIC.length + 4 + head.length + data.length);
  out.set(new TextEncoder().encode(MAGIC), 0);
  new DataView(out.buffer).setUint32(MAGIC.length, head.length, true);
  out.set(head, MAGIC.length + 4);
  out.set(data, MAGIC.length + 4 + head.length);
  return { bytes: out, index };
}

/** Reads a pack's index and where its compressed data starts; throws on anything that is not a pack. */
export function readPackIndex(pack: Uint8Array): PackIndex & { dataOffset: number } {
  const bad = (why: string) => new Error(`not a valid inferd pack: ${why}`);
  if (pack.length < MAGIC.length + 4 || new TextDecoder().decode(pack.subarray(0, MAGIC.length)) !== MAGIC)
    throw bad("wrong magic");
  const headLength = new DataView(pack.buffer, pack.byteOffset, pack.byteLength).getUint32(MAGIC.length, true);
  const dataOffset = MAGIC.length + 4 + headLength;
  if (dataOffset > pack.length) throw bad("truncated index");
  const index = JSON.parse(new TextDecoder().decode(pack.subarray(MAGIC.length + 4, dataOffset))) as PackIndex;
  if (index.format !== FORMAT) throw bad(`format ${index.format}, expected ${FORMAT}`);
  if (!/^[\w.+-]+$/.test(index.id)) throw bad(`bad id "${index.id}"`);
  for (const f of index.files) if (!isSafePath(f.path)) throw bad(`unsafe path "${f.path}"`);
  return { ...index, dataOffset };
}

/** Whether `dir` holds a finished unpack of pack `id`. */
export function isUnpacked(dir: string, id: string): boolean {
  try {
    return readFileSync(join(dir, COMPLETE_MARKER), "utf8") === id;
  } catch {
    return false;
  }
}

/** Whether process `pid` still runs (EPERM: it runs as another user). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** Removes `.unpack-<pid>-*` and `.stale-<pid>-*` dirs left by processes that no longer run. */
function removeLeftovers(base: string): void {
  for (const name of readdirSync(base)) {
    const pid = Number(/^\.(?:unpack|stale)-(\d+)-/.exec(name)?.[1]);
    if (pid && pid !== process.pid && !alive(pid)) rmSync(join(base, name), { recursive: true, force: true });
  }
}

/** Writes every file of the pack into `dir` (which exists and is empty), then the completion marker. */
function writeFiles(pack: Uint8Array, index: PackIndex & { dataOffset: number }, dir: string): void {
  const data = zstdDecompressSync(pack.subarray(index.dataOffset));
  const total = index.files.reduce((n, f) => n + f.size, 0);
  if (data.length !== total)
    throw new Error(`not a valid inferd pack: ${data.length} bytes of file data, index says ${total}`);
  const made = new Set<string>();
  let at = 0;
  for (const f of index.files) {
    const path = join(dir, f.path);
    const parent = dirname(path);
    if (!made.has(parent)) mkdirSync(parent, { recursive: true });
    made.add(parent);
    writeFileSync(path, data.subarray(at, at + f.size));
    chmodSync(path, f.mode); // explicit: the umask must not strip the native libraries' modes
    at += f.size;
  }
  writeFileSync(join(dir, COMPLETE_MARKER), index.id);
}

/**
 * Unpacks the pack at `packPath` (a real or an embedded `/$bunfs/` path) into `<base>/<id>` unless
 * a complete copy is there, and returns that dir. Safe against concurrent unpacks by other
 * processes and against an earlier unpack that was interrupted; after a fresh unpack, dirs of
 * other pack ids under `base` (older inferd versions) are removed.
 */
export function unpackOnce(packPath: string, base: string): { dir: string; id: string; unpacked: boolean } {
  const pack = readFileSync(packPath);
  const index = readPackIndex(pack);
  const dir = join(base, index.id);
  if (isUnpacked(dir, index.id)) return { dir, id: index.id, unpacked: false };
  mkdirSync(base, { recursive: true });
  removeLeftovers(base);
  const tmp = mkdtempSync(join(base, `.unpack-${process.pid}-`));
  try {
    writeFiles(pack, index, tmp);
    if (existsSync(dir) && !isUnpacked(dir, index.id)) {
      // A damaged copy (no marker): move it aside atomically, then delete it.
      const stale = mkdtempSync(join(base, `.stale-${process.pid}-`));
      try {
        renameSync(dir, join(stale, "old"));
      } catch {
        // another process moved or replaced it first
      }
      rmSync(stale, { recursive: true, force: true });
    }
    try {
      renameSync(tmp, dir);
    } catch (e) {
      if (!isUnpacked(dir, index.id)) throw e;
      return { dir, id: index.id, unpacked: false }; // another process finished first
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
  for (const name of readdirSync(base)) {
    if (name.startsWith(".") || name === index.id) continue;
    try {
      rmSync(join(base, name), { recursive: true, force: true });
    } catch {
      // in use (Windows locks loaded libraries): left for a later unpack
    }
  }
  return { dir, id: index.id, unpacked: true };
}
