/**
 * What a user can name as a model: a Hugging Face repo (a whole snapshot, one file, or a GGUF
 * quantisation picked by its tag as llama.cpp's `-hf` does), a plain URL, or a path on this machine.
 * Pure parsing, no I/O.
 *
 *   hf:owner/name[@rev]                    a snapshot (safetensors for vLLM / SGLang)
 *   hf:owner/name[@rev]/path/in/repo       one file (a split GGUF part means all its parts)
 *   hf:owner/name[@rev]:Q4_K_M             the GGUF carrying that quantisation tag
 *   owner/name[@rev][:Q4_K_M]              the same without `hf:` (a file needs `hf:`: `a/b.gguf` reads as a path)
 *   https://huggingface.co/owner/name[/resolve|blob/rev/path]   the same, pasted from the hub
 *   https://host/x.gguf                    a URL (http:// only for loopback hosts)
 *   /abs/path                              a file or folder here (also file:///abs/path)
 */
import { isAbsolute, normalize } from "node:path";

/** A model to get, parsed from what a user wrote. `revision` is a branch, tag or commit (default `main`). */
export type ModelSource =
  | { kind: "hf-repo"; repo: string; revision: string }
  | { kind: "hf-file"; repo: string; revision: string; file: string }
  /** `defaulted`: no tag was written, so the tag is llama.cpp's default chain (Q4_K_M, then Q8_0, then the first model GGUF). */
  | { kind: "hf-quant"; repo: string; revision: string; quant: string; defaulted?: boolean }
  | { kind: "url"; url: string }
  | { kind: "local"; path: string };

/** A model name that cannot be parsed; the message says what is wrong and what would be right. */
export class SourceError extends Error {
  override name = "SourceError";
}

/** The tag llama.cpp picks when `-hf owner/name` names none, then the next one it tries. */
export const DEFAULT_QUANTS = ["Q4_K_M", "Q8_0"] as const;

const HF_HOSTS = new Set(["huggingface.co", "www.huggingface.co", "hf.co"]);
/** One side of `owner/name` as the hub allows it: word characters, `-` and `.`, starting and ending with a word character. */
const REPO_PART = /^[A-Za-z0-9_](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?$/;
const REVISION = /^(?:refs\/pr\/\d+|refs\/convert\/[A-Za-z0-9_.-]+|[A-Za-z0-9_][A-Za-z0-9_.-]*)$/;
const QUANT = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
/** `owner/name[@rev][:QUANT]` written without `hf:` (one slash, no file path). */
const BARE_REPO = /^[A-Za-z0-9_][\w.-]*\/[A-Za-z0-9_][\w.-]*(?:@[\w.-]+)?(?::[A-Za-z0-9][\w.-]*)?$/;

/**
 * Checks a repo id as the hub does (`owner/name`, word characters, `-` and `.`, no `--` or `..`,
 * name up to 96 characters) and returns it; throws `SourceError` otherwise.
 * @example validateRepo("Qwen/Qwen3-0.6B") // → "Qwen/Qwen3-0.6B"
 */
export function validateRepo(repo: string): string {
  const parts = repo.split("/");
  const bad = (why: string) => new SourceError(`"${repo}" is not a Hugging Face repo id (owner/name): ${why}`);
  if (parts.length !== 2 || !parts[0] || !parts[1]) throw bad("it needs exactly one '/' between owner and name");
  for (const p of parts) {
    if (p.length > 96) throw bad("a part is longer than 96 characters");
    if (!REPO_PART.test(p))
      throw bad("use letters, digits, '_', '-' and '.', starting and ending with a letter or digit");
    if (p.includes("--") || p.includes("..")) throw bad("'--' and '..' are not allowed");
  }
  if (parts[1].endsWith(".git")) throw bad("the name may not end in .git");
  return repo;
}

/** Checks a branch, tag or commit name (and `refs/pr/N`); throws `SourceError` otherwise. */
export function validateRevision(rev: string, spec: string): string {
  if (!REVISION.test(rev) || rev.includes(".."))
    throw new SourceError(`"${rev}" in "${spec}" is not a revision (a branch, tag or commit)`);
  return rev;
}

/** Checks a path inside a repo: relative, no `..`, `.` or empty segments. */
function validateRepoPath(path: string, spec: string): string {
  const segs = path.split("/");
  if (!path || segs.some((s) => s === "" || s === "." || s === "..") || /[\0-\x1f\\]/.test(path)) {
    throw new SourceError(`"${path}" in "${spec}" is not a file path inside the repo`);
  }
  return path;
}

function validateQuant(quant: string, spec: string): string {
  if (!QUANT.test(quant))
    throw new SourceError(`"${quant}" in "${spec}" is not a quantisation tag (e.g. Q4_K_M, Q8_0, IQ4_XS, F16)`);
  return quant;
}

/**
 * Parses a model name a user wrote (see the module comment for the forms; `hf:` may be left out of
 * `owner/name[:QUANT]`).
 * @example parseSource("hf:unsloth/Qwen3-0.6B-GGUF:q8_0") // → { kind: "hf-quant", repo: "unsloth/Qwen3-0.6B-GGUF", revision: "main", quant: "q8_0" }
 */
export function parseSource(spec: string): ModelSource {
  const s = spec.trim();
  if (!s) throw new SourceError("a model source is empty: write hf:owner/name, a URL or an absolute path");
  if (s.startsWith("hf:")) return parseHf(s.slice(3), spec);
  if (s.startsWith("file://")) return parseLocal(decodeURIComponent(s.slice("file://".length)), spec);
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(s)) return parseUrl(s, spec);
  if (BARE_REPO.test(s) && !/\.gguf$/i.test(s)) return parseHf(s, spec);
  return parseLocal(s, spec);
}

