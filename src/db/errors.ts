/**
 * Store failures the domain code answers in its own way (a duplicate is a 409, a full disk a 503),
 * recognised the same on both dialects: bun:sqlite throws its error as is (`code` like
 * `SQLITE_CONSTRAINT_UNIQUE`); on PostgreSQL drizzle wraps Bun's error (SQLSTATE in `errno`, like
 * `23505`) in a DrizzleQueryError whose `cause` it is, and the raw client throws it unwrapped.
 */

/** A failure the caller can name: a duplicate key, a missing or still-referenced row, another constraint, a full disk. */
export type StoreFailure = "unique" | "foreign_key" | "constraint" | "full";

/** SQLite's extended result codes and PostgreSQL's SQLSTATEs, by the failure they mean. */
const CODES: [RegExp, StoreFailure][] = [
  [/^SQLITE_CONSTRAINT_(UNIQUE|PRIMARYKEY)$|^23505$/, "unique"],
  [/^SQLITE_CONSTRAINT_FOREIGNKEY$|^23503$/, "foreign_key"],
  [/^SQLITE_CONSTRAINT|^23/, "constraint"],
  [/^SQLITE_FULL$|^53100$/, "full"],
];

/** The store's own error under drizzle's wrapper (or the error itself). */
function rootOf(e: unknown): unknown {
  let err = e;
  for (let i = 0; i < 3 && err instanceof Error && err.cause !== undefined && /^Failed query/.test(err.message); i++)
    err = err.cause;
  return err;
}

/** The dialect's code of a store error: SQLite's `code`, or PostgreSQL's SQLSTATE (`errno`); "" for anything else. */
export function storeErrorCode(e: unknown): string {
  const err = rootOf(e) as { code?: unknown; errno?: unknown } | null | undefined;
  const code = String(err?.code ?? "");
  if (code.startsWith("SQLITE_")) return code;
  return typeof err?.errno === "string" && /^[0-9A-Z]{5}$/.test(err.errno) ? err.errno : code;
}

/**
 * Which store failure `e` is, on either dialect, or undefined when it is none of them.
 * @example storeFailure(await db.insert(projects).values(taken).catch((e) => e)) // → "unique"
 */
export function storeFailure(e: unknown): StoreFailure | undefined {
  const code = storeErrorCode(e);
  const found = CODES.find(([re]) => re.test(code))?.[1];
  if (found) return found;
  const msg = String((rootOf(e) as Error | undefined)?.message ?? "");
  if (/UNIQUE constraint failed/.test(msg)) return "unique";
  if (/FOREIGN KEY constraint failed/.test(msg)) return "foreign_key";
  if (/database or disk is full/.test(msg)) return "full";
  return undefined;
}
