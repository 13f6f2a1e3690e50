/**
 * The OpenAI Files API for batches: upload a JSONL file of requests (`purpose: "batch"`), list,
 * read, download and delete files, including the output and error files batches write. The bytes
 * live in the store in chunks (./content.ts): a file survives a kill -9 exactly when its row does,
 * and every host of a cluster serves it. An upload is read within the data-plane body limit
 * (`--max-data-body-bytes`) and the buffered-bytes budget, held once, checked line by line without
 * holding up other requests (./jsonl.ts), and counted in the project's job storage
 * (`--max-job-bytes-per-project`). A download streams chunk by chunk and holds one chunk of the
 * buffered-bytes budget while it runs.
 */
import { and, desc, eq, getTableColumns, inArray } from "drizzle-orm";
import type { Config } from "../config";
import type { ByteBudget } from "../http";
import type { JobQuota } from "../jobs/quota";
import type { Db } from "../db";
import { batch, first } from "../db/raw";
import { batches, files } from "../db/schema";
import { AppError, badRequest, notFound, validation } from "../errors";
import { readBodyLimited } from "../http";
import { newId, nowIso } from "../ids";
import { boundaryOf } from "../multipart";
import { canSeeBatch, canSeeUpload, type Viewer } from "./access";
import { CHUNK_BYTES, fileBytes, fileRemovals, fileStream, storeFile } from "./content";
import { checkJsonl } from "./jsonl";
import { formParts } from "./multipart";
import { fileView, type FileRow } from "./schema";

/** What the Files API uses of the app's dependencies. */
export interface FilesDeps {
  db: Db;
  config: Config;
  bodyBudget: ByteBudget;
  jobQuota: JobQuota;
}

const { content: _content, ...FILE_COLUMNS } = getTableColumns(files);

/** A new file id in OpenAI's form. */
export const newFileId = () => newId("file").replace("_", "-");

/** The text of a form field, if sent. */
const fieldText = (parts: ReturnType<typeof formParts>, name: string) => {
  const p = parts.find((x) => x.name === name && x.filename === undefined);
  return p && Buffer.from(p.data).toString("utf8").trim();
};

/**
 * `POST …/v1/files`: stores a `purpose: "batch"` JSONL upload for the key's project; 400 for any
 * other purpose, a missing file or a line that is not a JSON object (or nests deeper than 64); 413
 * past the body limit, a line's limit or the lines' limit; 429 when the project's job storage is full.
 */
export async function uploadFile(deps: FilesDeps, request: Request, v: Viewer) {
  const boundary = boundaryOf(request.headers.get("content-type") ?? undefined);
  if (!boundary)
    throw new AppError(
      415,
      "unsupported_media_type",
      'upload the file as multipart/form-data with the fields "file" and "purpose"',
    );
  const parts = formParts(await readBodyLimited(request, deps.config.maxDataBodyBytes, deps.bodyBudget), boundary);
  const purpose = fieldText(parts, "purpose");
  if (!purpose) throw validation("purpose", 'is required; inferd keeps files for the Batch API: purpose "batch"');
  if (purpose !== "batch")
    throw badRequest(
      "invalid_purpose",
      `purpose "${purpose}" is not supported: inferd's Files API keeps files for the Batch API only; upload with purpose "batch"`,
    );
  const file = parts.find((p) => p.name === "file" && p.filename !== undefined) ?? parts.find((p) => p.name === "file");
  if (!file) throw validation("file", "is required: the JSONL file of batch requests");
  await checkJsonl(file.data);
  await deps.jobQuota.admit(v.key.projectId, file.data.byteLength, `the file (${file.data.byteLength} bytes)`);
  const row = {
    id: newFileId(),
    projectId: v.key.projectId,
    batchId: null,
    keyId: v.key.id,
    filename: file.filename || "batch.jsonl",
    purpose,
    bytes: file.data.byteLength,
    createdAt: nowIso(),
  };
  await storeFile(deps.db, row, file.data);
  return fileView(row);
}

/** The files of the viewer's project it may see, newest first (optionally of one purpose). */
export async function visibleFiles(db: Db, v: Viewer, purpose?: string): Promise<FileRow[]> {
  const rows = await db
    .select(FILE_COLUMNS)
    .from(files)
    .where(and(eq(files.projectId, v.key.projectId), purpose ? eq(files.purpose, purpose) : undefined))
    .orderBy(desc(files.createdAt), desc(files.id));
  const batchIds = [...new Set(rows.flatMap((f) => (f.batchId ? [f.batchId] : [])))];
  const seen = new Set<string>();
  if (batchIds.length) {
    const owners = await db
      .select({
        id: batches.id,
        projectId: batches.projectId,
        workloadId: batches.workloadId,
        workloads: batches.workloads,
      })
      .from(batches)
      .where(inArray(batches.id, batchIds));
    for (const b of owners) if (canSeeBatch(v, b)) seen.add(b.id);
  }
  return rows.filter((f) => (f.batchId ? seen.has(f.batchId) : canSeeUpload(v, f)));
}

/** A file the viewer may see, or 404. */
export async function visibleFile(db: Db, v: Viewer, id: string): Promise<FileRow> {
  const f = await first(
    db
      .select(FILE_COLUMNS)
      .from(files)
      .where(and(eq(files.id, id), eq(files.projectId, v.key.projectId))),
  );
  if (f && f.batchId) {
    const b = await first(db.select().from(batches).where(eq(batches.id, f.batchId)));
    if (b && canSeeBatch(v, b)) return f;
  } else if (f && canSeeUpload(v, f)) return f;
  throw notFound(`file "${id}"`);
}

/**
 * `GET …/v1/files/{id}/content`: the file's bytes as stored, streamed a chunk at a time; the
 * download holds a chunk of the buffered-bytes budget until it ends (503 `server_busy` when full).
 */
export async function fileContent(deps: FilesDeps, request: Request, v: Viewer, id: string): Promise<Response> {
  const f = await visibleFile(deps.db, v, id);
  deps.bodyBudget.take(request, Math.min(f.bytes, CHUNK_BYTES));
  const body = fileStream(deps.db, f, () => deps.bodyBudget.release(request));
  const headers = {
    "content-type": "application/jsonl",
    "content-disposition": `attachment; filename="${f.filename.replace(/["\\\r\n]/g, "_")}"`,
  };
  return new Response(body, { headers });
}

/** `DELETE …/v1/files/{id}`: removes a file (a batch already made from it keeps running). */
export async function deleteFile(db: Db, v: Viewer, id: string) {
  const f = await visibleFile(db, v, id);
  await batch(db, fileRemovals(db, f.id));
  return { id: f.id, object: "file" as const, deleted: true };
}

/** The bytes of a `purpose: "batch"` file the viewer may use as a batch's input; 404 when unseen, 400 for an output file. */
export async function inputFileBytes(db: Db, v: Viewer, id: string): Promise<Uint8Array> {
  const f = await visibleFile(db, v, id).catch((e) => {
    throw e instanceof AppError && e.status === 404
      ? validation(
          "input_file_id",
          `file "${id}" not found; upload the requests with POST …/v1/files (purpose "batch") first`,
        )
      : e;
  });
  if (f.purpose !== "batch")
    throw validation(
      "input_file_id",
      `file "${id}" has purpose "${f.purpose}"; a batch's input is a file uploaded with purpose "batch"`,
    );
  return fileBytes(db, f).catch((e) => {
    throw e instanceof AppError && e.status === 404 ? validation("input_file_id", `file "${id}" was deleted`) : e;
  });
}