/** `owner/name[@rev][/path | :QUANT]` after `hf:`. */
function parseHf(rest: string, spec: string): ModelSource {
  const m = /^([^/@:]+\/[^/@:]+)(.*)$/.exec(rest);
  if (!m) throw new SourceError(`"${spec}" does not name a repo: write hf:owner/name`);
  const repo = validateRepo(m[1]);
  let tail = m[2];
  let revision = "main";
  if (tail.startsWith("@")) {
    const r = /^@(refs\/(?:pr|convert)\/[^/:]+|[^/:]+)/.exec(tail);
    if (!r) throw new SourceError(`"${spec}" has an empty revision after '@'`);
    revision = validateRevision(r[1], spec);
    tail = tail.slice(r[0].length);
  }
  if (tail === "") return { kind: "hf-repo", repo, revision };
  if (tail.startsWith(":")) return { kind: "hf-quant", repo, revision, quant: validateQuant(tail.slice(1), spec) };
  if (tail.startsWith("/")) return { kind: "hf-file", repo, revision, file: validateRepoPath(tail.slice(1), spec) };
  throw new SourceError(`"${spec}" is not hf:owner/name[@rev][/file | :QUANT]`);
}

function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, "").toLowerCase();
  return h === "localhost" || h === "::1" || /^127\.\d+\.\d+\.\d+$/.test(h);
}

/** An http(s) URL: a hub page or file URL becomes an hf source (so it is checked); anything else a URL download. */
function parseUrl(s: string, spec: string): ModelSource {
  let u: URL;
  try {
    u = new URL(s);
  } catch {
    throw new SourceError(`"${spec}" is not a valid URL`);
  }
  if (u.protocol !== "https:" && u.protocol !== "http:")
    throw new SourceError(`"${spec}": only https:// URLs (and http:// to loopback) can be downloaded`);
  if (u.protocol === "http:" && !isLoopback(u.hostname))
    throw new SourceError(`"${spec}": plain http:// is allowed only for loopback hosts; use https://`);
  if (u.username || u.password) throw new SourceError(`"${spec}": credentials in a URL are not allowed`);
  if (HF_HOSTS.has(u.hostname.toLowerCase())) return parseHubUrl(u, spec);
  const name = decodeURIComponent(u.pathname.split("/").pop() ?? "");
  if (!name || name === "." || name === ".." || name.includes("\\"))
    throw new SourceError(`"${spec}" does not end in a file name`);
  return { kind: "url", url: u.toString() };
}

