/**
 * Pulling a planned model into the store: each file downloaded (resumed, verified) into place,
 * files already complete skipped, hub snapshots laid out as Hugging Face's cache, progress over the
 * whole model. Pulls of the same model in one process share one run (a second caller joins the
 * first and sees the same progress); downloads of the same blob by different pulls share one too.
 */
import { readFileSync, statSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { DownloadError, downloadFile, type DownloadResult } from "./download";
import { hubError, type HubClient } from "./hub";
import type { PlannedFile, PullPlan } from "./source";
import { DownloadLimiter, Progress } from "./progress";
import { sourceKey, type ModelSource } from "./source";
import { blobPath, isComplete, linkSnapshotFile, snapshotDir, snapshotFile, urlDir, writeRef } from "./store";

/** Progress of a whole pull (all files), as reported to the host and the dashboard. */
export interface PullProgress {
  bytes_done: number;
  bytes_total: number;
  percent: number;
  rate_bps: number;
  eta_s: number | null;
  /** The file that last made progress. */
  file: string;
  files_done: number;
  files_total: number;
}

/** A model in the store: where it is and what a runtime is given. */
export interface PulledModel {
  source: ModelSource;
  repo?: string;
  revision: string;
  /** The snapshot dir, the URL download's dir, or the local path's dir (the path itself for a folder). */
  dir: string;
  /** The absolute path to give the runtime: the GGUF (first part), the downloaded file, or the snapshot dir. */
  entry: string;
  /** The vision projector beside the entry (absolute), when the pull took one. */
  projector?: string;
  files: { path: string; size: number; sha256: string | null }[];
  bytes: number;
}

/** Options of `pullModel`; `clock` and the retry delay are injectable for tests. */
export interface PullOptions {
  modelsDir: string;
  hub: HubClient;
  /** Bounds files downloading at once across pulls; default: 4 for this pull alone. */
  limiter?: DownloadLimiter;
  signal?: AbortSignal;
  onProgress?(p: PullProgress): void;
  /** Milliseconds; default `performance.now`. */
  clock?: () => number;
  /** Least time between two progress reports (ms of `clock`); default 250. File ends always report. */
  progressIntervalMs?: number;
  retries?: number;
  retryDelayMs?: (n: number) => number;
  /** Files of at least this many bytes are hashed in a worker thread (see `downloadFile`). */
  hashWorkerMinBytes?: number;
}

/** One file to fetch: where its bytes go, and (hub files) its blob name. */
interface Target {
  file: PlannedFile;
  dest: string;
  blob?: string;
}

/** A pull under way, shared by every caller that asked for the same model. */
interface SharedPull {
  promise: Promise<PulledModel>;
  listeners: Set<(p: PullProgress) => void>;
  last?: PullProgress;
  controller: AbortController;
  callers: number;
}

const pulls = new Map<string, SharedPull>();
const blobs = new Map<string, { promise: Promise<DownloadResult>; signal: AbortSignal }>();

/** Where a plan's files live in the store: its folder and each file's destination. */
function layout(plan: PullPlan, modelsDir: string): { dir: string; targets: Target[] } {
  const source = plan.source;
  if (source.kind === "local") {
    const isFile = statSync(source.path, { throwIfNoEntry: false })?.isFile();
    return { dir: isFile ? dirname(source.path) : source.path, targets: [] };
  }
  if (source.kind === "url") {
    const dir = urlDir(modelsDir, source.url);
    return { dir, targets: plan.files.map((file) => ({ file, dest: join(dir, file.path) })) };
  }
  const repo = plan.repo!;
  const targets = plan.files.map((file) => {
    const blob = file.sha256 ?? file.oid;
    if (!blob) throw new Error(`${repo}: no hash is known for ${file.path}`);
    snapshotFile(modelsDir, repo, plan.revision, file.path); // checks the path stays inside the snapshot
    return { file, dest: blobPath(modelsDir, repo, blob), blob };
  });
  return { dir: snapshotDir(modelsDir, repo, plan.revision), targets };
}

/** The sha256 recorded beside a URL download, or null. */
function readSidecar(path: string): string | null {
  try {
    const sha = readFileSync(path, "utf8").trim();
    return /^[0-9a-f]{64}$/.test(sha) ? sha : null;
  } catch {
    return null;
  }
}

/** The model as it stands in the store (sizes and hashes from the plan, or from `results`). */
function pulled(plan: PullPlan, dir: string, results: (DownloadResult | null)[] = []): PulledModel {
  // Small hub files are checked by their git blob id and keep sha256 null; URL files get the sha256
  // measured when they were downloaded (kept beside them as `<file>.sha256`).
  const urlSha = (f: PlannedFile, i: number) =>
    plan.source.kind === "url" ? (results[i]?.sha256 ?? readSidecar(join(dir, `${f.path}.sha256`))) : null;
  const files = plan.files.map((f, i) => ({
    path: f.path,
    size: f.size >= 0 ? f.size : (results[i]?.bytes ?? f.size),
    sha256: f.sha256 ?? urlSha(f, i),
  }));
  const entry = plan.entry ? join(dir, plan.entry) : plan.source.kind === "local" ? plan.source.path : dir;
  return {
    source: plan.source,
    ...(plan.repo ? { repo: plan.repo } : {}),
    revision: plan.revision,
    dir,
    entry,
    ...(plan.projector ? { projector: join(dir, plan.projector) } : {}),
    files,
    bytes: files.reduce((a, f) => a + Math.max(0, f.size), 0),
  };
}

/**
 * The model if every file of `plan` is complete in the store (no network; stats only), else null.
 * @example isPulled(plan, modelsDir)?.entry // → "/data/models/hf/hub/models--o--n/snapshots/<sha>/M-Q4_K_M.gguf"
 */
export function isPulled(plan: PullPlan, modelsDir: string): PulledModel | null {
  const source = plan.source;
  if (source.kind === "local")
    return statSync(source.path, { throwIfNoEntry: false }) ? pulled(plan, layout(plan, modelsDir).dir) : null;
  const { dir } = layout(plan, modelsDir);
  const path = (f: PlannedFile) =>
    source.kind === "url" ? join(dir, f.path) : snapshotFile(modelsDir, plan.repo!, plan.revision, f.path);
  return plan.files.every((f) => isComplete(path(f), f.size)) ? pulled(plan, dir) : null;
}

/**
 * Pulls `plan` into `opts.modelsDir` and resolves with the model in the store. A second call for
 * the same model while one runs joins it (its own `onProgress` sees the same reports; its own
 * `signal` only stops its wait, the download stops when every caller has left).
 */
export async function pullModel(plan: PullPlan, opts: PullOptions): Promise<PulledModel> {
  const key = `${opts.modelsDir}\0${sourceKey(plan.source)}\0${plan.revision}`;
  let shared = pulls.get(key);
  // A pull every caller left is winding down: let it settle, then start afresh (resuming its parts).
  while (shared?.controller.signal.aborted) {
    await shared.promise.catch(() => {});
    shared = pulls.get(key);
  }
  if (!shared) {
    const controller = new AbortController();
    const s: SharedPull = { listeners: new Set(), controller, callers: 0, promise: Promise.resolve(null as never) };
    const report = (p: PullProgress) => {
      s.last = p;
      for (const l of s.listeners) l(p);
    };
    s.promise = runPull(plan, opts, report, controller.signal).finally(() => pulls.get(key) === s && pulls.delete(key));
    pulls.set(key, s);
    shared = s;
  }
  return attach(shared, opts);
}

/** One caller's view of a shared pull: its listener, and its signal leaving the pull. */
function attach(shared: SharedPull, opts: PullOptions): Promise<PulledModel> {
  shared.callers++;
  const listener = opts.onProgress?.bind(opts);
  if (listener) {
    shared.listeners.add(listener);
    if (shared.last) listener(shared.last);
  }
  return new Promise<PulledModel>((resolve, reject) => {
    const leave = () => {
      if (listener) shared.listeners.delete(listener);
      opts.signal?.removeEventListener("abort", onAbort);
    };
    const onAbort = () => {
      leave();
      if (--shared.callers === 0) shared.controller.abort(opts.signal!.reason);
      reject(opts.signal!.reason);
    };
    // Handled first: a caller already aborted still leaves a pull that then rejects (nobody else may wait for it).
    shared.promise.then(
      (m) => (leave(), resolve(m)),
      (e) => (leave(), reject(e)),
    );
    if (opts.signal?.aborted) return onAbort();
    opts.signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** Does the pull: every file through the limiter, siblings cancelled when one fails. */
async function runPull(
  plan: PullPlan,
  opts: PullOptions,
  report: (p: PullProgress) => void,
  signal: AbortSignal,
): Promise<PulledModel> {
  const { dir, targets } = layout(plan, opts.modelsDir);
  if (plan.source.kind === "local") {
    if (!statSync(plan.source.path, { throwIfNoEntry: false }))
      throw new Error(`${plan.source.path} does not exist on this machine`);
    return pulled(plan, dir);
  }
  const clock = opts.clock ?? (() => performance.now());
  const progress = new Progress(plan.files.some((f) => f.size < 0) ? -1 : plan.files.reduce((a, f) => a + f.size, 0), {
    clock,
  });
  const done = targets.map(() => 0);
  const state = { file: "", filesDone: 0, lastEmit: -Infinity };
  const emit = (force: boolean) => {
    progress.set(done.reduce((a, b) => a + b, 0));
    const now = clock();
    if (!force && now - state.lastEmit < (opts.progressIntervalMs ?? 250)) return;
    state.lastEmit = now;
    report({ ...progress.snapshot(), file: state.file, files_done: state.filesDone, files_total: targets.length });
  };
  emit(true);
  const inner = new AbortController();
  const stop = () => inner.abort(signal.reason);
  signal.addEventListener("abort", stop, { once: true });
  const limiter = opts.limiter ?? new DownloadLimiter(4);
  const settled = await Promise.allSettled(
    targets.map((t, i) =>
      limiter
        .run(
          () =>
            fetchTarget(plan, t, opts, inner.signal, (n) => ((done[i] = n), (state.file = t.file.path), emit(false))),
          inner.signal,
        )
        .then(
          (r) => ((done[i] = r?.bytes ?? t.file.size), state.filesDone++, (state.file = t.file.path), emit(true), r),
        )
        .catch((e) => (inner.abort(e), Promise.reject(e))),
    ),
  );
  signal.removeEventListener("abort", stop);
  const failed = settled.find((s) => s.status === "rejected") as PromiseRejectedResult | undefined;
  if (failed) throw signal.aborted ? signal.reason : (inner.signal.reason ?? failed.reason);
  if (plan.repo && "revision" in plan.source && plan.source.revision !== plan.revision) {
    writeRef(opts.modelsDir, plan.repo, plan.source.revision, plan.revision);
  }
  return pulled(
    plan,
    dir,
    settled.map((s) => (s as PromiseFulfilledResult<DownloadResult | null>).value),
  );
}

/** Gets one file into place (skipped when its bytes are already complete), then links hub files into the snapshot. */
async function fetchTarget(
  plan: PullPlan,
  t: Target,
  opts: PullOptions,
  signal: AbortSignal,
  onBytes: (n: number) => void,
): Promise<DownloadResult | null> {
  let result: DownloadResult | null = null;
  while (!isComplete(t.dest, t.file.size)) {
    let shared = blobs.get(t.dest);
    if (!shared) {
      const promise = download(plan, t, opts, signal, onBytes).finally(() => blobs.delete(t.dest));
      shared = { promise, signal };
      blobs.set(t.dest, shared);
    }
    try {
      result = await shared.promise;
      break;
    } catch (e) {
      // Another pull's download of this blob was cancelled: fetch it ourselves (resuming its part).
      if (shared.signal === signal || !shared.signal.aborted || signal.aborted) throw e;
    }
  }
  if (t.blob) linkSnapshotFile(opts.modelsDir, plan.repo!, plan.revision, t.file.path, t.blob);
  else if (result) writeFileSync(`${t.dest}.sha256`, result.sha256);
  return result;
}

/** `downloadFile` for one target; hub refusals become a `HubError` naming the repo. */
async function download(
  plan: PullPlan,
  t: Target,
  opts: PullOptions,
  signal: AbortSignal,
  onBytes: (n: number) => void,
): Promise<DownloadResult> {
  const hubFile = !!t.blob;
  try {
    return await downloadFile({
      url: t.file.url,
      dest: t.dest,
      size: t.file.size,
      sha256: t.file.sha256,
      gitOid: hubFile && !t.file.sha256 ? t.file.oid : null,
      headers: opts.hub.authHeaders(t.file.url),
      fetch: opts.hub.fetch,
      signal,
      onProgress: onBytes,
      retries: opts.retries,
      retryDelayMs: opts.retryDelayMs,
      hashWorkerMinBytes: opts.hashWorkerMinBytes,
    });
  } catch (e) {
    if (hubFile && e instanceof DownloadError && e.status && [401, 403, 404].includes(e.status)) {
      // The plan listed this file, so the repo exists: a refused download is its gate.
      throw hubError(e.status, plan.repo!, {
        code: e.status === 404 ? "EntryNotFound" : "GatedRepo",
        what: t.file.path,
      });
    }
    throw e;
  }
}
