/**
 * The Hugging Face hub client: every hub route inferd uses is in this module.
 *
 *   GET  /api/models/<owner>/<name>/revision/<rev>            repo info: the commit sha, gated, siblings
 *   GET  /api/models/<owner>/<name>/tree/<rev>?recursive=true  files with size, git oid and LFS sha256
 *                                                              (paged by a `Link: <…>; rel="next"` header)
 *   GET  /<owner>/<name>/resolve/<rev>/<path>                  the bytes (LFS files: a 302 to a CDN)
 *   GET  /api/models?search=<q>&filter=gguf&expand[]=…         repos whose id matches, most downloaded first
 *
 * A repo that does not exist is told apart from a gated one by the hub's `X-Error-Code`
 * (`RepoNotFound` / `GatedRepo`): without a token the hub answers 401 for both.
 *
 * The token goes to the hub endpoint only, never to a host a redirect leads to.
 */
import {
  availableQuants,
  bestProjector,
  ggufName,
  hasRuntimeWeights,
  isModelGguf,
  pickQuant,
  snapshotFiles,
  splitParts,
} from "./select";
import { fetchFollowing } from "./http";
import { planLocal, planUrl } from "./plan-other";
import { DEFAULT_QUANTS, type ModelSource, type PlannedFile, type PullPlan } from "./source";

/** Repo info from `/api/models/<repo>/revision/<rev>`. */
export interface RepoInfo {
  id: string;
  /** The commit the revision points at (40 hex). */
  sha: string;
  /** false, or how access is granted ("auto" / "manual"). */
  gated: false | string;
  private: boolean;
  siblings: string[];
}

/** One file of the recursive tree listing. `sha256` is the LFS object id (null for small non-LFS files). */
export interface RepoFile {
  path: string;
  size: number;
  oid: string;
  sha256: string | null;
}

/** A hub answer that is not a success, with a message that names the repo and says what to do. */
export class HubError extends Error {
  override name = "HubError";
  constructor(
    readonly status: number,
    message: string,
    readonly repo?: string,
    /** The hub's `X-Error-Code` (`RepoNotFound`, `GatedRepo`, `RevisionNotFound`, `EntryNotFound`), when it sent one. */
    readonly code?: string,
  ) {
    super(message);
  }

  /** Whether the name is wrong (no such repo, revision, file or quant), not a refusal a token or time could lift. */
  get notFound(): boolean {
    return this.status === 404 || this.code === "RepoNotFound";
  }
}

/**
 * The error for a hub status on `repo` (`code` is the hub's `X-Error-Code`, `what` the file or revision asked for).
 * @example hubError(401, "meta-llama/Llama-3.1-8B").message // → "Hugging Face repo meta-llama/Llama-3.1-8B is gated or private: set HF_TOKEN …"
 */
export function hubError(
  status: number,
  repo: string,
  opts: { code?: string | null; hasToken?: boolean; what?: string; detail?: string } = {},
): HubError {
  const where = `Hugging Face repo ${repo}`;
  const msg = (() => {
    if (status === 401 && opts.detail === "Invalid credentials in Authorization header")
      return `${where}: the hub refused HF_TOKEN as invalid (401): check the token`;
    if (opts.code === "RepoNotFound") return `${where} not found (check the name, or set HF_TOKEN if it is private)`;
    if (status === 401 && opts.code === "GatedRepo")
      return `${where} is gated or private: set HF_TOKEN to a token that can read it`;
    if (status === 401)
      return `${where} is gated or private: set HF_TOKEN to a token that can read it (the hub answers the same for a repo that does not exist: check the name)`;
    if (status === 403)
      return `${where}: your token has no access: accept the repo's terms on the hub (https://huggingface.co/${repo}) with the account of HF_TOKEN, or use a token of an account that has`;
    if (status === 404 && opts.code === "RevisionNotFound") return `${where}: revision ${opts.what ?? ""} not found`;
    if (status === 404 && opts.code === "EntryNotFound") return `${where}: file ${opts.what ?? ""} not found`;
    if (status === 404) return `${where} not found (check the name, or set HF_TOKEN if it is private)`;
    if (status === 429)
      return `${where}: the hub is rate-limiting requests (429); try again later${opts.hasToken ? "" : " or set HF_TOKEN"}`;
    return `${where}: the hub answered ${status}${opts.detail ? `: ${opts.detail}` : ""}`;
  })();
  return new HubError(status, msg, repo, opts.code ?? undefined);
}

