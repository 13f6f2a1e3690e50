/**
 * Exact source text of parts of a JSON document, so a caller's `context` (and a job's `body`) can
 * be kept byte for byte: re-serialising would change spacing, key order and number spelling. The
 * text must already be valid JSON (checked with JSON.parse): the scanner trusts its structure.
 */

const QUOTE = 34;
const BACKSLASH = 92;
const COMMA = 44;
const isSpace = (c: number) => c === 32 || c === 9 || c === 10 || c === 13;
const isOpen = (c: number) => c === 123 || c === 91; // { [
const isClose = (c: number) => c === 125 || c === 93; // } ]

/** A cursor over valid JSON text that steps over whitespace, strings and whole values. */
class Scanner {
  i = 0;
  constructor(readonly text: string) {}

  at(): number {
    return this.text.charCodeAt(this.i);
  }

  ws(): void {
    while (this.i < this.text.length && isSpace(this.at())) this.i++;
  }

  skipString(): void {
    this.i++; // opening quote
    while (this.at() !== QUOTE) this.i += this.at() === BACKSLASH ? 2 : 1;
    this.i++;
  }

  /** Steps over one value and returns its source text. */
  value(): string {
    const start = this.i;
    const c = this.at();
    if (c === QUOTE) this.skipString();
    else if (isOpen(c)) {
      let depth = 0;
      do {
        const d = this.at();
        if (d === QUOTE) {
          this.skipString();
          continue;
        }
        if (isOpen(d)) depth++;
        else if (isClose(d)) depth--;
        this.i++;
      } while (depth > 0);
    } else {
      while (this.i < this.text.length && !isSpace(this.at()) && this.at() !== COMMA && !isClose(this.at())) this.i++;
    }
    return this.text.slice(start, this.i);
  }

  /** After a member or element: true when a comma follows (and is consumed), false at the closing bracket. */
  more(): boolean {
    this.ws();
    if (this.at() !== COMMA) return false;
    this.i++;
    this.ws();
    return true;
  }
}

/**
 * The source text of the top-level fields of a JSON object named in `keys` (like JSON.parse, the
 * last of duplicate keys wins); absent fields are missing from the map. Empty when not an object.
 * @example rawFields('{"body": {"a":1}, "context": [ 2 ]}', ["body", "context"]) // → Map { body → '{"a":1}', context → '[ 2 ]' }
 */
export function rawFields(text: string, keys: readonly string[]): Map<string, string> {
  const found = new Map<string, string>();
  const s = new Scanner(text);
  s.ws();
  if (s.at() !== 123) return found;
  s.i++;
  s.ws();
  if (s.at() === 125) return found;
  do {
    const keyStart = s.i;
    s.skipString();
    const name = JSON.parse(text.slice(keyStart, s.i)) as string;
    s.ws();
    s.i++; // colon
    s.ws();
    const value = s.value();
    if (keys.includes(name)) found.set(name, value);
  } while (s.more());
  return found;
}

/**
 * A copy of `text` that shares no memory with the document it was cut from: a slice keeps its
 * whole source string alive (a 40 KiB NDJSON line behind a 10-byte `context`), a copy does not.
 * @example detached(line.slice(3, 9)) // → the same six characters, on their own
 */
export const detached = (text: string): string => Buffer.from(text, "utf8").toString("utf8");

/**
 * Finds the exact source text of a top-level field of a JSON object; undefined when it is absent.
 * @example rawField('{"a":1, "context": {"x": 1.50}}', "context") // → '{"x": 1.50}'
 */
export function rawField(text: string, key: string): string | undefined {
  return rawFields(text, [key]).get(key);
}

/**
 * The source text of each element of a top-level JSON array, in order; undefined when the text is
 * not an array.
 * @example rawElements('[{"a": 1.50}, 2]') // → ['{"a": 1.50}', "2"]
 */
export function rawElements(text: string): string[] | undefined {
  const s = new Scanner(text);
  s.ws();
  if (s.at() !== 91) return undefined;
  s.i++;
  s.ws();
  const out: string[] = [];
  if (s.at() === 93) return out;
  do out.push(s.value());
  while (s.more());
  return out;
}
