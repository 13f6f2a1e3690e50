/**
 * Whether version `v` (`0.11.0`, `0.5.3rc1`, `b6620`) is at least `min`, comparing the numbers in
 * order; an unknown version (undefined) counts as the newest.
 * @example atLeast("0.10.2", "0.9.0") // → true
 */
export function atLeast(v: string | undefined, min: string): boolean {
  if (v === undefined) return true;
  const a = v
    .replace(/^[^\d]*/, "")
    .split(/[.+-]|rc/)
    .map((x) => Number.parseInt(x, 10) || 0);
  const b = min.split(".").map((x) => Number.parseInt(x, 10) || 0);
  for (let i = 0; i < Math.max(a.length, b.length); i++)
    if ((a[i] ?? 0) !== (b[i] ?? 0)) return (a[i] ?? 0) > (b[i] ?? 0);
  return true;
}
