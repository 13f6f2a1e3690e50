import { existsSync, realpathSync, rmSync } from "node:fs";
import { join, relative, sep } from "node:path";
import type { Db } from "../db";
import { rows } from "../db/raw";
import { sql } from "drizzle-orm";
import { AppError, conflict } from "../errors";
import { log } from "../log";
import { nowIso } from "../ids";
import { DownloadLimiter } from "../../agent/models/download";
import { HubClient, HubError } from "../../agent/models/hub";
import { pullModel } from "../../agent/models/pull";
import { bestProjector } from "../../agent/models/select";
import { blobPath, hfHome, urlDir } from "../../agent/models/store";
import { parseSource, SourceError, type ModelSource } from "../../agent/models/source";
import { describeSource, directPuller, hubFor, toTransfer, type ModelPuller } from "../../agent/replica-models";
import type { AddressPolicy } from "../../agent/net/address";
import type { TransferProgress } from "../../agent/protocol";
import { validation } from "../errors";
import { inspectModel } from "./inspect";
import { searchModels, type SearchAnswer, type SearchBackend } from "./search";
import {
  deleteModelRow,
  findBySource,
  getModelRow,
  listModelRows,
  modelView,
  sourceOfRow,
  updateModel,
  upsertModel,
  usersOfModels,
  type ModelView,
} from "./service";
import { audit } from "../audit/service";
import { adoptModel, markPulledFor, overModelBytes, tenancy, withTenancy, type StoreModel } from "./tenants";

/** A file's real path (a snapshot entry links to a blob), or null when it is gone. */
function realOrNull(path: string): string | null {
  try {
    return realpathSync(path);
  } catch {
    return null;
  }
}

/**
 * Deletes a pulled model's files from the store: each snapshot link or downloaded file, and the
 * blob behind a link, unless another model still lists that file or blob (`-hf owner/repo` and an
 * explicit pull of its tag share one snapshot file; two quant pulls may share a blob).
 */
function removeFiles(dir: string, files: { path: string }[], stillUsed: Set<string | null>): void {
  for (const f of files) {
    const p = join(dir, f.path);
    if (stillUsed.has(p)) continue;
    const blob = realOrNull(p);
    rmSync(p, { force: true });
    rmSync(`${p}.sha256`, { force: true });
    if (blob && blob !== p && !stillUsed.has(blob)) rmSync(blob, { force: true });
  }
}

/** Every file (link and blob behind it) the model rows list. */
function filesOfRows(rows: { dir: string | null; files: string }[]): Set<string | null> {
  return new Set(
    rows.flatMap((r) =>
      r.dir
        ? (JSON.parse(r.files) as { path: string }[]).flatMap((f) => [
            join(r.dir!, f.path),
            realOrNull(join(r.dir!, f.path)),
          ])
        : [],
    ),
  );
}

/** The `.part` files a pull of `row` may have left: its planned hub weights (by sha256), or its URL file. */
function partialFiles(modelsDir: string, row: Parameters<typeof sourceOfRow>[0]): string[] {
  const files = JSON.parse(row.files) as { path: string; sha256: string | null }[];
  if (row.kind === "url") {
    const source = sourceOfRow(row);
    return source.kind === "url" ? files.map((f) => `${join(urlDir(modelsDir, source.url), f.path)}.part`) : [];
  }
  return row.repo ? files.filter((f) => f.sha256).map((f) => `${blobPath(modelsDir, row.repo!, f.sha256!)}.part`) : [];
}

/** How often a download's progress is written to the store (the API reads live progress from memory). */
const PERSIST_EVERY_MS = 1000;

/** A pull under way in this process. */
interface Running {
  done: Promise<void>;
  abort: AbortController;
  progress: TransferProgress | null;
  listeners: Set<(v: ModelView) => void>;
  persistedAt: number;
  /** The model's view when its pull started: progress steps are sent as this with the live progress. */
  view?: ModelView;
}

