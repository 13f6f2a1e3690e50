/**
 * Plans for sources that are not on the hub: a URL (its size from a HEAD, or from a one-byte ranged
 * GET when HEAD is refused; no checksum is known) and a local file or folder (what is there; nothing
 * is downloaded).
 */
import { readdirSync, statSync } from "node:fs";
import { basename, join, relative } from "node:path";
import { pathToFileURL } from "node:url";
import { fetchFollowing, totalFromContentRange } from "./http";
import { SourceError, type ModelSource, type PlannedFile, type PullPlan } from "./source";

/** The file name a URL download is stored under: its last path segment, decoded. */
export function urlFileName(url: string): string {
  const name = decodeURIComponent(new URL(url).pathname.split("/").pop() ?? "");
  if (!name || name === "." || name === ".." || /[/\\\0]/.test(name))
    throw new SourceError(`${url} does not end in a file name`);
  return name;
}

/** A URL answered with an error while planning or downloading. */
export class UrlError extends Error {
  override name = "UrlError";
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** The size of the file at `url` (-1 when the server does not say): HEAD, else GET `Range: bytes=0-0`. */
export async function remoteSize(
  url: string,
  doFetch: typeof fetch,
  auth: Record<string, string> = {},
): Promise<number> {
  const credentials = { origin: new URL(url).origin, headers: auth };
  const head = await fetchFollowing(url, { fetch: doFetch, method: "HEAD", credentials }).catch((e: Error) => {
    throw new UrlError(0, `cannot reach ${url}: ${e.message}`);
  });
  const len = head.res.headers.get("content-length");
  if (head.res.ok && len !== null) return Number(len);
  const { res } = await fetchFollowing(url, { fetch: doFetch, headers: { range: "bytes=0-0" }, credentials });
  await res.body?.cancel().catch(() => {});
  if (res.status === 206) return totalFromContentRange(res.headers.get("content-range")) ?? -1;
  if (res.ok) return Number(res.headers.get("content-length") ?? -1);
  throw new UrlError(res.status, `${url} answered ${res.status} ${res.statusText}`.trim());
}

/** The plan of a URL source: one file, its size from the server, sha256 unknown (`auth`: only for the URL's own origin). */
export async function planUrl(
  source: Extract<ModelSource, { kind: "url" }>,
  doFetch: typeof fetch,
  auth: Record<string, string> = {},
): Promise<PullPlan> {
  const name = urlFileName(source.url);
  const size = await remoteSize(source.url, doFetch, auth);
  return { source, revision: "", files: [{ path: name, size, sha256: null, url: source.url }], entry: name };
}

/** Files listed under a local folder at most (a guard against pointing at `/`). */
const MAX_LOCAL_FILES = 100_000;

/** The plan of a local source: the file, or every file under the folder, with sizes; nothing to fetch. */
export function planLocal(source: Extract<ModelSource, { kind: "local" }>): PullPlan {
  let st;
  try {
    st = statSync(source.path);
  } catch {
    throw new SourceError(`${source.path} does not exist on this machine`);
  }
  if (st.isFile()) {
    const name = basename(source.path);
    return {
      source,
      revision: "",
      files: [{ path: name, size: st.size, sha256: null, url: pathToFileURL(source.path).href }],
      entry: name,
    };
  }
  if (!st.isDirectory()) throw new SourceError(`${source.path} is neither a file nor a folder`);
  const files: PlannedFile[] = [];
  const walk = (dir: string) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      if (files.length >= MAX_LOCAL_FILES)
        throw new SourceError(`${source.path} holds more than ${MAX_LOCAL_FILES} files: name the model's own folder`);
      const p = join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.isFile() || e.isSymbolicLink()) {
        const size = statSync(p, { throwIfNoEntry: false })?.size ?? -1;
        files.push({ path: relative(source.path, p), size, sha256: null, url: pathToFileURL(p).href });
      }
    }
  };
  walk(source.path);
  return { source, revision: "", files, entry: "" };
}
