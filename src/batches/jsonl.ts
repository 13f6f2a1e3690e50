/**
 * JSONL files of batch requests, read a line at a time straight from their bytes (never decoded or
 * parsed whole) and checked with the depth-capped JSON parser of request bodies, in slices that give
 * the event loop back: an upload of any size never holds up other requests for long. A file holds at
 * most MAX_FILE_LINES lines of at most MAX_LINE_BYTES bytes each, so no one line takes long to parse.
 */
import { AppError, badRequest } from "../errors";
import { parseJsonBytes } from "../http";
import { MAX_BATCH_REQUESTS } from "./schema";

/** The longest line a file may hold, in bytes (one request of a batch). */
export const MAX_LINE_BYTES = 2 << 20;
/** The most lines a file may hold (blank ones included): a batch's most requests. */
export const MAX_FILE_LINES = MAX_BATCH_REQUESTS;
/** Work done between two turns of the event loop, at most (one line past it). */
const SLICE_MS = 10;

/** Whether a byte is JSON whitespace (space, tab, CR; LF ends the line). */
const blank = (b: number) => b === 32 || b === 9 || b === 13;
/** The UTF-8 byte order mark some editors write at the start of a file. */
const BOM = [0xef, 0xbb, 0xbf];

/**
 * The lines of a JSONL file, numbered from 1, each a view of its bytes without surrounding
 * whitespace (empty for a blank line; the empty end after a final newline is not a line).
 * @example for (const { line, bytes } of jsonlLines(file)) if (bytes.length) parse(bytes);
 */
export function* jsonlLines(bytes: Uint8Array): Generator<{ line: number; bytes: Uint8Array }> {
  const buf = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let from = BOM.every((b, i) => buf[i] === b) ? BOM.length : 0;
  for (let line = 1; from < buf.length; line++) {
    const nl = buf.indexOf(10, from);
    let end = nl < 0 ? buf.length : nl;
    let start = from;
    while (start < end && blank(buf[start])) start++;
    while (end > start && blank(buf[end - 1])) end--;
    yield { line, bytes: bytes.subarray(start, end) };
    if (nl < 0) break;
    from = nl + 1;
  }
}

/** A macrotask's wait: lets the event loop serve others (I/O included) before going on. */
export const turn = () => new Promise<void>((resolve) => setImmediate(resolve));

/**
 * A pacer for long loops on the event loop: awaiting it gives other requests a turn (a macrotask,
 * so I/O runs) once SLICE_MS have passed since the last turn, and costs next to nothing otherwise.
 * @example const pace = pacer(); for (const x of many) { work(x); await pace(); }
 */
export function pacer(sliceMs = SLICE_MS): () => Promise<void> {
  let since = performance.now();
  return async () => {
    if (performance.now() - since < sliceMs) return;
    await turn();
    since = performance.now();
  };
}

/** The rule of a batch file, added to every refusal of one. */
const JSONL = "a batch file holds one JSON request object per line (JSONL)";

/** One line of an upload parsed: 413 past the line limit, 400 `invalid_file` unless it is a JSON object (nested at most 64 deep). */
function checkLine(line: number, bytes: Uint8Array): void {
  if (bytes.byteLength > MAX_LINE_BYTES) {
    throw new AppError(
      413,
      "line_too_long",
      `line ${line} of the file is ${bytes.byteLength} bytes long, more than the ${MAX_LINE_BYTES}-byte limit of a line; ${JSONL}`,
    );
  }
  let value: unknown;
  try {
    value = parseJsonBytes(bytes, `line ${line} of the file`);
  } catch (e) {
    throw e instanceof AppError ? badRequest("invalid_file", `${e.message}; ${JSONL}`) : e;
  }
  if (!value || typeof value !== "object" || Array.isArray(value))
    throw badRequest("invalid_file", `line ${line} of the file is not a JSON object; ${JSONL}`);
}

/**
 * Checks an upload is a batch file: every non-blank line a JSON object (see checkLine), at most
 * MAX_FILE_LINES lines (413 `too_many_lines`), at least one request (400 `invalid_file`). Gives the
 * event loop a turn between slices of lines.
 */
export async function checkJsonl(bytes: Uint8Array): Promise<void> {
  const pace = pacer();
  let requests = 0;
  for (const { line, bytes: text } of jsonlLines(bytes)) {
    if (line > MAX_FILE_LINES)
      throw new AppError(
        413,
        "too_many_lines",
        `the file has more than ${MAX_FILE_LINES} lines (line ${line}); a batch holds at most ${MAX_BATCH_REQUESTS} requests: split the file`,
      );
    if (text.byteLength) {
      checkLine(line, text);
      requests++;
    }
    await pace();
  }
  if (requests === 0) throw badRequest("invalid_file", `the file holds no request; ${JSONL}`);
}
