/**
 * The model store on disk, under `<data-dir>/models`:
 *
 *   hf/hub/models--<owner>--<name>/blobs/<sha256 or git oid>        the bytes, named by their hash
 *   hf/hub/models--<owner>--<name>/snapshots/<commit>/<path>         → symlink to ../../blobs/<hash>
 *   hf/hub/models--<owner>--<name>/refs/<revision>                   the commit it pointed at
 *   url/<sha256 of the URL, 16 hex>/<file name>                      URL downloads
 *
 * The hf part is Hugging Face's own cache layout, so vLLM, SGLang and transformers find a pulled
 * repo offline with `HF_HOME=<modelsDir>/hf` (and `HF_HUB_OFFLINE=1`). Local sources are registered
 * where they are, never copied. A blob only ever appears after its size and hash were checked (it is
 * renamed into place), so "exists with the right size" is the cheap completeness test.
 */
import { mkdirSync, readFileSync, renameSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";

/** `HF_HOME` for runtimes reading this store. */
export function hfHome(modelsDir: string): string {
  return join(modelsDir, "hf");
}

/** The hub cache (`HF_HUB_CACHE`) inside `hfHome`. */
export function hubCacheDir(modelsDir: string): string {
  return join(hfHome(modelsDir), "hub");
}

/**
 * The cache folder of a repo.
 * @example repoCacheDir("/d/models", "Qwen/Qwen3-0.6B") // → "/d/models/hf/hub/models--Qwen--Qwen3-0.6B"
 */
export function repoCacheDir(modelsDir: string, repo: string): string {
  return join(hubCacheDir(modelsDir), `models--${repo.split("/").join("--")}`);
}

/** The snapshot folder of a repo at a commit (what a runtime is given for a whole snapshot). */
export function snapshotDir(modelsDir: string, repo: string, commit: string): string {
  if (!/^[0-9a-f]{40}$/.test(commit)) throw new Error(`not a commit sha: ${commit}`);
  return join(repoCacheDir(modelsDir, repo), "snapshots", commit);
}

/** Where a blob of a repo is stored (`name` is its sha256 or git oid). */
export function blobPath(modelsDir: string, repo: string, name: string): string {
  if (!/^[0-9a-f]{40}$|^[0-9a-f]{64}$/.test(name)) throw new Error(`not a blob name: ${name}`);
  return join(repoCacheDir(modelsDir, repo), "blobs", name);
}

/**
 * The folder of a URL download.
 * @example urlDir("/d/models", "https://x.org/m.gguf") // → "/d/models/url/<16 hex>"
 */
export function urlDir(modelsDir: string, url: string): string {
  return join(modelsDir, "url", new Bun.CryptoHasher("sha256").update(url).digest("hex").slice(0, 16));
}

/** `child` resolved, checked to be inside `parent` (paths from the hub never escape the snapshot). */
function inside(parent: string, child: string): string {
  const p = resolve(parent, child);
  if (!p.startsWith(resolve(parent) + sep)) throw new Error(`${child} is outside ${parent}`);
  return p;
}

/** A snapshot file's path (checked to stay inside the snapshot). */
export function snapshotFile(modelsDir: string, repo: string, commit: string, path: string): string {
  return inside(snapshotDir(modelsDir, repo, commit), path);
}

/** Points `snapshots/<commit>/<path>` at its blob with a relative symlink, replacing any older link atomically. */
export function linkSnapshotFile(modelsDir: string, repo: string, commit: string, path: string, blob: string): string {
  const link = snapshotFile(modelsDir, repo, commit, path);
  const target = relative(dirname(link), blobPath(modelsDir, repo, blob));
  mkdirSync(dirname(link), { recursive: true });
  const tmp = `${link}.${process.pid}.${Math.random().toString(36).slice(2)}.tmp`;
  symlinkSync(target, tmp);
  renameSync(tmp, link);
  return link;
}

/** Records that `ref` (a branch or tag) pointed at `commit`, as `refs/<ref>` holding the sha. */
export function writeRef(modelsDir: string, repo: string, ref: string, commit: string): void {
  const file = inside(join(repoCacheDir(modelsDir, repo), "refs"), ref);
  mkdirSync(dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, commit);
  renameSync(tmp, file);
}

/** The commit `refs/<ref>` holds, or null. */
export function readRef(modelsDir: string, repo: string, ref: string): string | null {
  try {
    const sha = readFileSync(inside(join(repoCacheDir(modelsDir, repo), "refs"), ref), "utf8").trim();
    return /^[0-9a-f]{40}$/.test(sha) ? sha : null;
  } catch {
    return null;
  }
}

/** Whether `path` (following symlinks) is a file of `size` bytes (any size when `size` < 0). */
export function isComplete(path: string, size: number): boolean {
  const st = statSync(path, { throwIfNoEntry: false });
  return !!st && st.isFile() && (size < 0 || st.size === size);
}