/** One repo a hub search found, with the fields `search` asks for. */
export interface HubHit {
  id: string;
  downloads: number;
  likes: number;
  /** false, or how access is granted ("auto" / "manual"). */
  gated: false | string;
  private: boolean;
  tags: string[];
  pipeline_tag: string | null;
  last_modified: string | null;
}

/** The fields a search asks the hub for (`expand[]`), beside `id`. */
const SEARCH_FIELDS = ["downloads", "likes", "gated", "private", "tags", "pipeline_tag", "lastModified"] as const;

/** Options of `HubClient`; each has a real default. */
export interface HubClientOptions {
  /** The hub's base URL; default `HF_ENDPOINT` or https://huggingface.co. */
  endpoint?: string;
  /** Default `HF_TOKEN` (or `HUGGING_FACE_HUB_TOKEN`); a function is asked at each request (a token changed while serving). */
  token?: string | (() => string | undefined);
  fetch?: typeof fetch;
}

const HEX40 = /^[0-9a-f]{40}$/;
const HEX64 = /^[0-9a-f]{64}$/;

/** Whether a path from the hub is a safe relative path (no `..`, not absolute, no empty segments). */
export function isSafeRepoPath(path: string): boolean {
  return (
    path.length > 0 &&
    !path.startsWith("/") &&
    !/[\0\\]/.test(path) &&
    path.split("/").every((s) => s !== "" && s !== "." && s !== "..")
  );
}

/** Percent-encodes each segment of a repo path. */
const encodePath = (path: string) => path.split("/").map(encodeURIComponent).join("/");

/** Talks to the hub (or a mirror / the fake hub via `endpoint`). */
export class HubClient {
  readonly endpoint: string;
  readonly fetch: typeof fetch;
  private readonly tokenOf: () => string | undefined;

  constructor(opts: HubClientOptions = {}) {
    this.endpoint = (opts.endpoint ?? process.env.HF_ENDPOINT ?? "https://huggingface.co").replace(/\/+$/, "");
    const given = opts.token;
    this.tokenOf = () =>
      (typeof given === "function" ? given() : given) ?? process.env.HF_TOKEN ?? process.env.HUGGING_FACE_HUB_TOKEN;
    this.fetch = opts.fetch ?? fetch;
  }

  /** The same hub with another `fetch` (a tenant's URL pulls go through the address rules). */
  withFetch(fetchFn: typeof fetch): HubClient {
    return new HubClient({ endpoint: this.endpoint, token: () => this.token ?? "", fetch: fetchFn });
  }

  /** The token in force now, if any. */
  private get token(): string | undefined {
    return this.tokenOf() || undefined;
  }

  /** `{ authorization }` when `url` is on the hub endpoint and a token is set; `{}` for any other host. */
  authHeaders(url: string): Record<string, string> {
    return this.token && new URL(url).origin === new URL(this.endpoint).origin
      ? { authorization: `Bearer ${this.token}` }
      : {};
  }

  /** GETs a hub URL or path with the token (on the hub only), following redirects by hand. */
  private async get(pathOrUrl: string): Promise<Response> {
    const url = pathOrUrl.startsWith("http") ? pathOrUrl : `${this.endpoint}${pathOrUrl}`;
    const { res } = await fetchFollowing(url, {
      fetch: this.fetch,
      headers: { accept: "application/json" },
      credentials: { origin: new URL(this.endpoint).origin, headers: this.authHeaders(this.endpoint) },
    });
    return res;
  }