/** Settings of the model manager; side effects injectable for tests. */
export interface ModelManagerOptions {
  dataDir: string;
  env: Record<string, string | undefined>;
  /** Files downloaded at once across all pulls. */
  concurrency?: number;
  /** Called when a model becomes ready (placement may now know its size). */
  onReady?: () => void;
  /** Hours an unused model pulled for a project's workload is kept (0: kept for good); the views say when it goes. */
  gcAfterHours?: number;
  /** The address rules of tenants' model URLs: a project's URL pull resumed after a restart obeys them again. */
  tenantGuard?: AddressPolicy;
}

/** Who asks for a pull: the admin by hand (the model is theirs), or a workload of a project (null: one no longer known). */
export type PullBy = "admin" | { project: string | null };

/**
 * The model store of this machine: pulls (deduplicated: a model is pulled once however many ask),
 * progress for the API and SSE, resumption after a restart, cancellation and removal.
 */
export class ModelManager {
  private running = new Map<string, Running>();
  private stopping = false;
  readonly hub: HubClient;
  private limiter: DownloadLimiter;
  readonly modelsDir: string;
  /** Pulls into this machine's store without the shared record (a model another host of the cluster pulled). */
  private direct?: ModelPuller;

  constructor(
    private db: Db,
    private opts: ModelManagerOptions,
  ) {
    this.hub = new HubClient({ endpoint: opts.env.HF_ENDPOINT || undefined, token: () => opts.env.HF_TOKEN });
    this.limiter = new DownloadLimiter(opts.concurrency ?? 4);
    this.modelsDir = join(opts.dataDir, "models");
  }

  /** Whether a pulled model's entry is in this host's own store (and there). */
  private holds(entry: string): boolean {
    const inside = (dir: string) => entry.startsWith(dir + sep);
    return (
      existsSync(entry) &&
      (inside(this.modelsDir) || (existsSync(this.modelsDir) && inside(realpathSync(this.modelsDir))))
    );
  }

  /** Parses a source as the user wrote it; a bad one is a 400 naming `source`. */
  static parse(spec: string): ModelSource {
    try {
      return parseSource(spec.trim());
    } catch (e) {
      if (e instanceof SourceError) throw validation("source", e.message);
      throw e;
    }
  }

  /**
   * Starts pulling a model (or joins the pull under way); returns its view at once. Pulled by the
   * admin, the model is theirs; a download started for a project (by its workload, or by a tenant's
   * hand: first, or again after it failed or was cancelled) counts against that project's
   * `model_bytes` and may be collected. With `guard` (a tenant's pull), a URL's every hop obeys the
   * address rules.
   */
  async pull(spec: string, by: PullBy = "admin", guard?: AddressPolicy): Promise<StoreModel> {
    const source = ModelManager.parse(spec);
    const written = spec.trim();
    // `owner/repo` written without `hf:` is stored as the hub source it is, as the Models page shows them.
    const stored = "repo" in source && !/^(hf:|https?:)/i.test(written) ? `hf:${written}` : written;
    if (!(await findBySource(this.db, source))) await this.check(source, stored);
    return this.pullSource(source, stored, by, guard);
  }

  /**
   * Refuses a new hub pull whose name is wrong before it becomes a row: no such repo, revision, file
   * or quantisation (404), or a GGUF repo of several quantisations named without one (400). A refusal
   * a token or time could lift (gated, rate limited, hub unreachable) goes ahead and fails on the row,
   * where "Try again" retries it.
   */
  private async check(source: ModelSource, spec: string): Promise<void> {
    if (source.kind === "url" || source.kind === "local") return;
    try {
      await this.hub.plan(source);
    } catch (e) {
      if (!(e instanceof HubError)) return;
      if (e.notFound) throw new AppError(404, "not_found", e.message, {}, "source");
      if (e.status === 422) throw validation("source", e.message);
      log.debug(`pull of ${spec}: the hub's check failed (${e.message}); the pull goes ahead`);
    }
  }

  /** Searches the hub (or the Ollama library) through this store's hub client; see search.ts. */
  search(query: string, backend: SearchBackend): Promise<SearchAnswer> {
    return searchModels(this.db, this.hub, this.opts.env, query, backend);
  }

