/**
 * Reading the request inspector's store: a workload's recent requests, newest first, filtered and
 * paged by a cursor; one request with its timeline; its captured bodies as text (UTF-8 JSON, SSE,
 * plain text) or base64. The list joins the key (name, prefix) and the worker (name) of each row.
 */
import { and, desc, eq, gte, isNull, lt, or, sql, type SQL } from "drizzle-orm";
import type { Db } from "../db";
import { first, startsWith } from "../db/raw";
import { apiKeys, requestBodies, requestLog, workers, workloads } from "../db/schema";
import { notFound, validation } from "../errors";
import type { FallbackTry, SpanRecord } from "./record";
import type { RequestQuery } from "./schema";

/** One request as the inspector lists it. */
export interface RequestRow {
  /** inferd's own id of the request (or the job's id): what the inspector's links name. */
  id: string;
  /** The id the client's answer carried (`x-request-id`: the client's own when it sent one); null for job runs. */
  request_id: string | null;
  at: string;
  kind: string;
  route: string;
  model: string | null;
  status: number;
  error_code: string | null;
  /** Why it failed, in words: inferd's message or the runtime's own (cut to 500 characters). */
  error_message: string | null;
  /** The workload that answered (null: refused before one was chosen) and its name. */
  workload_id: string | null;
  workload_name: string | null;
  /** Where it came from: null for an API client, `playground` for the dashboard's playground. */
  source: string | null;
  /** The workloads tried before the one that answered, in order (a fallback route); empty when none. */
  fell_back_from: FallbackTry[];
  key: { id: string; name: string | null; prefix: string | null } | null;
  tokens_in: number | null;
  tokens_out: number | null;
  queue_ms: number | null;
  ttft_ms: number | null;
  total_ms: number;
  replica: { assignment_id: string | null; worker_id: string | null; worker_name: string | null } | null;
  host_id: string | null;
  trace_id: string | null;
  captured: boolean;
}

/** One request with its project, workload and timeline. */
export interface RequestDetail extends RequestRow {
  project_id: string;
  spans: SpanRecord[];
}

/** A captured body: text when it is UTF-8 JSON, SSE or text, else base64. */
export interface BodyView {
  type: string | null;
  bytes: number;
  encoding: "text" | "base64";
  data: string;
}

/** Rows per page when `limit` is not sent. */
const PAGE = 50;

const columns = {
  log: requestLog,
  keyName: apiKeys.name,
  keyPrefix: apiKeys.prefix,
  workerName: workers.name,
  workloadName: workloads.name,
};

type Joined = {
  log: typeof requestLog.$inferSelect;
  keyName: string | null;
  keyPrefix: string | null;
  workerName: string | null;
  workloadName: string | null;
};

const joined = (db: Db) =>
  db
    .select(columns)
    .from(requestLog)
    .leftJoin(apiKeys, eq(apiKeys.id, requestLog.keyId))
    .leftJoin(workers, eq(workers.id, requestLog.workerId))
    .leftJoin(workloads, eq(workloads.id, requestLog.workloadId));

function toRow({ log: r, keyName, keyPrefix, workerName, workloadName }: Joined): RequestRow {
  return {
    id: r.id,
    request_id: r.requestId,
    at: r.at,
    kind: r.kind,
    route: r.route,
    model: r.model,
    status: r.status,
    error_code: r.errorCode,
    error_message: r.errorMessage,
    workload_id: r.workloadId || null,
    workload_name: workloadName,
    source: r.source,
    fell_back_from: r.fellBackFrom ? (JSON.parse(r.fellBackFrom) as FallbackTry[]) : [],
    key: r.keyId ? { id: r.keyId, name: keyName, prefix: keyPrefix } : null,
    tokens_in: r.tokensIn,
    tokens_out: r.tokensOut,
    queue_ms: r.queueMs,
    ttft_ms: r.ttftMs,
    total_ms: r.totalMs,
    replica:
      r.assignmentId || r.workerId
        ? { assignment_id: r.assignmentId, worker_id: r.workerId, worker_name: workerName }
        : null,
    host_id: r.hostId,
    trace_id: r.traceId,
    captured: Boolean(r.captured),
  };
}

/** The cursor of the row after which the next page starts: its time and id. */
const cursorOf = (r: RequestRow) => `${r.at}_${r.id}`;

/** A `before` value: a cursor from `next_before`, or a plain ISO time. */
function parseBefore(value: string): { at: string; id?: string } {
  const cut = value.indexOf("_");
  const [at, id] = cut < 0 ? [value, undefined] : [value.slice(0, cut), value.slice(cut + 1)];
  return { at: isoOf("before", at), id };
}

/** An ISO time sent in the query, as stored (UTC, ms), or 400 at `field`. */
function isoOf(field: string, value: string): string {
  const t = /^\d{4}-\d{2}-\d{2}T/.test(value) ? Date.parse(value) : NaN;
  if (!Number.isFinite(t)) throw validation(field, "must be an ISO 8601 time such as 2030-01-01T12:00:00Z");
  return new Date(t).toISOString();
}

