/**
 * The parts of a `multipart/form-data` body already read (within the data-plane body limit): each
 * part's content is a view into the body, never a copy, so an upload is held once.
 */
import { badRequest } from "../errors";

/** One part of a form: its field name, file name when it is a file, and its bytes. */
export interface FormPart {
  name: string;
  filename?: string;
  data: Uint8Array;
}

const malformed = (why: string) => badRequest("invalid_multipart", `the multipart/form-data body is malformed: ${why}`);

/** A header parameter (`name="file"`) of a part's Content-Disposition. */
function param(head: string, key: string): string | undefined {
  const m =
    new RegExp(`;\\s*${key}="((?:[^"\\\\]|\\\\.)*)"`, "i").exec(head) ??
    new RegExp(`;\\s*${key}=([^;\\s]+)`, "i").exec(head);
  return m?.[1].replace(/\\(.)/g, "$1");
}

/**
 * The parts of a multipart body delimited by `boundary`; 400 `invalid_multipart` when it is not one.
 * @example formParts(body, "abc").find((p) => p.name === "purpose")
 */
export function formParts(body: Uint8Array, boundary: string): FormPart[] {
  const buf = Buffer.from(body.buffer, body.byteOffset, body.byteLength);
  const delimiter = Buffer.from(`--${boundary}`);
  const next = Buffer.from(`\r\n--${boundary}`);
  let at = buf.indexOf(delimiter);
  if (at < 0) throw malformed("the boundary never occurs");
  const parts: FormPart[] = [];
  for (;;) {
    let start = at + delimiter.length;
    if (buf[start] === 45 && buf[start + 1] === 45) return parts; // the closing "--"
    if (buf[start] !== 13 || buf[start + 1] !== 10) throw malformed("a boundary is not followed by a line break");
    start += 2;
    const headEnd = buf.indexOf("\r\n\r\n", start);
    if (headEnd < 0) throw malformed("a part has no end to its headers");
    const head = buf.toString("utf8", start, headEnd);
    const end = buf.indexOf(next, headEnd + 4);
    if (end < 0) throw malformed("a part is not closed by the boundary");
    const disposition = /^content-disposition:(.*)$/im.exec(head)?.[1] ?? "";
    const name = param(disposition, "name");
    if (name === undefined) throw malformed("a part has no Content-Disposition name");
    parts.push({ name, filename: param(disposition, "filename"), data: body.subarray(headEnd + 4, end) });
    at = end + 2;
  }
}
