/** Numbers, sizes and times as people read them. */

/** Bytes as e.g. "23.5 GiB". */
export function bytes(n: number | undefined): string {
  if (n === undefined || !Number.isFinite(n)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${n.toFixed(i && n < 10 ? 1 : 0)} ${units[i]}`;
}

/** MiB as GiB with one decimal, e.g. "14.4 GiB". */
export const mib = (n: number) => `${(n / 1024).toFixed(1)} GiB`;

/** A count with thousands separators. */
export const count = (n: number | undefined) => (n ?? 0).toLocaleString("en-US");

/**
 * The noun for a count: `word` for exactly one, else `many` (`word` + "s" unless given), for
 * markup that sets the number apart (`<strong>3</strong> requests`).
 * @example noun(1, "request") // → "request"
 */
export const noun = (n: number | null | undefined, word: string, many = `${word}s`) => ((n ?? 0) === 1 ? word : many);

/**
 * A count and its noun, singular for exactly one: every count text of the dashboard says it so.
 * @example plural(1, "request") // → "1 request"; plural(1024, "token") // → "1,024 tokens"; plural(2, "entry", "entries") // → "2 entries"
 */
export const plural = (n: number | null | undefined, word: string, many?: string) =>
  `${count(n ?? 0)} ${noun(n, word, many)}`;

/** An ISO time as "3 min ago" / "in 5 min", with the exact time in a tooltip by the caller. */
export function ago(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return "never";
  const s = Math.round((Date.parse(iso) - now) / 1000);
  const a = Math.abs(s);
  const text =
    a < 60
      ? `${a} s`
      : a < 3600
        ? `${Math.round(a / 60)} min`
        : a < 86400
          ? `${Math.round(a / 3600)} h`
          : `${Math.round(a / 86400)} d`;
  if (a < 5) return "just now";
  return s < 0 ? `${text} ago` : `in ${text}`;
}

/** An ISO time in the reader's locale. */
export const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : "–");

/** A span of seconds as e.g. "45 s", "3 min 5 s", "2 h 10 min". */
export function duration(seconds: number | null | undefined): string {
  if (seconds === null || seconds === undefined || !Number.isFinite(seconds)) return "–";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s} s`;
  if (s < 3600) return `${Math.floor(s / 60)} min${s % 60 ? ` ${s % 60} s` : ""}`;
  if (s < 86400)
    return `${Math.floor(s / 3600)} h${Math.floor((s % 3600) / 60) ? ` ${Math.floor((s % 3600) / 60)} min` : ""}`;
  return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
}

/** How long ago an ISO time was, as a duration ("3 min 5 s"). */
export const since = (iso: string | null | undefined, now = Date.now()) =>
  iso ? duration((now - Date.parse(iso)) / 1000) : "–";

/** A transfer rate as e.g. "5.1 MiB/s". */
export const rate = (bytesPerSecond: number) => `${bytes(bytesPerSecond)}/s`;

/** A parameter count as e.g. "494M" or "7.6B". */
export function params(n: number | null | undefined): string {
  if (!n) return "–";
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)}B`;
  if (n >= 1e6) return `${Math.round(n / 1e6)}M`;
  return n >= 1e3 ? `${Math.round(n / 1e3)}K` : String(n);
}
