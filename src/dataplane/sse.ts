/**
 * The one reader of a runtime's SSE stream: bytes in, complete events out. The chat meter and the
 * Anthropic, Responses and Ollama writers all read their input through it. It works on the bytes
 * (a line end is never part of a multi-byte UTF-8 character), so an event passed on unchanged goes
 * out as the very bytes that came in, and text and JSON are decoded only when someone asks.
 */

const LF = 10;
const CR = 13;
const COLON = 58;
const SPACE = 32;
const NOTHING = new Uint8Array(0);
const enc = new TextEncoder();
const dec = new TextDecoder();
/** `json()`'s cache before the first call. */
const UNREAD = Symbol("unread");

/** True when the line `buf[from, to)` names the field `name` (ASCII), up to its colon or the line's end. */
function isField(buf: Uint8Array, from: number, nameEnd: number, name: string): boolean {
  if (nameEnd - from !== name.length) return false;
  for (let i = 0; i < name.length; i++) if (buf[from + i] !== name.charCodeAt(i)) return false;
  return true;
}

/** One SSE event: its bytes as they came (its blank line included), its `event:` name, and its `data:` read on demand. */
export class SseEvent {
  #text: string | undefined;
  #data: string | undefined;
  #json: unknown = UNREAD;

  /**
   * @param raw the event's bytes, from the end of the previous event to the end of its blank line
   * @param event its `event:` field ("" when it has none)
   * @param comments how many comment lines (`:` …) it has
   * @param ranges where its `data:` values lie in `raw`: start and end of each, in line order
   * @param complete false for the stream's last bytes when they did not end with a blank line
   */
  constructor(
    readonly raw: Uint8Array,
    readonly event: string,
    readonly comments: number,
    private readonly ranges: readonly number[],
    readonly complete = true,
  ) {}

  /** The event's bytes as text (decoded once). */
  get text(): string {
    return (this.#text ??= dec.decode(this.raw));
  }

  /** Its `data:` lines joined with `\n`, the one space after each colon taken off ("" when none). */
  get data(): string {
    if (this.#data !== undefined) return this.#data;
    const r = this.ranges;
    let data = r.length ? dec.decode(this.raw.subarray(r[0], r[1])) : "";
    for (let i = 2; i < r.length; i += 2) data += `\n${dec.decode(this.raw.subarray(r[i], r[i + 1]))}`;
    return (this.#data = data);
  }

  /** True when it has no `data:` line (a comment, a stray blank line, a lone `event:`). */
  get empty(): boolean {
    return this.ranges.length === 0;
  }

  /** `data` parsed as JSON, once; `undefined` when it is not JSON. */
  json(): unknown {
    if (this.#json !== UNREAD) return this.#json;
    try {
      this.#json = JSON.parse(this.data);
    } catch {
      this.#json = undefined;
    }
    return this.#json;
  }
}

/**
 * Cuts a byte stream into SSE events as they complete: lines end with LF, CRLF or CR (a CR at the
 * end of the bytes so far waits for a possible LF), a blank line ends an event, `:` lines are
 * comments, and events may be split across chunks or share one. Each chunk's new bytes are scanned
 * once; only the unfinished event's bytes are kept (and copied once, when the next chunk comes).
 * @example new SseDecoder().push("data: 1\n\ndata: 2\n\n").map((e) => e.data) // → ["1", "2"]
 */
export class SseDecoder {
  /** The unfinished event's bytes, from its start. */
  #buf: Uint8Array = NOTHING;
  /** Where in `#buf` the first line not read yet starts. */
  #scan = 0;
  #event = "";
  #comments = 0;
  #ranges: number[] = [];
  #named = false;

  /** True once any `event:` line was read (an Anthropic or Responses stream rather than OpenAI chunks). */
  get named(): boolean {
    return this.#named;
  }

  /** The bytes of the event not finished yet, as text. */
  get rest(): string {
    return dec.decode(this.#buf);
  }

  /** Feeds bytes (any split); returns the events they complete. A string is taken as its UTF-8 bytes. */
  push(chunk: Uint8Array | string): SseEvent[] {
    const bytes = typeof chunk === "string" ? enc.encode(chunk) : chunk;
    if (this.#buf.length === 0) this.#buf = bytes;
    else {
      const joined = new Uint8Array(this.#buf.length + bytes.length);
      joined.set(this.#buf);
      joined.set(bytes, this.#buf.length);
      this.#buf = joined;
    }
    return this.#read(false);
  }

  /** The stream ended: the events still waiting, the last one even without its line end or blank line. */
  end(): SseEvent[] {
    const out = this.#read(true);
    const buf = this.#buf;
    if (this.#scan < buf.length) this.#line(buf, this.#scan, buf.length, 0);
    if (buf.length) out.push(this.#take(buf, false));
    this.#buf = NOTHING;
    this.#scan = 0;
    return out;
  }

  /** Reads the complete lines of `#buf`; keeps from the start of the unfinished event. */
  #read(final: boolean): SseEvent[] {
    const buf = this.#buf;
    const out: SseEvent[] = [];
    let start = 0;
    let pos = this.#scan;
    let lf = buf.indexOf(LF, pos);
    let cr = buf.indexOf(CR, pos);
    for (;;) {
      if (lf >= 0 && lf < pos) lf = buf.indexOf(LF, pos);
      if (cr >= 0 && cr < pos) cr = buf.indexOf(CR, pos);
      const end = cr < 0 ? lf : lf < 0 ? cr : Math.min(lf, cr);
      if (end < 0) break;
      let next = end + 1;
      if (end === cr) {
        if (next === buf.length && !final) break;
        if (buf[next] === LF) next += 1;
      }
      if (end === pos) {
        out.push(this.#take(buf.subarray(start, next)));
        start = next;
      } else this.#line(buf, pos, end, start);
      pos = next;
    }
    this.#buf = start === 0 ? buf : start < buf.length ? buf.subarray(start) : NOTHING;
    this.#scan = pos - start;
    return out;
  }

  /** One field line `buf[from, to)` of the event starting at `base`: `data:` ranges are kept, `event:` read, the rest ignored. */
  #line(buf: Uint8Array, from: number, to: number, base: number): void {
    if (buf[from] === COLON) {
      this.#comments += 1;
      return;
    }
    let colon = buf.indexOf(COLON, from);
    if (colon < 0 || colon > to) colon = to;
    let value = colon < to ? colon + 1 : to;
    if (value < to && buf[value] === SPACE) value += 1;
    if (isField(buf, from, colon, "data")) this.#ranges.push(value - base, to - base);
    else if (isField(buf, from, colon, "event")) {
      this.#event = dec.decode(buf.subarray(value, to));
      this.#named = true;
    }
  }

  /** The event read so far, with these bytes; the next one starts empty. */
  #take(raw: Uint8Array, complete = true): SseEvent {
    const ev = new SseEvent(raw, this.#event, this.#comments, this.#ranges, complete);
    this.#event = "";
    this.#comments = 0;
    this.#ranges = [];
    return ev;
  }
}

/**
 * The bytes of consecutive events of one `push` (or `end`) as one view, without copying.
 * @example bytesOf(decoder.push(chunk)) // → the chunk's complete events, byte for byte
 */
export function bytesOf(events: readonly SseEvent[]): Uint8Array {
  if (events.length === 0) return NOTHING;
  const first = events[0].raw;
  const last = events[events.length - 1].raw;
  if (events.length === 1) return first;
  return new Uint8Array(first.buffer, first.byteOffset, last.byteOffset + last.byteLength - first.byteOffset);
}
