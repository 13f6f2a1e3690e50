/**
 * The `model` field of a multipart upload (audio transcriptions, image edits), set to the name the
 * chosen runtime serves, as JSON bodies get it: a client may send `default`, the workload's slug or
 * its model name and the runtime sees the name it knows. The field is found wherever it stands
 * (openai-node keeps the caller's key order, so `{ file, model }` sends a large file first) by a
 * streaming scanner that holds only a few KiB between chunks: the end of the previous chunk (as long
 * as the boundary), a part's headers and the field's short value. Everything else passes as it
 * arrives; any other name goes unchanged.
 */
import { open, unlink, type FileHandle } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { bodyChunks } from "./http";

/** The boundary of a `multipart/form-data` content type, or undefined. */
export function boundaryOf(contentType: string | undefined): string | undefined {
  if (!contentType || !/^multipart\/form-data\s*;/i.test(contentType)) return undefined;
  const m = /;\s*boundary=(?:"([^"]+)"|([^;\s]+))/i.exec(contentType);
  return m?.[1] ?? m?.[2];
}

/** The most a part's header block may hold to be looked at (past it the part is passed unread). */
const MAX_HEADERS = 8 * 1024;
/** The most a `model` value may hold to be looked at (model names are short). */
const MAX_VALUE = 1024;
const CRLFCRLF = Buffer.from("\r\n\r\n");

type State = "body" | "headers" | "value" | "done";

/**
 * Finds the first `model` field of a multipart body fed to it chunk by chunk and, with `rewrite`,
 * replaces its value by what `rewrite` returns (unchanged when it returns undefined). `push` gives
 * back the bytes that may go on now; `held` is what it keeps between chunks (a few KiB at most).
 * @example const s = new ModelFieldScanner("b", (v) => (v === "default" ? "qwen" : undefined)); send(s.push(chunk)); send(s.end());
 */
export class ModelFieldScanner {
  /** The `model` field's value as sent, once its part has been read whole. */
  model: string | undefined;
  #delim: Buffer;
  #state: State = "body";
  #pending: Buffer;
  /** Bytes of the CRLF put before the body (its first delimiter has none) not sent yet. */
  #virtual = 2;

  constructor(
    boundary: string,
    private readonly rewrite?: (value: string) => string | undefined,
  ) {
    this.#delim = Buffer.from(`\r\n--${boundary}`, "latin1");
    this.#pending = Buffer.from("\r\n");
  }

  /** True once the `model` field was read or the body shows there is none (the rest only passes). */
  get settled(): boolean {
    return this.#state === "done";
  }

  /** Bytes kept between chunks. */
  get held(): number {
    return this.#pending.byteLength;
  }