/** A text for SQL `LIKE` matching itself only (`\` escapes), lower-cased. */
const likeText = (s: string) => s.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`);

/**
 * The condition of the `status` filter: `ok` (below 400), `error` (400 and up), `refused` (failed
 * before any replica took it: a key's limit, a quota, a switched-off route, a bad request), a status
 * number, or an error code.
 */
function statusIs(status: string): SQL | undefined {
  if (status === "ok") return lt(requestLog.status, 400);
  if (status === "refused") return and(gte(requestLog.status, 400), isNull(requestLog.assignmentId));
  if (status === "error") return gte(requestLog.status, 400);
  if (/^\d{3}$/.test(status)) return eq(requestLog.status, Number(status));
  return eq(requestLog.errorCode, status);
}

/** Whose requests a list shows: one workload's, or a whole project's (refusals included). */
export type RequestScope = { workloadId: string } | { projectId: string };

/** The conditions of a list query over one workload or project. */
function conditions(scope: RequestScope, q: RequestQuery): (SQL | undefined)[] {
  const text = q.q?.trim();
  const before = q.before ? parseBefore(q.before) : undefined;
  return [
    "workloadId" in scope ? eq(requestLog.workloadId, scope.workloadId) : eq(requestLog.projectId, scope.projectId),
    q.workload ? eq(requestLog.workloadId, q.workload) : undefined,
    q.source ? (q.source === "api" ? isNull(requestLog.source) : eq(requestLog.source, q.source)) : undefined,
    q.status ? statusIs(q.status) : undefined,
    q.key ? eq(requestLog.keyId, q.key) : undefined,
    text
      ? or(
          startsWith(requestLog.id, text),
          startsWith(requestLog.requestId, text),
          startsWith(requestLog.traceId, text),
          sql`lower(${requestLog.model}) LIKE ${`%${likeText(text)}%`} ESCAPE '\\'`,
        )
      : undefined,
    q.since ? gte(requestLog.at, isoOf("since", q.since)) : undefined,
    before
      ? before.id === undefined
        ? lt(requestLog.at, before.at)
        : or(lt(requestLog.at, before.at), and(eq(requestLog.at, before.at), lt(requestLog.id, before.id)))
      : undefined,
  ];
}

/** A workload's or project's requests, newest first, with the cursor of the next (older) page or null when this is the last. */
export async function listRequests(
  db: Db,
  scope: RequestScope,
  q: RequestQuery,
): Promise<{ requests: RequestRow[]; next_before: string | null }> {
  const limit = q.limit ?? PAGE;
  const rows = (
    await joined(db)
      .where(and(...conditions(scope, q)))
      .orderBy(desc(requestLog.at), desc(requestLog.id))
      .limit(limit + 1)
  ).map(toRow);
  const page = rows.slice(0, limit);
  return { requests: page, next_before: rows.length > limit ? cursorOf(page[page.length - 1]) : null };
}

/** One request with its timeline, or 404. */
export async function getRequest(db: Db, id: string): Promise<RequestDetail> {
  const r = await first(joined(db).where(eq(requestLog.id, id)));
  if (!r) throw notFound(`request "${id}"`);
  return {
    ...toRow(r),
    project_id: r.log.projectId,
    spans: JSON.parse(r.log.spans) as SpanRecord[],
  };
}

/** The project a stored request belongs to, or undefined (for access checks by project). */
export async function requestProject(db: Db, id: string): Promise<string | undefined> {
  return (await first(db.select({ projectId: requestLog.projectId }).from(requestLog).where(eq(requestLog.id, id))))
    ?.projectId;
}

const TEXT_TYPE = /json|event-stream|^text\/|ndjson/i;

/** A stored body for the API: its text when it is UTF-8 of a textual type, else base64. */
function bodyView(type: string | null, raw: Uint8Array | null): BodyView | null {
  if (!raw) return null;
  const bytes = new Uint8Array(raw);
  if (type === null || TEXT_TYPE.test(type)) {
    try {
      return {
        type,
        bytes: bytes.byteLength,
        encoding: "text",
        data: new TextDecoder("utf-8", { fatal: true }).decode(bytes),
      };
    } catch {
      // not UTF-8: base64 below
    }
  }
  return { type, bytes: bytes.byteLength, encoding: "base64", data: Buffer.from(bytes).toString("base64") };
}

/** A request's captured bodies (404 when the request is unknown or none were kept). */
export async function getBodies(
  db: Db,
  id: string,
): Promise<{ request: BodyView | null; response: BodyView | null; truncated: boolean }> {
  const b = await first(db.select().from(requestBodies).where(eq(requestBodies.requestId, id)));
  if (!b) throw notFound(`captured bodies of request "${id}"`);
  return {
    request: bodyView(b.requestType, b.request),
    response: bodyView(b.responseType, b.response),
    truncated: Boolean(b.truncated),
  };
}
