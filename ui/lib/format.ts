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

/** An ISO time as "3 min ago" / "in 5 min", with the exact time in a tooltip by the caller. */
export function ago(iso: string | null | undefined, now = Date.now()): string {
  if (!iso) return "never";
  const s = Math.round((Date.parse(iso) - now) / 1000);
  const a = Math.abs(s);
  const text = a < 60 ? `${a} s` : a < 3600 ? `${Math.round(a / 60)} min` : a < 86400 ? `${Math.round(a / 3600)} h` : `${Math.round(a / 86400)} d`;
  if (a < 5) return "just now";
  return s < 0 ? `${text} ago` : `in ${text}`;
}

/** An ISO time in the reader's locale. */
export const when = (iso: string | null | undefined) => (iso ? new Date(iso).toLocaleString() : "–");