  /** Feeds the next chunk; returns the bytes to pass on now. */
  push(chunk: Uint8Array): Uint8Array[] {
    const out: Uint8Array[] = [];
    if (this.#state === "done" && this.#pending.byteLength === 0) {
      this.#emit(out, chunk);
      return out;
    }
    let buf = this.#pending.byteLength
      ? Buffer.concat([this.#pending, chunk])
      : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    this.#pending = Buffer.alloc(0);
    while (buf.byteLength) {
      const rest = this.#step(buf, out);
      if (rest === undefined) break;
      buf = rest;
    }
    return out;
  }

  /** The body ended: whatever is held goes on. */
  end(): Uint8Array[] {
    const out: Uint8Array[] = [];
    if (this.#pending.byteLength) this.#emit(out, this.#pending);
    this.#pending = Buffer.alloc(0);
    this.#state = "done";
    return out;
  }

  /** One step of the state machine over `buf`: the bytes left to look at, or undefined when the rest is held. */
  #step(buf: Buffer, out: Uint8Array[]): Buffer | undefined {
    switch (this.#state) {
      case "done":
        this.#emit(out, buf);
        return undefined;
      case "body": {
        const at = buf.indexOf(this.#delim);
        if (at < 0) return this.#hold(buf, this.#delim.byteLength - 1, out);
        const end = at + this.#delim.byteLength;
        this.#emit(out, buf.subarray(0, end));
        this.#state = "headers";
        return buf.subarray(end);
      }
      case "headers":
        return this.#headers(buf, out);
      case "value": {
        const at = buf.indexOf(this.#delim);
        if (at < 0) {
          if (buf.byteLength > MAX_VALUE + this.#delim.byteLength) return this.#giveUp(buf, out);
          this.#pending = buf;
          return undefined;
        }
        this.model = buf.subarray(0, at).toString("utf8");
        const replaced = this.rewrite?.(this.model);
        this.#emit(out, replaced === undefined ? buf.subarray(0, at) : Buffer.from(replaced, "utf8"));
        this.#state = "done";
        return buf.subarray(at);
      }
    }
  }

  /** After a delimiter: `--` closes the body; else a header block up to its blank line. */
  #headers(buf: Buffer, out: Uint8Array[]): Buffer | undefined {
    if (buf.byteLength < 2) return this.#keep(buf);
    if (buf[0] === 0x2d && buf[1] === 0x2d) {
      this.#state = "done";
      return buf;
    }
    const at = buf.indexOf(CRLFCRLF);
    if (at < 0) return buf.byteLength > MAX_HEADERS ? this.#giveUp(buf, out) : this.#keep(buf);
    const end = at + CRLFCRLF.byteLength;
    const head = buf.subarray(0, end).toString("latin1");
    this.#emit(out, buf.subarray(0, end));
    const disposition = /\r\ncontent-disposition:[ \t]*form-data[^\r\n]*/i.exec(head)?.[0] ?? "";
    const isModel =
      /;[ \t]*name=(?:"model"|model)(?=[ \t;]|$)/i.test(disposition) && !/;[ \t]*filename\*?=/i.test(disposition);
    this.#state = isModel ? "value" : "body";
    return buf.subarray(end);
  }

  #keep(buf: Buffer): undefined {
    this.#pending = Buffer.from(buf);
    return undefined;
  }

  /** Passes all of `buf` but its last `keep` bytes, which are held. */
  #hold(buf: Buffer, keep: number, out: Uint8Array[]): undefined {
    const cut = Math.max(0, buf.byteLength - keep);
    if (cut) this.#emit(out, buf.subarray(0, cut));
    this.#pending = Buffer.from(buf.subarray(cut));
    return undefined;
  }

  /** A header block or value too large to be ours: passed on unread; the scan goes on in the body. */
  #giveUp(buf: Buffer, out: Uint8Array[]): undefined {
    this.#state = "body";
    return this.#hold(buf, this.#delim.byteLength - 1, out);
  }

  #emit(out: Uint8Array[], bytes: Uint8Array): void {
    if (this.#virtual) {
      const skip = Math.min(this.#virtual, bytes.byteLength);
      this.#virtual -= skip;
      bytes = bytes.subarray(skip);
    }
    if (bytes.byteLength) out.push(bytes);
  }
}

/** The rewrite of a `model` value: `served` when the value is one of `aliases`. */
const toServed = (served: string, aliases: readonly string[]) => (v: string) =>
  aliases.includes(v) ? served : undefined;

/** An upload stream with its `model` field set (see the module comment); the rest passes as it arrives. */
export function withModelField(
  body: ReadableStream<Uint8Array>,
  boundary: string,
  served: string,
  aliases: readonly string[],
): ReadableStream<Uint8Array> {
  const scanner = new ModelFieldScanner(boundary, toServed(served, aliases));
  return body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform: (chunk, c) => scanner.push(chunk).forEach((b) => c.enqueue(b)),
      flush: (c) => scanner.end().forEach((b) => c.enqueue(b)),
    }),
  );
}

/** A whole upload with its `model` field set. */
export function withModelFieldWhole(
  body: Uint8Array,
  boundary: string,
  served: string,
  aliases: readonly string[],
): Uint8Array {
  const scanner = new ModelFieldScanner(boundary, toServed(served, aliases));
  return Buffer.concat([...scanner.push(body), ...scanner.end()]);
}

/** What a runtime's request needs to set an upload's `model` field: the names that mean this workload's model. */
export interface ModelAliases {
  modelAliases?: readonly string[];
  headers: Record<string, string>;
}

/** The upload as a stream for a runtime serving `served` (unchanged unless it is multipart with aliases). */
export function uploadStreamFor(
  req: ModelAliases,
  body: ReadableStream<Uint8Array>,
  served: string | undefined,
): ReadableStream<Uint8Array> {
  const boundary = boundaryOf(req.headers["content-type"]);
  return boundary && served && req.modelAliases ? withModelField(body, boundary, served, req.modelAliases) : body;
}

/** The upload whole for a runtime serving `served` (unchanged unless it is multipart with aliases). */
export function uploadBytesFor(req: ModelAliases, body: Uint8Array, served: string | undefined): Uint8Array {
  const boundary = boundaryOf(req.headers["content-type"]);
  return boundary && served && req.modelAliases ? withModelFieldWhole(body, boundary, served, req.modelAliases) : body;
}

