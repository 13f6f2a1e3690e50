/** Plain-text tables for the command line: columns padded to their widest cell. */

/**
 * Rows as a table with a header line; `(none)` when there are no rows.
 * @example table([{ id: "p1", slug: "edge" }], ["id", "slug"]) // → "id  slug\np1  edge"
 */
export function table(rows: Record<string, unknown>[], cols: string[]): string {
  if (rows.length === 0) return "(none)";
  return aligned([cols, ...rows.map((r) => cols.map((c) => String(r[c] ?? "")))]);
}

/**
 * Lines of cells with every column padded to its widest cell (two spaces between columns).
 * @example aligned([["name", "Tiny"], ["status", "ready"]]) // → "name    Tiny\nstatus  ready"
 */
export function aligned(lines: string[][]): string {
  const widths: number[] = [];
  for (const cells of lines) cells.forEach((c, i) => (widths[i] = Math.max(widths[i] ?? 0, c.length)));
  return lines
    .map((cells) =>
      cells
        .map((c, i) => c.padEnd(widths[i]))
        .join("  ")
        .trimEnd(),
    )
    .join("\n");
}
