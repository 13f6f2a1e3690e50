/**
 * The `model` field of a multipart upload (audio transcriptions, image edits), set to the name the
 * chosen runtime serves, as JSON bodies get it: a client may send `default`, the workload's slug or
 * its model name and the runtime sees the name it knows. Only the first 64 KiB of the body are looked
 * at (held back until then), so the field must come before a large file, as the OpenAI SDKs and
 * `curl -F model=… -F file=@…` send it; past that, or for any other name, the body goes unchanged.
 */

/** How much of an upload is held back to find the `model` field. */
export const MODEL_FIELD_WINDOW = 64 * 1024;

/** The boundary of a `multipart/form-data` content type, or undefined. */
export function boundaryOf(contentType: string | undefined): string | undefined {
  if (!contentType || !/^multipart\/form-data\s*;/i.test(contentType)) return undefined;
  const m = /;\s*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  return m?.[1] ?? m?.[2];
}

const escape = (s: string) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * `head` with the value of its `model` field replaced by `served` when the value is one of `aliases`.
 * @example setModelField(bytes('--b\r\nContent-Disposition: form-data; name="model"\r\n\r\ndefault\r\n--b--'), "b", "qwen", ["default"]) // → the same with "qwen"
 */
export function setModelField(head: Uint8Array, boundary: string, served: string, aliases: readonly string[]): Uint8Array {
  const text = Buffer.from(head.buffer, head.byteOffset, head.byteLength).toString("latin1");
  const b = escape(boundary);
  const part = new RegExp(`(--${b}\\r\\ncontent-disposition:[ \\t]*form-data;[ \\t]*name="?model"?[ \\t]*\\r\\n(?:[^\\r\\n]+\\r\\n)*\\r\\n)([^\\r\\n]*)(\\r\\n--${b})`, "i");
  const m = part.exec(text);
  if (!m || !aliases.includes(Buffer.from(m[2], "latin1").toString("utf8"))) return head;
  const out = text.slice(0, m.index) + m[1] + Buffer.from(served, "utf8").toString("latin1") + m[3] + text.slice(m.index + m[0].length);
  return Buffer.from(out, "latin1");
}

/** An upload stream with its `model` field set (see the module comment); the rest passes as it arrives. */
export function withModelField(body: ReadableStream<Uint8Array>, boundary: string, served: string, aliases: readonly string[]): ReadableStream<Uint8Array> {
  let held: Uint8Array[] = [];
  let size = 0;
  let passed = false;
  const release = (c: TransformStreamDefaultController<Uint8Array>) => {
    passed = true;
    if (size) c.enqueue(setModelField(Buffer.concat(held), boundary, served, aliases));
    held = [];
  };
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, c) {
        if (passed) return c.enqueue(chunk);
        held.push(chunk);
        size += chunk.byteLength;
        if (size >= MODEL_FIELD_WINDOW) release(c);
      },
      flush(c) {
        if (!passed) release(c);
      },
    }),
  );
}

/** A whole upload with its `model` field set (looked for in the same first 64 KiB as a stream). */
export function withModelFieldWhole(body: Uint8Array, boundary: string, served: string, aliases: readonly string[]): Uint8Array {
  if (body.byteLength <= MODEL_FIELD_WINDOW) return setModelField(body, boundary, served, aliases);
  return Buffer.concat([setModelField(body.subarray(0, MODEL_FIELD_WINDOW), boundary, served, aliases), body.subarray(MODEL_FIELD_WINDOW)]);
}

/** What a runtime's request needs to set an upload's `model` field: the names that mean this workload's model. */
export interface ModelAliases {
  modelAliases?: readonly string[];
  headers: Record<string, string>;
}

/** The upload as a stream for a runtime serving `served` (unchanged unless it is multipart with aliases). */
export function uploadStreamFor(req: ModelAliases, body: ReadableStream<Uint8Array>, served: string | undefined): ReadableStream<Uint8Array> {
  const boundary = boundaryOf(req.headers["content-type"]);
  return boundary && served && req.modelAliases ? withModelField(body, boundary, served, req.modelAliases) : body;
}

/** The upload whole for a runtime serving `served` (unchanged unless it is multipart with aliases). */
export function uploadBytesFor(req: ModelAliases, body: Uint8Array, served: string | undefined): Uint8Array {
  const boundary = boundaryOf(req.headers["content-type"]);
  return boundary && served && req.modelAliases ? withModelFieldWhole(body, boundary, served, req.modelAliases) : body;
}

/**
 * The `model` field of an upload that came in on a project's base URL (so its workload is not known
 * yet), and a request carrying the same body to forward. STUB until the streaming reader lands:
 * reads nothing and reports no model.
 */
export async function uploadModel(request: Request, _limit: number): Promise<{ model: string | undefined; request: Request }> {
  return { model: undefined, request };
}