  /**
   * Starts pulling a parsed source (kept whole: `-hf owner/repo` keeps its default-tag chain); with
   * `guard`, a URL source's every hop obeys the address rules.
   */
  private async pullSource(source: ModelSource, spec: string, by: PullBy, guard?: AddressPolicy): Promise<StoreModel> {
    const known = await findBySource(this.db, source);
    let row = await upsertModel(this.db, spec, source);
    const again = row.state === "failed" || row.state === "cancelled";
    if (by === "admin") await adoptModel(this.db, row.id);
    else if (by.project && (!known || again)) await markPulledFor(this.db, row.id, by.project);
    if (!known)
      await audit(
        this.db,
        "model.pull",
        { type: "model", id: row.id, label: row.source },
        { source: row.source, ...(by === "admin" ? {} : { for_workload_of: by.project }) },
      );
    if (again) {
      await updateModel(this.db, row.id, { state: "downloading", reason: null });
      row = await getModelRow(this.db, row.id);
    }
    if (row.state === "downloading") this.start(row.id, source, guard);
    return this.view(row.id);
  }

  /**
   * Restarts pulls a stopped or killed inferd left `downloading` (their `.part` files resume); one
   * pulled for a project is held to the tenants' address rules again, as when it started.
   */
  async resume(): Promise<number> {
    const left = (await listModelRows(this.db)).filter((r) => r.state === "downloading");
    const forProjects = left.length ? await tenancy(this.db) : new Map();
    for (const r of left) this.start(r.id, sourceOfRow(r), forProjects.has(r.id) ? this.opts.tenantGuard : undefined);
    return left.length;
  }

  /** The puller the local agent uses: the same store, the same pulls, rows in the same table (pulled for the workload's project). */
  puller(): ModelPuller {
    return async (source, onProgress, signal, opts = {}) => {
      const { workload, guard } = opts;
      const project = workload
        ? (
            await rows<{ id: string }>(
              this.db,
              sql`SELECT project_id AS id FROM workloads WHERE id = ${workload.id} UNION ALL SELECT id FROM projects WHERE slug = ${workload.project_slug}`,
            )
          )[0]
        : null;
      const view = await this.pullSource(source, describeSource(source), { project: project?.id ?? null }, guard);
      const unsubscribe = this.subscribe(view.id, (v) => v.progress && onProgress(v.progress));
      const onAbort = () => unsubscribe();
      signal.addEventListener("abort", onAbort, { once: true });
      try {
        await this.running.get(view.id)?.done;
      } finally {
        signal.removeEventListener("abort", onAbort);
        unsubscribe();
      }
      const row = await getModelRow(this.db, view.id);
      if (row.state !== "ready" || !row.entry) throw new Error(row.reason ?? `the model ${row.source} is ${row.state}`);
      await updateModel(this.db, row.id, { lastUsedAt: nowIso() });
      // In a cluster the record is shared but each host keeps its own files: a model another host
      // pulled (its files in that host's store) is fetched again into this machine's store.
      if (source.kind !== "local" && !this.holds(row.entry)) {
        this.direct ??= directPuller(this.opts.dataDir, this.opts.env, this.limiter);
        return this.direct(source, onProgress, signal, opts);
      }
      // A quant's vision projector was pulled with it (agent/models/hub.ts): the runtime loads it too.
      const projector =
        source.kind === "hf-quant" && row.dir
          ? bestProjector(JSON.parse(row.files) as { path: string }[], relative(row.dir, row.entry))
          : undefined;
      return {
        entry: row.entry,
        ...(projector && row.dir ? { projector: join(row.dir, projector.path) } : {}),
        ...(source.kind === "hf-repo" ? { hfHome: hfHome(this.modelsDir) } : {}),
      };
    };
  }

