/**
 * Bodies kept for the request inspector while a workload's capture is on (`capture_until` in the
 * future): the request and the answer (streams too), each up to 1 MiB, cut beyond. Only requests
 * of a capturing workload make one; the others pay nothing.
 */
import type { CapturedBodies } from "../inspector/record";

/** How much of each body is kept. */
export const CAPTURE_LIMIT = 1024 * 1024;

/** One body as it is collected, chunk by chunk, up to the limit. */
class Part {
  private chunks: Uint8Array[] = [];
  private size = 0;
  cut = false;

  add(bytes: Uint8Array): void {
    const room = CAPTURE_LIMIT - this.size;
    if (bytes.length > room) this.cut = true;
    if (room <= 0) return;
    const kept = bytes.length > room ? bytes.slice(0, room) : bytes.slice();
    this.chunks.push(kept);
    this.size += kept.length;
  }

  bytes(): Uint8Array | null {
    if (!this.chunks.length) return null;
    if (this.chunks.length === 1) return this.chunks[0];
    const out = new Uint8Array(this.size);
    let at = 0;
    for (const c of this.chunks) {
      out.set(c, at);
      at += c.length;
    }
    return out;
  }
}

const enc = new TextEncoder();

/** A request's captured bodies: the request's given once, the answer's teed as it goes to the client. */
export class Capture {
  private request = new Part();
  private response = new Part();
  private responseType: string | null = null;

  constructor(private requestType: string | null) {}

  /** The request body as inferd read it (a JSON body as parsed, written back as JSON). */
  keepRequest(body: unknown): void {
    if (body !== undefined) this.request.add(enc.encode(typeof body === "string" ? body : JSON.stringify(body)));
  }

  /** The answer's content type, then its bytes (called for each chunk of a stream). */
  answerType(type: string | null): void {
    this.responseType = type;
  }

  /** More of the answer, as the client gets it. */
  keepAnswer(bytes: Uint8Array | ArrayBuffer | string): void {
    this.response.add(
      typeof bytes === "string" ? enc.encode(bytes) : bytes instanceof Uint8Array ? bytes : new Uint8Array(bytes),
    );
  }

  /** What the inspector stores. */
  bodies(): CapturedBodies {
    return {
      requestType: this.requestType,
      request: this.request.bytes(),
      responseType: this.responseType,
      response: this.response.bytes(),
      truncated: this.request.cut || this.response.cut,
    };
  }
}