/** `https://huggingface.co/owner/name[/resolve|blob/rev/path]` as the hf source it stands for. */
function parseHubUrl(u: URL, spec: string): ModelSource {
  const segs = u.pathname.split("/").filter(Boolean).map(decodeURIComponent);
  if (segs.length < 2) throw new SourceError(`"${spec}" does not name a repo on the hub`);
  const repo = validateRepo(`${segs[0]}/${segs[1]}`);
  if (segs.length === 2) return { kind: "hf-repo", repo, revision: "main" };
  if ((segs[2] === "resolve" || segs[2] === "blob") && segs.length >= 5) {
    return {
      kind: "hf-file",
      repo,
      revision: validateRevision(segs[3], spec),
      file: validateRepoPath(segs.slice(4).join("/"), spec),
    };
  }
  if (segs[2] === "tree" && segs.length === 4)
    return { kind: "hf-repo", repo, revision: validateRevision(segs[3], spec) };
  throw new SourceError(`"${spec}" is a hub page, not a repo or file URL (…/resolve/<rev>/<file>)`);
}

function parseLocal(p: string, spec: string): ModelSource {
  if (!isAbsolute(p))
    throw new SourceError(
      `"${spec}" is not a source: write owner/name (or hf:owner/name), an https:// URL or an absolute path`,
    );
  if (p.includes("\0")) throw new SourceError(`"${spec}" is not a valid path`);
  const path = normalize(p);
  return { kind: "local", path: path.length > 1 ? path.replace(/\/+$/, "") : path };
}

/**
 * The source of llama-server's `-hf owner/name[:quant]` (no tag: llama.cpp's default chain,
 * Q4_K_M, then Q8_0, then the first model GGUF in the repo).
 * @example llamaHfArg("ggml-org/gemma-3-1b-it-GGUF") // → { kind: "hf-quant", …, quant: "Q4_K_M", defaulted: true }
 */
export function llamaHfArg(value: string): ModelSource {
  const spec = `-hf ${value}`;
  const colon = value.indexOf(":");
  const repo = validateRepo(colon < 0 ? value : value.slice(0, colon));
  if (colon < 0) return { kind: "hf-quant", repo, revision: "main", quant: DEFAULT_QUANTS[0], defaulted: true };
  return { kind: "hf-quant", repo, revision: "main", quant: validateQuant(value.slice(colon + 1), spec) };
}

/**
 * The source of llama-server's `-hfr owner/name -hff path/file.gguf` pair (`-hff` without `-hfr`
 * is an error in llama.cpp too); without a file it is `-hf owner/name`.
 * @example llamaHfFileArgs("TheBloke/X-GGUF", "x.Q4_K_M.gguf") // → { kind: "hf-file", … }
 */
export function llamaHfFileArgs(hfr: string, hff?: string): ModelSource {
  if (hff === undefined || hff === "") return llamaHfArg(hfr);
  const spec = `-hfr ${hfr} -hff ${hff}`;
  return { kind: "hf-file", repo: validateRepo(hfr), revision: "main", file: validateRepoPath(hff, spec) };
}

/**
 * A stable id string of a source, equal for sources that name the same thing (quant tags are
 * case-insensitive; URLs and paths normalised), for deduplicating pulls and keying the store.
 * @example sourceKey(parseSource("hf:a/b:q4_k_m")) // → "hf:a/b@main:Q4_K_M"
 */
export function sourceKey(source: ModelSource): string {
  switch (source.kind) {
    case "hf-repo":
      return `hf:${source.repo}@${source.revision}`;
    case "hf-file":
      return `hf:${source.repo}@${source.revision}/${source.file}`;
    case "hf-quant":
      return `hf:${source.repo}@${source.revision}:${source.defaulted ? "(default)" : source.quant.toUpperCase()}`;
    case "url":
      return `url:${new URL(source.url).toString()}`;
    case "local":
      return `local:${normalize(source.path)}`;
  }
}

/** One file a pull fetches. `size` is -1 when the server did not say; `oid` is the hub's git blob id. */
export interface PlannedFile {
  path: string;
  size: number;
  sha256: string | null;
  url: string;
  oid?: string;
}

/** What a pull fetches and where the runtime starts (`entry`, relative to the snapshot). */
export interface PullPlan {
  source: ModelSource;
  repo?: string;
  /** The commit sha for hf sources (what `main` resolved to), "" otherwise. */
  revision: string;
  files: PlannedFile[];
  /** The path a runtime is given: the GGUF (first part when split), a URL's file, or "" for a whole snapshot or folder. */
  entry: string;
  /** The quantisation tag of the picked GGUF. */
  quant?: string;
  /** The vision projector pulled with a quant (`mmproj-….gguf`, relative to the snapshot), as llama.cpp's `-hf` does. */
  projector?: string;
}
