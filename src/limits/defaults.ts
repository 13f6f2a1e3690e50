/**
 * Default limits for API keys (`--default-key-limits rpm=60,max_concurrent=4`): each applies to a key
 * that has no limit of that kind of its own, so an operator can cap every key at once and still give
 * one key more. Pure: src/config.ts checks the setting with it, the limiter applies it.
 */
/** The limits a default can set, by the names keys' limits use (`PATCH /admin/keys/:id`). */
const NAMES = {
  rpm: "rpm",
  tpm: "tpm",
  max_concurrent: "maxConcurrent",
  tokens_per_day: "tokensPerDay",
  tokens_per_month: "tokensPerMonth",
} as const;

/** The limit fields (made once: the limiter applies the defaults to each key record it sees). */
const FIELDS = Object.values(NAMES);

/** A key's own limits by the limiter's field names (null: none of that kind). */
type OwnLimits = { [F in (typeof NAMES)[keyof typeof NAMES]]: number | null };

/** Default key limits by the limiter's field names (absent: none). */
export type KeyLimitDefaults = Partial<OwnLimits>;

/**
 * Parses `name=N` items (the setting's list); throws with a message naming what is wrong.
 * @example parseKeyLimits(["rpm=60", "max_concurrent=4"]) // → { rpm: 60, maxConcurrent: 4 }
 */
export function parseKeyLimits(items: string[]): KeyLimitDefaults {
  const out: KeyLimitDefaults = {};
  for (const item of items) {
    const [name, value, extra] = item.split("=").map((s) => s.trim());
    const field = NAMES[name as keyof typeof NAMES];
    if (!field || extra !== undefined)
      throw new Error(`"${item}" is not a limit: write name=N with name one of ${Object.keys(NAMES).join(", ")}`);
    const n = Number(value);
    if (!Number.isInteger(n) || n < 1 || n > 1_000_000_000)
      throw new Error(`${name} must be a whole number from 1 to 1000000000, got "${value ?? ""}"`);
    out[field] = n;
  }
  return out;
}

/** Why the items cannot be used, or null when they can (the setting's check). */
export function keyLimitsProblem(items: string[]): string | null {
  try {
    parseKeyLimits(items);
    return null;
  } catch (e) {
    return (e as Error).message;
  }
}

/**
 * A key with the defaults filled in where it has no limit of its own.
 * @example withDefaults({ …key, rpm: null }, { rpm: 60 }).rpm // → 60
 */
export function withDefaults<K extends OwnLimits>(key: K, defaults: KeyLimitDefaults): K {
  let out = key;
  for (const field of FIELDS) {
    const d = defaults[field];
    if (d !== undefined && key[field] === null) out = { ...out, [field]: d };
  }
  return out;
}

/** Default key limits by the names keys' limits use (`rpm`, `max_concurrent`…; absent: none). */
export type KeyLimitDefaultsView = Partial<Record<keyof typeof NAMES, number>>;

/**
 * The default key limits in force by the names keys' limits use, for `GET /admin/info` (the Keys page
 * shows what a key without a limit of its own gets). Items that do not parse count as none, as in the limiter.
 * @example defaultKeyLimitsView(["rpm=100"]) // → { rpm: 100 }
 */
export function defaultKeyLimitsView(items: string[]): KeyLimitDefaultsView {
  if (keyLimitsProblem(items)) return {};
  const parsed = parseKeyLimits(items);
  const out: KeyLimitDefaultsView = {};
  for (const [name, field] of Object.entries(NAMES) as [keyof typeof NAMES, keyof KeyLimitDefaults][])
    if (parsed[field] !== undefined) out[name] = parsed[field]!;
  return out;
}
