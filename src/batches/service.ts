/**
 * The OpenAI Batch API on the durable job engine. Creating a batch checks every line of its input
 * file (a unique `custom_id`, `method` POST, `url` the batch's endpoint, a `body` object, a model
 * the key may call) and refuses the whole batch with a 400 naming the first bad line; then the
 * batch row and one queued job per line are committed in one transaction, so the requests run
 * through the same queue and slots as every job and survive a kill -9 as jobs do. On the project's
 * base each line goes to the workload its `body.model` names (slug, model name or alias, chosen
 * when the batch is made; an unknown model refuses the batch); on a workload's base every line goes
 * to that workload.
 */
import { and, desc, eq, inArray } from "drizzle-orm";
import { jobInserts } from "../jobs/service";
import type { Fleet } from "../workers/fleet";
import type { Db } from "../db";
import { batch, first } from "../db/raw";
import { batches, jobs } from "../db/schema";
import { AppError, conflict, fromSchemaIssue, notFound, validation } from "../errors";
import { parseJsonBytes, readBodyLimited } from "../http";
import { newId, nowIso } from "../ids";
import { routeOf, type RouteBase } from "../dataplane/target";
import { ChatBody, checkJobsOn, checkKindOn } from "../jobs/envelope";
import type { Workload } from "../workloads/service";
import { canSeeBatch, type Viewer } from "./access";
import { inputFileBytes, type FilesDeps } from "./files";
import { jsonlLines, pacer } from "./jsonl";
import type { BatchFinisher } from "./finish";
import { ACTIVE, liveCounts, stopQueued } from "./progress";
import { BATCH_ENDPOINTS, BatchCreate, batchView, MAX_BATCH_REQUESTS, page, type BatchRow } from "./schema";

/** What the Batch API uses of the app's dependencies. */
export interface BatchDeps extends FilesDeps {
  fleet: Fleet;
  /** Wakes the job runner (on this host, and through the store on the others). */
  jobs: { wake(workloadId?: string): void };
}

/** The time a batch has to finish (its `completion_window`, "24h"). */
const WINDOW_MS = 24 * 3_600_000;

/** One accepted line: what its job stores. */
interface Accepted {
  customId: string;
  workload: Workload;
  body: Uint8Array;
}

/** An error of one line of the input file, naming it (a 404 such as model_not_found refuses the batch as a 400). */
function atLine(e: unknown, line: number, customId?: string): unknown {
  if (!(e instanceof AppError)) return e;
  const where = `line ${line}${customId === undefined ? "" : ` (custom_id "${customId}")`} of the input file`;
  return new AppError(
    e.status === 404 ? 400 : e.status,
    e.code,
    `${where}: ${e.message}`,
    e.headers,
    `line ${line}${e.field ? `.${e.field}` : ""}`,
    e.extra,
  );
}

/** A line's request body as its job stores it: a chat body checked as a chat job's, `stream` dropped (jobs never stream). */
function jobBody(kind: string, body: Record<string, unknown>): Uint8Array {
  if (kind === "chat") {
    const r = ChatBody.safeParse(body);
    if (!r.success) {
      const issue = r.error.issues[0];
      throw fromSchemaIssue("body", { ...issue, path: ["body", ...(issue.path as (string | number)[])] });
    }
  }
  const { stream: _s, stream_options: _o, ...rest } = body;
  return Buffer.from(JSON.stringify(rest));
}

/** Checks every line of an input file (see the module comment) and picks each one's workload, giving the event loop turns between slices of lines. */
async function acceptLines(
  deps: BatchDeps,
  request: Request,
  base: RouteBase,
  endpoint: string,
  bytes: Uint8Array,
): Promise<Accepted[]> {
  const kind = BATCH_ENDPOINTS[endpoint];
  const out: Accepted[] = [];
  const ids = new Set<string>();
  const routed = new Map<string, Workload>();
  const open = new Set<string>();
  const pace = pacer();
  for (const { line, bytes: text } of jsonlLines(bytes)) {
    await pace();
    if (!text.byteLength) continue;
    let customId: string | undefined;
    try {
      if (out.length === MAX_BATCH_REQUESTS)
        throw new AppError(
          413,
          "batch_too_large",
          `a batch holds at most ${MAX_BATCH_REQUESTS} requests; split the file`,
        );
      const req = parseJsonBytes(text) as Record<string, unknown>;
      if (!req || typeof req !== "object" || Array.isArray(req)) throw validation("line", "must be a JSON object");
      if (typeof req.custom_id !== "string" || !req.custom_id)
        throw validation("custom_id", "is required: a string that names the request in the output file");
      customId = req.custom_id;
      if (ids.has(customId))
        throw validation(
          "custom_id",
          `"${customId}" is used by an earlier line; custom_id must be unique in the batch`,
        );
      if (req.method !== "POST") throw validation("method", `must be "POST"`);
      if (req.url !== endpoint)
        throw validation("url", `must be the batch's endpoint "${endpoint}" (got ${JSON.stringify(req.url ?? null)})`);
      const body = req.body;
      if (!body || typeof body !== "object" || Array.isArray(body))
        throw validation("body", "must be a JSON object: the request body of the endpoint");
      const model = (body as Record<string, unknown>).model;
      const key = JSON.stringify(model ?? null);
      let w = routed.get(key);
      if (!w) routed.set(key, (w = (await routeOf(deps, request, base, model)).workloads[0]));
      if (!open.has(w.id)) {
        checkJobsOn(w);
        checkKindOn(w, kind);
        open.add(w.id);
      }
      ids.add(customId);
      out.push({ customId, workload: w, body: jobBody(kind, body as Record<string, unknown>) });
    } catch (e) {
      throw atLine(e, line, customId);
    }
  }
  if (!out.length) throw validation("input_file_id", "the input file holds no request");
  return out;
}