  private start(id: string, source: ModelSource, guard?: AddressPolicy): void {
    if (this.running.has(id)) return;
    const run: Running = {
      abort: new AbortController(),
      progress: null,
      listeners: new Set(),
      persistedAt: 0,
      done: Promise.resolve(),
    };
    this.running.set(id, run);
    void this.view(id).then(
      (v) => (run.view = v),
      () => {},
    );
    run.done = this.download(id, source, run, hubFor(this.hub, source, guard))
      .catch(async (e) => {
        if (this.stopping) return; // left `downloading`: resumed at the next start
        const cancelled = run.abort.signal.aborted;
        await updateModel(this.db, id, {
          state: cancelled ? "cancelled" : "failed",
          reason: cancelled ? "cancelled" : (e as Error).message,
        }).catch((w) => log.warn("could not record a model pull's end", w));
        if (!cancelled) log.warn(`model pull failed: ${(e as Error).message}`);
      })
      .finally(() => {
        this.running.delete(id);
        this.emit(id, run, true);
      });
  }

  private async download(id: string, source: ModelSource, run: Running, hub: HubClient): Promise<void> {
    const plan = await hub.plan(source);
    const planned = plan.files.every((f) => f.size >= 0) ? plan.files.reduce((s, f) => s + f.size, 0) : -1;
    // The planned files are kept while it downloads, so a failed pull's partial files can be found (dismiss).
    const files = plan.files.map((f) => ({ path: f.path, size: f.size, sha256: f.sha256 }));
    await updateModel(this.db, id, {
      revision: plan.revision || null,
      bytesTotal: plan.files.reduce((s, f) => s + f.size, 0),
      files: JSON.stringify(files),
    });
    const over = planned >= 0 ? await overModelBytes(this.db, id, describeSource(source), planned) : null;
    if (over) throw new Error(over);
    const pulled = await pullModel(plan, {
      modelsDir: this.modelsDir,
      hub,
      limiter: this.limiter,
      signal: run.abort.signal,
      onProgress: (p) => {
        run.progress = toTransfer(p);
        if (Date.now() - run.persistedAt >= PERSIST_EVERY_MS) {
          run.persistedAt = Date.now();
          void updateModel(this.db, id, { bytesDone: p.bytes_done, bytesTotal: p.bytes_total }).catch(() => {}); // progress only: the next write catches up
        }
        this.emit(id, run);
      },
    });
    // A size the server did not tell is checked once the files are here (and they go again when too big).
    const late = planned < 0 ? await overModelBytes(this.db, id, describeSource(source), pulled.bytes) : null;
    if (late) {
      await this.deleteFiles(pulled.dir, pulled.files);
      throw new Error(late);
    }
    const info = await inspectModel(pulled.entry).catch(() => null);
    await updateModel(this.db, id, {
      state: "ready",
      reason: null,
      entry: pulled.entry,
      dir: pulled.dir,
      revision: pulled.revision || null,
      files: JSON.stringify(pulled.files),
      bytesTotal: pulled.bytes,
      bytesDone: pulled.bytes,
      metadata: info ? JSON.stringify(info) : null,
    });
    this.opts.onReady?.();
  }

  /**
   * Tells a pull's listeners its view: while it runs, the view read when it started with the live
   * progress (no store read per step); at its end (`last`), the view read anew.
   */
  private emit(id: string, run: Running, last = false): void {
    if (run.listeners.size === 0) return;
    const listeners = [...run.listeners];
    if (!last) {
      if (run.view) for (const l of listeners) l({ ...run.view, state: "downloading", progress: run.progress });
      return;
    }
    void this.view(id).then(
      (v) => listeners.forEach((l) => l(v)),
      () => {},
    );
  }

  /** Calls `cb` with the model's view on each progress step and when its pull ends; returns an unsubscribe. */
  subscribe(id: string, cb: (v: ModelView) => void): () => void {
    const run = this.running.get(id);
    if (!run) return () => {};
    run.listeners.add(cb);
    return () => run.listeners.delete(cb);
  }

  /** Resolves when this model's pull under way (if any) has ended. */
  async wait(id: string): Promise<void> {
    await this.running.get(id)?.done;
  }

