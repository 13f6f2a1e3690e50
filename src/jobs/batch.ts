import { AppError, validation } from "../errors";
import { parseJsonBytes } from "../http";
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
  const rest = e.field !== undefined && e.message.startsWith(`${e.field}: `) ? e.message.slice(e.field.length + 2) : e.message;
  const message = `${field}: ${rest}${line === undefined ? "" : ` (NDJSON line ${line})`}`;
  return new AppError(e.status, e.code, message, e.headers, field, e.extra);
}

/** The envelopes' source texts: the elements of a JSON array, or the non-blank lines of NDJSON (with their line numbers). */
function envelopeTexts(text: string, format: BatchFormat): { text: string; line?: number }[] {
  if (format === "ndjson") {
    const out: { text: string; line: number }[] = [];
    text.split("\n").forEach((l, n) => {
      if (l.trim()) out.push({ text: l, line: n + 1 });
    });
    return out;
  }
  const all = parseJsonBytes(text);
  if (!Array.isArray(all)) throw validation("body", "must be a JSON array of job envelopes (or NDJSON lines with Content-Type: application/x-ndjson)");
  if (all.length > MAX_BATCH) return all; // only the count matters: refused below
  return rawElements(text)!.map((t) => ({ text: t }));
}

/**
 * Checks every envelope of a batch exactly as `POST …/jobs` checks one (and its kind's toggle);
 * the first bad one refuses the whole batch, named by its index (`body[i].field`). 413 past
 * MAX_BATCH envelopes, 400 for none.
 */
export function acceptBatch(text: string, format: BatchFormat, w: Workload): AcceptedJob[] {
  const texts = envelopeTexts(text, format);
  if (texts.length > MAX_BATCH) {
    throw new AppError(413, "batch_too_large", `a batch holds at most ${MAX_BATCH} job envelopes and this one has ${texts.length}; split it into several requests`);
  }
  if (texts.length === 0) throw validation("body", `holds no job envelope; send 1 to ${MAX_BATCH}`);
  return texts.map((t, i) => {
    try {
      const job = checkEnvelope(parseEnvelope(t.text, ""), w);
      checkKindOn(w, job.kind);
      return job;
    } catch (e) {
      throw atIndex(e, i, t.line);
    }
  });
}