  /** GETs a hub API path as JSON; non-2xx answers become a `HubError` naming `repo`. */
  private async api<T>(pathOrUrl: string, repo: string, what?: string): Promise<{ body: T; res: Response }> {
    const res = await this.get(pathOrUrl);
    if (!res.ok) {
      const detail = await res.json().then(
        (b: { error?: string }) => b?.error,
        () => undefined,
      );
      throw hubError(res.status, repo, {
        code: res.headers.get("x-error-code"),
        hasToken: !!this.token,
        what,
        detail: res.headers.get("x-error-message") ?? detail,
      });
    }
    return { body: (await res.json()) as T, res };
  }

  /**
   * Repos whose id contains `query`, most downloaded first (`filter`: a tag such as `gguf` or
   * `safetensors`). Throws a `HubError` when the hub refuses or answers something else than a list.
   */
  async search(query: string, opts: { filter?: string; limit?: number } = {}): Promise<HubHit[]> {
    const params = new URLSearchParams({
      search: query,
      sort: "downloads",
      direction: "-1",
      limit: String(opts.limit ?? 10),
    });
    if (opts.filter) params.set("filter", opts.filter);
    for (const field of SEARCH_FIELDS) params.append("expand[]", field);
    const res = await this.get(`/api/models?${params}`);
    const body = res.ok ? await res.json().catch(() => null) : null;
    if (!Array.isArray(body))
      throw new HubError(
        res.ok ? 502 : res.status,
        `Hugging Face search: the hub answered ${res.status}${res.ok ? " without a list" : ""}`,
      );
    return body
      .filter((h) => typeof h?.id === "string")
      .map((h) => ({
        id: h.id,
        downloads: Number(h.downloads ?? 0),
        likes: Number(h.likes ?? 0),
        gated: h.gated ? String(h.gated) : false,
        private: !!h.private,
        tags: Array.isArray(h.tags) ? h.tags.map(String) : [],
        pipeline_tag: typeof h.pipeline_tag === "string" ? h.pipeline_tag : null,
        last_modified: typeof h.lastModified === "string" ? h.lastModified : null,
      }));
  }

  /** The repo's info at `revision` (a branch, tag or commit). */
  async repoInfo(repo: string, revision: string): Promise<RepoInfo> {
    const { body } = await this.api<Record<string, any>>(
      `/api/models/${repo}/revision/${encodeURIComponent(revision)}`,
      repo,
      revision,
    );
    const sha = String(body.sha ?? "");
    if (!HEX40.test(sha))
      throw new HubError(502, `Hugging Face repo ${repo}: the hub's answer has no commit sha for ${revision}`, repo);
    const siblings = Array.isArray(body.siblings) ? body.siblings.map((s: { rfilename: string }) => s.rfilename) : [];
    return {
      id: String(body.id ?? repo),
      sha,
      gated: body.gated ? String(body.gated) : false,
      private: !!body.private,
      siblings,
    };
  }

  /** Every file of the repo at `revision` (recursive), with size, git oid and LFS sha256; paths checked to be safe. */
  async listFiles(repo: string, revision: string): Promise<RepoFile[]> {
    const files: RepoFile[] = [];
    let next: string | null = `/api/models/${repo}/tree/${encodeURIComponent(revision)}?recursive=true&expand=false`;
    for (let page = 0; next && page < 1000; page++) {
      const { body, res }: { body: any[]; res: Response } = await this.api<any[]>(next, repo, revision);
      for (const e of Array.isArray(body) ? body : []) {
        if (e?.type !== "file") continue;
        if (!isSafeRepoPath(String(e.path)))
          throw new HubError(
            502,
            `Hugging Face repo ${repo}: the hub listed an unsafe path ${JSON.stringify(e.path)}`,
            repo,
          );
        const sha256 = typeof e.lfs?.oid === "string" && HEX64.test(e.lfs.oid) ? e.lfs.oid : null;
        files.push({ path: e.path, size: Number(e.size ?? e.lfs?.size ?? 0), oid: String(e.oid ?? ""), sha256 });
      }
      next = /<([^>]+)>;\s*rel="next"/.exec(res.headers.get("link") ?? "")?.[1] ?? null;
    }
    return files;
  }

