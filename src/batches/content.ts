/**
 * The bytes of the Files API's files, kept in the store in chunks of CHUNK_BYTES (`file_chunks`), so
 * no file is ever written, read or sent whole. A file's chunks and its `files` row land together: on
 * PostgreSQL in one transaction; on SQLite, whose transactions block the event loop while they run, a
 * few chunks per transaction with turns of the event loop between, the row in the last one (a file
 * exists once its row does). Chunks without a row, left by a crash mid-write or by a deleted project,
 * are swept away. A file stored before chunks keeps its bytes in `files.content` and is read from there.
 */
import { and, eq, notInArray } from "drizzle-orm";
import type { Db } from "../db";
import { batch, first, type Statement } from "../db/raw";
import { fileChunks, files } from "../db/schema";
import { notFound } from "../errors";
import { pacer, turn } from "./jsonl";
import type { FileRow } from "./schema";

/** The size of a chunk of a file's bytes. */
export const CHUNK_BYTES = 1 << 20;
/** Chunks written per SQLite transaction (a few milliseconds each). */
const CHUNKS_PER_WRITE = 8;
/** Files this process is writing on SQLite: their chunks have no row yet, yet are no leftovers. */
const writing = new Set<string>();
/** What a chunked file keeps in the old `content` column. */
const NO_CONTENT = Buffer.alloc(0);

/** The chunk rows of a file's bytes, each a view of them (not a copy). */
function chunkRows(fileId: string, bytes: Uint8Array) {
  const rows = [];
  for (let idx = 0; idx * CHUNK_BYTES < bytes.byteLength; idx++) {
    const part = bytes.subarray(idx * CHUNK_BYTES, (idx + 1) * CHUNK_BYTES);
    rows.push({ fileId, idx, data: Buffer.from(part.buffer, part.byteOffset, part.byteLength) });
  }
  return rows;
}

/**
 * The writes that store a file: its chunks, then its row (for one transaction with other writes).
 * @example await batch(db, [...fileWrites(db, row, bytes), db.update(batches)…]);
 */
export function fileWrites(db: Db, row: FileRow, bytes: Uint8Array): Statement[] {
  return [
    ...chunkRows(row.id, bytes).map((c) => db.insert(fileChunks).values(c)),
    db.insert(files).values({ ...row, content: NO_CONTENT }),
  ];
}

/** Stores a file (see the module comment); on a failure nothing of it is left. */
export async function storeFile(db: Db, row: FileRow, bytes: Uint8Array): Promise<void> {
  const writes = fileWrites(db, row, bytes);
  if (db.engine === "postgres") return batch(db, writes);
  writing.add(row.id);
  try {
    for (let i = 0; i < writes.length; i += CHUNKS_PER_WRITE) {
      await batch(db, writes.slice(i, i + CHUNKS_PER_WRITE));
      await turn();
    }
  } catch (e) {
    await db
      .delete(fileChunks)
      .where(eq(fileChunks.fileId, row.id))
      .catch(() => undefined);
    throw e;
  } finally {
    writing.delete(row.id);
  }
}

/** The writes that remove a file: its chunks and its row. */
export const fileRemovals = (db: Db, fileId: string): Statement[] => [
  db.delete(fileChunks).where(eq(fileChunks.fileId, fileId)),
  db.delete(files).where(eq(files.id, fileId)),
];

/** Removes chunks no file row owns (see the module comment); the chunks of files being written stay. */
export async function sweepChunks(db: Db): Promise<void> {
  const owned = notInArray(fileChunks.fileId, db.select({ id: files.id }).from(files));
  await db.delete(fileChunks).where(writing.size ? and(owned, notInArray(fileChunks.fileId, [...writing])) : owned);
}

/** Chunk `idx` of a file, or undefined when there is none. */
async function chunkAt(db: Db, fileId: string, idx: number): Promise<Uint8Array | undefined> {
  return (
    await first(
      db
        .select({ data: fileChunks.data })
        .from(fileChunks)
        .where(and(eq(fileChunks.fileId, fileId), eq(fileChunks.idx, idx))),
    )
  )?.data;
}

/** The bytes of a file stored before chunks, or undefined when its row is gone. */
async function oldContent(db: Db, fileId: string): Promise<Uint8Array | undefined> {
  return (await first(db.select({ content: files.content }).from(files).where(eq(files.id, fileId))))?.content;
}

/**
 * A file's bytes in order, one chunk at a time: chunk by chunk from `file_chunks`, or a file stored
 * before chunks from its old column in CHUNK_BYTES slices. 404 when the file is deleted meanwhile.
 */
export async function* fileChunksOf(db: Db, f: Pick<FileRow, "id" | "bytes">): AsyncGenerator<Uint8Array> {
  const count = Math.ceil(f.bytes / CHUNK_BYTES);
  for (let idx = 0; idx < count; idx++) {
    const chunk = await chunkAt(db, f.id, idx);
    if (chunk) {
      yield chunk;
      continue;
    }
    const old = idx === 0 ? await oldContent(db, f.id) : undefined;
    if (!old || old.byteLength !== f.bytes) throw notFound(`file "${f.id}"`);
    for (let at = 0; at < old.byteLength; at += CHUNK_BYTES) yield old.subarray(at, at + CHUNK_BYTES);
    return;
  }
}

/** A file's bytes whole (a batch's input, checked line by line), read with turns of the event loop between chunks. */
export async function fileBytes(db: Db, f: Pick<FileRow, "id" | "bytes">): Promise<Uint8Array> {
  const pace = pacer();
  const parts: Uint8Array[] = [];
  for await (const chunk of fileChunksOf(db, f)) {
    parts.push(chunk);
    await pace();
  }
  return parts.length === 1 ? parts[0] : Buffer.concat(parts);
}

/**
 * A file's bytes as a response body, read from the store a chunk at a time as the client takes
 * them (at most one chunk ahead), with a turn of the event loop before each (parallel downloads
 * take turns with other requests); `done` runs once when it ends, fails or the client goes away.
 */
export function fileStream(db: Db, f: Pick<FileRow, "id" | "bytes">, done: () => void): ReadableStream<Uint8Array> {
  const chunks = fileChunksOf(db, f);
  let ended = false;
  const end = () => {
    if (!ended) (ended = true), done();
  };
  return new ReadableStream<Uint8Array>(
    {
      async pull(c) {
        try {
          await turn();
          const next = await chunks.next();
          if (next.done) {
            end();
            c.close();
          } else c.enqueue(next.value);
        } catch (e) {
          end();
          c.error(e);
        }
      },
      async cancel() {
        end();
        await chunks.return(undefined);
      },
    },
    { highWaterMark: 1 },
  );
}
