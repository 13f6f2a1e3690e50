import { randomBytes } from "node:crypto";

/**
 * A new server-assigned id: a short type prefix and 20 random base32 characters. The underscore
 * keeps ids apart from slugs (which never contain one), so routes can take either.
 * @example newId("wl") // → "wl_k3j9…"
 */
export function newId(prefix: string): string {
  const alphabet = "abcdefghijklmnopqrstuvwxyz234567";
  const bytes = randomBytes(20);
  let out = "";
  for (const b of bytes) out += alphabet[b & 31];
  return `${prefix}_${out}`;
}

/** A secret: the prefix plus 32 random bytes in base64url (43 characters). */
export function newSecret(prefix: string): string {
  return prefix + randomBytes(32).toString("base64url");
}

/** Hex SHA-256, used to store secrets (which carry 256 random bits, so no slow hash is needed). */
export function sha256(text: string): string {
  return Bun.SHA256.hash(text, "hex") as string;
}

/**
 * Constant-time string comparison: every code unit is compared whatever the first difference (only
 * the length may differ in time), with no copies made (the data plane runs it on every request).
 */
export function safeEqual(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}

/** Slugs: lower-case letters, digits and inner hyphens, 1 to 63 characters. */
export const SLUG_RE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * Derives a slug from a human name.
 * @example slugify("My Llama 3 (8B)!") // → "my-llama-3-8b"
 */
export function slugify(name: string): string {
  const s = name
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 63)
    .replace(/-+$/g, "");
  return s || "x";
}

/** The current time as an ISO 8601 UTC timestamp. */
export const nowIso = () => new Date().toISOString();

/** The UTC day last asked for, and where it starts and ends (ms): one day's requests share one string. */
let day = { start: 0, end: -1, text: "" };

/**
 * The UTC day of a time as `YYYY-MM-DD` (a usage row's and a quota's day), made once per day
 * rather than once per request.
 * @example utcDay(Date.UTC(2026, 10, 28, 23, 59)) // → "2026-11-28"
 */
export function utcDay(ms: number = Date.now()): string {
  if (ms < day.start || ms >= day.end) {
    const d = new Date(ms);
    const start = Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate());
    day = { start, end: start + 86_400_000, text: d.toISOString().slice(0, 10) };
  }
  return day.text;
}