  /** The download URL of a file (`<endpoint>/<repo>/resolve/<rev>/<path>`). */
  fileUrl(repo: string, revision: string, path: string): string {
    return `${this.endpoint}/${repo}/resolve/${encodeURIComponent(revision)}/${encodePath(path)}`;
  }

  /**
   * What pulling `source` fetches: for hf sources the files at the commit the revision points at
   * (by file, by quant tag as llama.cpp picks it, or the snapshot a runtime reads); for a URL its
   * size from a HEAD (sha256 unknown); for a local path what is there (nothing to fetch).
   */
  async plan(source: ModelSource): Promise<PullPlan> {
    if (source.kind === "url") return planUrl(source, this.fetch, this.authHeaders(source.url));
    if (source.kind === "local") return planLocal(source);
    const info = await this.repoInfo(source.repo, source.revision);
    const all = await this.listFiles(source.repo, info.sha);
    const { files, entry, quant, projector } = this.choose(source, all);
    const planned = files.map((f) => ({
      path: f.path,
      size: f.size,
      sha256: f.sha256,
      url: this.fileUrl(source.repo, info.sha, f.path),
      oid: f.oid,
    }));
    return {
      source,
      repo: source.repo,
      revision: info.sha,
      files: planned,
      entry,
      ...(quant ? { quant } : {}),
      ...(projector ? { projector } : {}),
    };
  }

  /** Picks the files of an hf source from the repo's listing. */
  private choose(
    source: Extract<ModelSource, { repo: string }>,
    all: RepoFile[],
  ): { files: RepoFile[]; entry: string; quant?: string; projector?: string } {
    const { repo } = source;
    const ggufs = () =>
      all
        .filter((f) => ggufName(f.path))
        .map((f) => f.path)
        .join(", ") || "none";
    if (source.kind === "hf-file") {
      const f =
        all.find((x) => x.path === source.file) ?? all.find((x) => x.path.toLowerCase() === source.file.toLowerCase());
      if (!f)
        throw new HubError(
          404,
          `Hugging Face repo ${repo}: file ${source.file} not found at ${source.revision} (GGUF files there: ${ggufs()})`,
          repo,
        );
      const files = ggufName(f.path) ? splitParts(all, f) : [f];
      return { files, entry: files[0].path, quant: ggufName(f.path)?.tag || undefined };
    }
    if (source.kind === "hf-quant") {
      const f = pickQuant(all, source.quant, source.defaulted);
      if (!f) {
        const quants = availableQuants(all);
        throw new HubError(
          404,
          `Hugging Face repo ${repo} has no GGUF model for quant ${source.quant} (quants there: ${quants.length ? quants.join(", ") : "none, it has no GGUF model files"})`,
          repo,
        );
      }
      const files = splitParts(all, f);
      // llama.cpp's `-hf` fetches the repo's vision projector with the quant, and loads it.
      const projector = bestProjector(all, f.path);
      return {
        files: projector ? [...files, projector] : files,
        entry: files[0].path,
        quant: ggufName(f.path)?.tag || source.quant,
        ...(projector ? { projector: projector.path } : {}),
      };
    }
    const files = snapshotFiles(all);
    const quants = availableQuants(all);
    if (!hasRuntimeWeights(files) && quants.length === 1) {
      // A GGUF repo with one quantisation: that is the model, nothing to choose.
      const parts = splitParts(all, pickQuant(all, quants[0], true)!);
      return { files: parts, entry: parts[0].path, quant: ggufName(parts[0].path)?.tag || undefined };
    }
    if (!hasRuntimeWeights(files) && all.some((f) => isModelGguf(f.path))) {
      const example = quants.includes(DEFAULT_QUANTS[0]) ? DEFAULT_QUANTS[0] : quants[0];
      throw new HubError(
        422,
        `Hugging Face repo ${repo} holds GGUF files only: name one quant, e.g. hf:${repo}:${example} (quants there: ${quants.join(", ")})`,
        repo,
      );
    }
    return { files, entry: "" };
  }
}
