/**
 * A bounded in-memory buffer of a runtime's terminal output. Every byte ever pushed has an offset
 * (bytes since the ring was made), so a live follower can ask for "everything since offset X" and
 * then subscribe; the oldest bytes are dropped once the ring holds more than its cap.
 */

/** Default cap on the bytes a `LogRing` keeps: 256 KiB. */
export const DEFAULT_RING_BYTES = 256 * 1024;

/** Called with each chunk pushed into a ring and the offset of its first byte. */
export type RingListener = (chunk: Uint8Array, offset: number) => void;

/** What `LogRing.since` returns: the bytes from `start` (inclusive) to `end` (exclusive). */
export interface RingSlice {
  data: Uint8Array;
  start: number;
  end: number;
  /** True when bytes the caller asked for had already been dropped (`start` is later than asked). */
  truncated: boolean;
}

const encoder = new TextEncoder();

/** Joins byte arrays into one. */
function concat(parts: Uint8Array[]): Uint8Array {
  let size = 0;
  for (const p of parts) size += p.length;
  const out = new Uint8Array(size);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * Terminal output of one replica, capped by total size, oldest bytes dropped first.
 * @example const ring = new LogRing(); ring.push("hi\n"); ring.since(0).data // → bytes of "hi\n"
 */
export class LogRing {
  private chunks: { offset: number; data: Uint8Array }[] = [];
  private bytes = 0;
  private endOffset = 0;
  private listeners = new Set<RingListener>();

  /** A ring keeping at most `maxBytes` bytes (at least 1). */
  constructor(readonly maxBytes: number = DEFAULT_RING_BYTES) {
    if (!(maxBytes >= 1)) throw new RangeError("LogRing maxBytes must be at least 1");
  }

  /** The offset just past the newest byte (total bytes ever pushed). */
  get end(): number {
    return this.endOffset;
  }

  /** The offset of the oldest byte still held. */
  get start(): number {
    return this.endOffset - this.bytes;
  }

  /** Bytes currently held. */
  get size(): number {
    return this.bytes;
  }

  /** Appends output (strings are stored as UTF-8; the ring keeps the array, so do not reuse it) and tells followers. */
  push(chunk: Uint8Array | string): void {
    const data = typeof chunk === "string" ? encoder.encode(chunk) : chunk;
    if (data.length === 0) return;
    const offset = this.endOffset;
    this.endOffset += data.length;
    const stored = data.length > this.maxBytes ? data.subarray(data.length - this.maxBytes) : data;
    this.chunks.push({ offset: this.endOffset - stored.length, data: stored });
    this.bytes += stored.length;
    this.dropOldest();
    for (const fn of this.listeners) {
      try {
        fn(data, offset);
      } catch {
        // A broken follower must not stop output from reaching the others or the log file.
      }
    }
  }

  /** Drops whole chunks, then the front of one, until the ring is within its cap. */
  private dropOldest(): void {
    while (this.bytes > this.maxBytes) {
      const first = this.chunks[0];
      const excess = this.bytes - this.maxBytes;
      if (first.data.length <= excess) {
        this.chunks.shift();
        this.bytes -= first.data.length;
      } else {
        first.data = first.data.subarray(excess);
        first.offset += excess;
        this.bytes -= excess;
      }
    }
  }

  /**
   * Everything from `offset` on (from the oldest byte held when `offset` was already dropped).
   * @example let pos = 0; const s = ring.since(pos); send(s.data); pos = s.end;
   */
  since(offset: number): RingSlice {
    const start = Math.min(Math.max(offset, this.start), this.endOffset);
    const parts: Uint8Array[] = [];
    for (const c of this.chunks) {
      const chunkEnd = c.offset + c.data.length;
      if (chunkEnd <= start) continue;
      parts.push(c.offset >= start ? c.data : c.data.subarray(start - c.offset));
    }
    return { data: concat(parts), start, end: this.endOffset, truncated: offset < start };
  }

  /** The newest `maxBytes` bytes held (may begin inside a UTF-8 sequence or an escape). */
  tail(maxBytes: number): Uint8Array {
    return this.since(this.endOffset - Math.max(0, maxBytes)).data;
  }

  /** Everything held, decoded as UTF-8 with escapes intact. */
  text(): string {
    return new TextDecoder().decode(this.since(0).data);
  }

  /**
   * The last `n` lines as plain text, the way a terminal would show them: colours and other escapes
   * removed, a line redrawn with `\r` (a progress bar) reduced to its final state. For error messages.
   * With `from`, only output from that offset on (e.g. one run of a process) is considered.
   */
  lastLines(n: number, from = 0): string {
    const lines = renderLines(new TextDecoder().decode(this.since(from).data));
    while (lines.length > 0 && lines[lines.length - 1] === "") lines.pop();
    return lines.slice(Math.max(0, lines.length - n)).join("\n");
  }

  /** Calls `fn` with every chunk pushed from now on; returns a function that unsubscribes. */
  subscribe(fn: RingListener): () => void {
    this.listeners.add(fn);
    return () => this.unsubscribe(fn);
  }

  /** Stops calling `fn`. */
  unsubscribe(fn: RingListener): void {
    this.listeners.delete(fn);
  }
}

/** CSI (`ESC [ … final`), OSC (`ESC ] … BEL|ST`), or a two/three-byte escape. */
const ESCAPE = /\x1b(?:\[([0-?]*)[ -/]*([@-~])|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[()*+][0-9A-Za-z]|[@-Z\\-_])/y;

/**
 * Renders terminal output into plain lines: `\r` returns to the start of the line and later text
 * overwrites, `\b` steps back, erase-in-line (`ESC[K`) and cursor-to-column (`ESC[G`) are honoured,
 * every other escape is dropped. `\r\n` (what a PTY turns `\n` into) is a plain line break.
 * @example renderLines("\x1b[32mok\x1b[0m\nload 10%\rload 100%\n") // → ["ok", "load 100%", ""]
 */
export function renderLines(text: string): string[] {
  const lines: string[] = [];
  let line: string[] = [];
  let col = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === "\x1b") {
      ESCAPE.lastIndex = i;
      const m = ESCAPE.exec(text);
      if (!m) continue;
      i += m[0].length - 1;
      const param = Number.parseInt(m[1] ?? "", 10) || 0;
      if (m[2] === "K")
        line = param === 0 ? line.slice(0, col) : param === 1 ? [...Array(col).fill(" "), ...line.slice(col)] : [];
      else if (m[2] === "G") col = Math.max(0, param - 1);
      continue;
    }
    if (c === "\n") {
      lines.push(line.join("").trimEnd());
      line = [];
      col = 0;
    } else if (c === "\r") col = 0;
    else if (c === "\b") col = Math.max(0, col - 1);
    else if (c >= " " || c === "\t") {
      while (line.length < col) line.push(" ");
      line[col++] = c;
    }
  }
  lines.push(line.join("").trimEnd());
  return lines;
}
