/**
 * Finds the exact source text of a top-level field of a JSON object, so a caller's `context` can be
 * sent back byte for byte (re-serialising would change spacing, key order and number spelling).
 * The text must already be valid JSON (checked with JSON.parse); like JSON.parse, the last of
 * duplicate keys wins. Returns undefined when the field is absent.
 * @example rawField('{"a":1, "context": {"x": 1.50}}', "context") // → '{"x": 1.50}'
 */
export function rawField(text: string, key: string): string | undefined {
  let i = 0;
  const ws = () => {
    while (i < text.length && " \t\n\r".includes(text[i])) i++;
  };
  const skipString = () => {
    i++; // opening quote
    while (text[i] !== '"') i += text[i] === "\\" ? 2 : 1;
    i++;
  };
  const skipValue = () => {
    const c = text[i];
    if (c === '"') return skipString();
    if (c === "{" || c === "[") {
      let depth = 0;
      do {
        const d = text[i];
        if (d === '"') {
          skipString();
          continue;
        }
        if (d === "{" || d === "[") depth++;
        else if (d === "}" || d === "]") depth--;
        i++;
      } while (depth > 0);
      return;
    }
    while (i < text.length && !",}] \t\n\r".includes(text[i])) i++;
  };
  ws();
  if (text[i] !== "{") return undefined;
  i++;
  let found: string | undefined;
  for (;;) {
    ws();
    if (text[i] === "}") return found;
    const keyStart = i;
    skipString();
    const name = JSON.parse(text.slice(keyStart, i)) as string;
    ws();
    i++; // colon
    ws();
    const valueStart = i;
    skipValue();
    if (name === key) found = text.slice(valueStart, i);
    ws();
    if (text[i] === ",") i++;
    else return found;
  }
}