/** Reads the JSON body of a batch creation. */
async function readCreate(deps: BatchDeps, request: Request): Promise<BatchCreate> {
  const r = BatchCreate.safeParse(
    parseJsonBytes(await readBodyLimited(request, deps.config.maxDataBodyBytes, deps.bodyBudget)),
  );
  if (!r.success) throw fromSchemaIssue("body", r.error.issues[0]);
  return r.data;
}

/** `POST …/v1/batches`: checks the input file's lines, then stores the batch and its requests' jobs together. */
export async function createBatch(
  deps: BatchDeps,
  request: Request,
  base: RouteBase,
  v: Viewer,
  finisher: BatchFinisher,
) {
  const input = await readCreate(deps, request);
  const bytes = await inputFileBytes(deps.db, v, input.input_file_id);
  // The requests parsed from the file are held while the batch is made.
  deps.bodyBudget.take(request, bytes.byteLength);
  const lines = await acceptLines(deps, request, base, input.endpoint, bytes);
  await deps.jobQuota.admit(
    v.key.projectId,
    lines.reduce((n, l) => n + l.body.byteLength, 0),
    `the batch (${lines.length} requests)`,
  );
  const now = nowIso();
  const row: BatchRow = {
    id: newId("batch"),
    projectId: v.key.projectId,
    workloadId: v.workloadId ?? null,
    workloads: JSON.stringify([...new Set(lines.map((l) => l.workload.slug))]),
    keyId: v.key.id,
    endpoint: input.endpoint,
    inputFileId: input.input_file_id,
    completionWindow: input.completion_window,
    status: "in_progress",
    metadata: input.metadata ? JSON.stringify(input.metadata) : null,
    errors: null,
    outputFileId: null,
    errorFileId: null,
    total: lines.length,
    completed: 0,
    failed: 0,
    createdAt: now,
    inProgressAt: now,
    expiresAt: new Date(Date.parse(now) + WINDOW_MS).toISOString(),
    finalizingAt: null,
    completedAt: null,
    failedAt: null,
    expiredAt: null,
    cancellingAt: null,
    cancelledAt: null,
  };
  const kind = BATCH_ENDPOINTS[input.endpoint];
  const jobRows = lines.map((l) => ({
    id: Bun.randomUUIDv7(),
    workloadId: l.workload.id,
    requestId: `req_${crypto.randomUUID().replaceAll("-", "")}`,
    keyId: v.key.id,
    kind,
    body: l.body as Buffer,
    contentType: "application/json",
    context: null,
    status: "queued" as const,
    runs: 0,
    createdAt: now,
    batchId: row.id,
    customId: l.customId,
  }));
  await batch(deps.db, [deps.db.insert(batches).values(row), ...jobInserts(deps.db, jobRows)]);
  for (const id of new Set(lines.map((l) => l.workload.id))) deps.jobs.wake(id);
  finisher.wake();
  return batchView(row, { total: row.total, completed: 0, failed: 0 });
}

/** A batch the viewer may see, or 404. */
async function visibleBatch(db: Db, v: Viewer, id: string): Promise<BatchRow> {
  const b = await first(db.select().from(batches).where(eq(batches.id, id)));
  if (!b || !canSeeBatch(v, b)) throw notFound(`batch "${id}"`);
  return b;
}

/** The batch object with its live counts. */
async function viewOf(db: Db, b: BatchRow) {
  return batchView(b, (await liveCounts(db, [b])).get(b.id));
}

/** `GET …/v1/batches/{id}`: ended at once when its last request has finished. */
export async function getBatch(db: Db, v: Viewer, id: string, finisher: BatchFinisher) {
  let b = await visibleBatch(db, v, id);
  if (ACTIVE.includes(b.status)) {
    await finisher.settle(b);
    b = await visibleBatch(db, v, id);
  }
  return viewOf(db, b);
}

/** `GET …/v1/batches`: the viewer's batches, newest first, a cursor page (`limit`, `after`). */
export async function listBatches(db: Db, v: Viewer, q: { limit: number; after?: string }) {
  const rows = await db
    .select()
    .from(batches)
    .where(and(eq(batches.projectId, v.key.projectId), v.workloadId ? eq(batches.workloadId, v.workloadId) : undefined))
    .orderBy(desc(batches.createdAt), desc(batches.id));
  const p = page(
    rows.filter((b) => canSeeBatch(v, b)),
    q,
  );
  const counts = await liveCounts(db, p.data);
  return { ...p, data: p.data.map((b) => batchView(b, counts.get(b.id))) };
}

/**
 * `POST …/v1/batches/{id}/cancel`: the batch is `cancelling` and its queued requests end at once;
 * those running finish, then it is `cancelled` with what finished in its files. 409 once it ended.
 */
export async function cancelBatch(db: Db, v: Viewer, id: string, finisher: BatchFinisher) {
  const b = await visibleBatch(db, v, id);
  if (b.status !== "cancelling" && b.status !== "cancelled") {
    if (!ACTIVE.includes(b.status))
      throw conflict(`batch "${id}" is ${b.status} and can no longer be cancelled`, "batch_not_cancellable");
    await batch(db, [
      db
        .update(batches)
        .set({ status: "cancelling", cancellingAt: nowIso() })
        .where(and(eq(batches.id, id), inArray(batches.status, ["validating", "in_progress", "finalizing"]))),
      stopQueued(db, id, "batch_cancelled", "the batch was cancelled before this request ran"),
    ]);
    await finisher.settle(b);
  }
  return viewOf(db, await visibleBatch(db, v, id));
}