  /** Whether a pull of this model runs in this process. */
  isRunning(id: string): boolean {
    return this.running.has(id);
  }

  /** One model's view with live progress, its users and the project it was pulled for. */
  async view(id: string): Promise<StoreModel> {
    const row = await getModelRow(this.db, id);
    const users = await usersOfModels(this.db, [row]);
    return (
      await withTenancy(
        this.db,
        [modelView(row, { progress: this.running.get(id)?.progress, usedBy: users.get(id) ?? [] })],
        this.gcAfterMs,
      )
    )[0];
  }

  /** Every model's view. */
  async list(): Promise<StoreModel[]> {
    const rows = await listModelRows(this.db);
    const users = await usersOfModels(this.db, rows);
    return withTenancy(
      this.db,
      rows.map((r) => modelView(r, { progress: this.running.get(r.id)?.progress, usedBy: users.get(r.id) ?? [] })),
      this.gcAfterMs,
    );
  }

  private get gcAfterMs(): number {
    return (this.opts.gcAfterHours ?? 0) * 3_600_000;
  }

  /** Stops a pull under way (its `.part` files stay, so pulling again resumes). */
  async cancel(id: string): Promise<ModelView> {
    const run = this.running.get(id);
    if (!run) throw conflict(`model "${id}" is not downloading`, "not_downloading");
    run.abort.abort();
    await run.done;
    const v = await this.view(id);
    await audit(this.db, "model.cancel", { type: "model", id, label: v.source });
    return v;
  }

  /**
   * Removes a model: refused (409 `model_in_use`) while a workload uses it, naming them. A pull under
   * way is stopped; pulled files are deleted from the store; a registered local file is only forgotten.
   * `note` goes into the audit entry (why the collector removed it).
   */
  async remove(id: string, note: Record<string, unknown> = {}): Promise<StoreModel> {
    const v = await this.view(id);
    if (v.used_by.length)
      throw conflict(
        `model ${v.source} is used by ${v.used_by.map((w) => `${w.project_slug}/${w.slug}`).join(", ")}; change or delete those workloads first`,
        "model_in_use",
      );
    if (this.running.has(id)) await this.cancel(id);
    const row = await getModelRow(this.db, id);
    await deleteModelRow(this.db, id);
    await audit(this.db, "model.delete", { type: "model", id, label: v.source }, note);
    if (v.kind !== "local" && row.dir) await this.deleteFiles(row.dir, v.files);
    return v;
  }

  /**
   * Forgets a failed or cancelled pull (409 `not_dismissable` in any other state): its row and the
   * partial downloads it left, unless another model lists the same file.
   */
  async dismiss(id: string): Promise<StoreModel> {
    const v = await this.view(id);
    if (v.state !== "failed" && v.state !== "cancelled")
      throw conflict(
        `model ${v.source} is ${v.state}: only a failed or cancelled pull can be dismissed (Delete removes a model)`,
        "not_dismissable",
      );
    const row = await getModelRow(this.db, id);
    await deleteModelRow(this.db, id);
    await audit(this.db, "model.dismiss", { type: "model", id, label: v.source }, { state: v.state });
    const kept = new Set((await listModelRows(this.db)).flatMap((r) => partialFiles(this.modelsDir, r)));
    for (const part of partialFiles(this.modelsDir, row)) if (!kept.has(part)) rmSync(part, { force: true });
    return v;
  }

  /** Deletes files of a model from the store, keeping files and blobs another model still lists. */
  private async deleteFiles(dir: string, files: { path: string }[]): Promise<void> {
    removeFiles(dir, files, filesOfRows(await listModelRows(this.db)));
  }

  /** The model row of a source, if any (for the CLI). */
  find(spec: string) {
    return findBySource(this.db, ModelManager.parse(spec));
  }

  /** Stops every pull (they resume at the next start). */
  async stop(): Promise<void> {
    this.stopping = true;
    for (const run of this.running.values()) run.abort.abort();
    await Promise.allSettled([...this.running.values()].map((r) => r.done));
  }
}