/** How much of an upload read ahead of its `model` field stays in memory; the rest goes to a temp file. */
const SPOOL_IN_MEMORY = 64 * 1024;
/** The size of the chunks a spooled upload is replayed in. */
const REPLAY_CHUNK = 64 * 1024;

/**
 * The part of an upload read before its `model` field: up to 64 KiB in memory, the rest in a temp
 * file under the OS temp dir, unlinked as soon as it is open (nothing stays on disk whatever
 * happens; where unlinking an open file is refused, it is removed when closed).
 */
class Spool {
  #memory: Uint8Array[] = [];
  #inMemory = 0;
  #file?: { handle: FileHandle; path: string; size: number; read: number; unlinked: boolean };

  async write(chunk: Uint8Array): Promise<void> {
    if (!this.#file && this.#inMemory + chunk.byteLength <= SPOOL_IN_MEMORY) {
      this.#memory.push(chunk);
      this.#inMemory += chunk.byteLength;
      return;
    }
    if (!this.#file) {
      const path = join(tmpdir(), `inferd-upload-${crypto.randomUUID()}`);
      const handle = await open(path, "w+", 0o600);
      const unlinked = await unlink(path).then(
        () => true,
        () => false,
      );
      this.#file = { handle, path, size: 0, read: 0, unlinked };
    }
    await this.#file.handle.write(chunk, 0, chunk.byteLength, this.#file.size);
    this.#file.size += chunk.byteLength;
  }

  /** The next spooled chunk, in the order written; undefined once all were read. */
  async next(): Promise<Uint8Array | undefined> {
    const m = this.#memory.shift();
    if (m) return m;
    const f = this.#file;
    if (!f || f.read >= f.size) return undefined;
    const buf = Buffer.alloc(Math.min(REPLAY_CHUNK, f.size - f.read));
    const { bytesRead } = await f.handle.read(buf, 0, buf.byteLength, f.read);
    if (!bytesRead) throw new Error("the upload's temp file ended early");
    f.read += bytesRead;
    return buf.subarray(0, bytesRead);
  }

  /** Closes and removes the temp file, if any (twice is harmless). */
  async discard(): Promise<void> {
    this.#memory = [];
    const f = this.#file;
    this.#file = undefined;
    if (!f) return;
    await f.handle.close().catch(() => {});
    if (!f.unlinked) await unlink(f.path).catch(() => {});
  }
}

/** Closes the temp file of a replayed upload whose body was never read. */
const unread = new FinalizationRegistry<Spool>((spool) => void spool.discard());

/**
 * The `model` field of an upload that came in on a project's base URL (so its workload is not known
 * yet), and a request carrying the same body (same headers) to forward. The body is read up to
 * that field only: what comes before it (a large `file` first) is spooled (see `Spool`) and
 * replayed, followed by the rest of the body as it arrives. 413 past `limit`, while reading here or
 * later while the rest streams. Not multipart: no model, and the request as it came.
 */
export async function uploadModel(
  request: Request,
  limit: number,
): Promise<{ model: string | undefined; request: Request }> {
  const boundary = boundaryOf(request.headers.get("content-type") ?? undefined);
  if (!boundary || !request.body) return { model: undefined, request };
  const rest = bodyChunks(request, limit);
  const scanner = new ModelFieldScanner(boundary);
  const spool = new Spool();
  try {
    while (!scanner.settled) {
      const r = await rest.next();
      if (r.done) break;
      scanner.push(r.value);
      await spool.write(r.value);
    }
  } catch (e) {
    await spool.discard();
    throw e;
  }
  const body = new ReadableStream<Uint8Array>({
    async pull(c) {
      try {
        const spooled = await spool.next();
        if (spooled) return c.enqueue(spooled);
        await spool.discard();
        const r = await rest.next();
        if (r.done) c.close();
        else c.enqueue(r.value);
      } catch (e) {
        await spool.discard();
        throw e;
      }
    },
    async cancel() {
      await spool.discard();
      await rest.return(undefined);
    },
  });
  const replayed = new Request(request.url, {
    method: request.method,
    headers: request.headers,
    body,
    signal: request.signal,
    duplex: "half",
  } as RequestInit);
  unread.register(replayed, spool);
  return { model: scanner.model, request: replayed };
}
