import { AppError, validation } from "../errors";
import { parseJsonBytes, utf8Text } from "../http";
import type { Workload } from "../workloads/service";
import { checkEnvelope, checkKindOn, parseEnvelope, type AcceptedJob } from "./envelope";
import { rawElements } from "./raw";

/** Envelopes one `jobs:batch` request may carry. */
export const MAX_BATCH = 1000;

/** How a batch is sent and answered: a JSON array (answered `{job_ids}`) or NDJSON (answered with NDJSON lines). */
export type BatchFormat = "json" | "ndjson";

const NDJSON_TYPES = new Set(["application/x-ndjson", "application/ndjson"]);

/** NDJSON when the Content-Type says so, else a JSON array. */
export function batchFormat(contentType: string | null): BatchFormat {
  return NDJSON_TYPES.has((contentType ?? "").split(";")[0].trim().toLowerCase()) ? "ndjson" : "json";
}

/**
 * An envelope's error re-addressed to its place in the batch: field `kind` of the fourth envelope
 * becomes `body[3].kind` (in the field and the message); code, status and headers are kept.
 */
function atIndex(e: unknown, i: number, line?: number): unknown {
  if (!(e instanceof AppError)) return e;
  const where = `body[${i}]`;
  const field = e.field ? `${where}.${e.field}` : where;
  const rest =
    e.field !== undefined && e.message.startsWith(`${e.field}: `) ? e.message.slice(e.field.length + 2) : e.message;
  const message = `${field}: ${rest}${line === undefined ? "" : ` (NDJSON line ${line})`}`;
  return new AppError(e.status, e.code, message, e.headers, field, e.extra);
}

/** 413 for a batch of more than MAX_BATCH envelopes (`count` when known). */
const tooMany = (count?: number) =>
  new AppError(
    413,
    "batch_too_large",
    `a batch holds at most ${MAX_BATCH} job envelopes and this one has ${count ?? "more"}; split it into several requests`,
  );

/** 400 for a batch without envelopes. */
const empty = () => validation("body", `holds no job envelope; send 1 to ${MAX_BATCH}`);

/** One envelope checked exactly as `POST …/jobs` checks one (and its kind's toggle); errors name it by index. */
function acceptOne(text: string, i: number, w: Workload, line?: number): AcceptedJob {
  try {
    const job = checkEnvelope(parseEnvelope(text, ""), w);
    checkKindOn(w, job.kind);
    return job;
  } catch (e) {
    throw atIndex(e, i, line);
  }
}

/**
 * Checks every envelope of a JSON-array batch as `POST …/jobs` checks one; the first bad one
 * refuses the whole batch, named by its index (`body[i].field`). 413 past MAX_BATCH envelopes,
 * 400 for none.
 */
export function acceptBatch(text: string, w: Workload): AcceptedJob[] {
  const all = parseJsonBytes(text);
  if (!Array.isArray(all))
    throw validation(
      "body",
      "must be a JSON array of job envelopes (or NDJSON lines with Content-Type: application/x-ndjson)",
    );
  if (all.length > MAX_BATCH) throw tooMany(all.length);
  if (all.length === 0) throw empty();
  return rawElements(text)!.map((t, i) => acceptOne(t, i, w));
}

/** Bytes counted for an accepted job beyond its body and context (its record and row). */
const JOB_OVERHEAD = 256;

/** The bytes a batch holds, counted as they come and go (`take` throws to refuse more). */
export interface Holding {
  take(bytes: number): void;
  give(bytes: number): void;
}

/**
 * Checks an NDJSON batch line by line as its body streams in: a line is parsed when its newline
 * arrives, and only the accepted jobs are kept (never the whole text). `holding` counts what is
 * held at each moment: the bytes of the line not yet complete, then each kept job (body, context
 * and record) in place of its line. The first bad line refuses the batch at once, named by index
 * and line; so does the envelope past MAX_BATCH.
 */
export async function acceptNdjson(
  chunks: AsyncIterable<Uint8Array>,
  w: Workload,
  holding: Holding,
): Promise<AcceptedJob[]> {
  const jobs: AcceptedJob[] = [];
  for await (const { bytes, line } of lines(counted(chunks, holding))) {
    const text = utf8Text(bytes);
    holding.give(bytes.byteLength + 1);
    if (!text.trim()) continue;
    if (jobs.length === MAX_BATCH) throw tooMany();
    const job = acceptOne(text, jobs.length, w, line);
    holding.take(job.body.byteLength + (job.context?.length ?? 0) + JOB_OVERHEAD);
    jobs.push(job);
  }
  if (jobs.length === 0) throw empty();
  return jobs;
}

/** The chunks, each counted as held when it arrives. */
async function* counted(chunks: AsyncIterable<Uint8Array>, holding: Holding): AsyncGenerator<Uint8Array> {
  for await (const chunk of chunks) {
    holding.take(chunk.byteLength);
    yield chunk;
  }
}

/** The lines of a byte stream (split at `\n`, which never occurs inside a UTF-8 sequence), numbered from 1. */
async function* lines(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<{ bytes: Uint8Array; line: number }> {
  let parts: Uint8Array[] = [];
  let line = 0;
  for await (const chunk of chunks) {
    let from = 0;
    for (let nl = chunk.indexOf(10); nl >= 0; nl = chunk.indexOf(10, from)) {
      parts.push(chunk.subarray(from, nl));
      yield { bytes: parts.length === 1 ? parts[0] : Buffer.concat(parts), line: ++line };
      parts = [];
      from = nl + 1;
    }
    // A copy of the unfinished line, so the chunk it came in is not kept for it.
    if (from < chunk.length) parts.push(chunk.slice(from));
  }
  if (parts.length) yield { bytes: Buffer.concat(parts), line: ++line };
}
