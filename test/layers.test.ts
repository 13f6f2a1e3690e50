/**
 * The boundary test: every import of `src/`, `agent/` and `ui/` (`import`, `import type`,
 * `export … from`, a literal `import()`) against the layering of `src/layers.ts`. It names each
 * import that runs up (file → file), each room of the house the layering leaves out, and each
 * allowed upward import that no longer exists.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { dirname, join, normalize } from "node:path";
import { LAYERS, mayImport, roomOf, UPWARD } from "../src/layers";

const ROOT = join(import.meta.dir, "..");
const TOPS = ["src", "agent", "ui"];

/** One import: the importing file and the imported one, both from the repository root. */
interface Edge {
  from: string;
  to: string;
}

/** The TypeScript files under the source folders. */
function sourceFiles(): string[] {
  return TOPS.flatMap((top) => [...new Bun.Glob(`${top}/**/*.{ts,tsx}`).scanSync({ cwd: ROOT })]).filter(
    (f) => !f.includes("node_modules"),
  );
}

/** Module names a file imports from, by any of the import forms. */
function specifiers(text: string): string[] {
  const found: string[] = [];
  const forms = [
    /\b(?:import|export)\s+(?:type\s+)?[^;'"`]*?\bfrom\s*["']([^"']+)["']/g,
    /\bimport\s*["']([^"']+)["']/g,
    /\bimport\(\s*["']([^"']+)["']\s*\)/g,
  ];
  for (const form of forms) for (const m of text.matchAll(form)) found.push(m[1]!);
  return found;
}

/** The file a relative module name points at (with `.ts`, `.tsx` or `/index.ts` tried), or the name itself. */
function resolve(from: string, spec: string): string {
  const base = normalize(join(dirname(from), spec));
  for (const candidate of [base, `${base}.ts`, `${base}.tsx`, `${base}/index.ts`]) {
    const abs = join(ROOT, candidate);
    if (existsSync(abs) && statSync(abs).isFile()) return candidate;
  }
  return base;
}

/** Every import from one file of the house to another. */
function edges(): Edge[] {
  const out: Edge[] = [];
  for (const from of sourceFiles()) {
    for (const spec of specifiers(readFileSync(join(ROOT, from), "utf8"))) {
      if (!spec.startsWith(".")) continue;
      const to = resolve(from, spec);
      if (TOPS.some((top) => to.startsWith(`${top}/`))) out.push({ from, to });
    }
  }
  return out;
}

/** Whether an import is one of the allowed upward ones. */
const allowed = (e: Edge) => UPWARD.some((u) => u.from === e.from && u.to === e.to);

describe("the layering (src/layers.ts)", () => {
  const all = edges();

  test("names every folder and top-level file of src/, and agent/ and ui/", () => {
    const present = [
      ...readdirSync(join(ROOT, "src")).map((name) => `src/${name}`),
      ...TOPS.slice(1).filter((top) => existsSync(join(ROOT, top))),
    ];
    const listed = LAYERS.flatMap((l) => l.rooms);
    expect(present.filter((room) => !listed.includes(room))).toEqual([]);
    expect(listed.filter((room) => !existsSync(join(ROOT, room)))).toEqual([]);
    expect(listed.filter((room, i) => listed.indexOf(room) !== i)).toEqual([]);
  });

  test("no import runs up, except the allowed ones", () => {
    const broken = all
      .filter((e) => !mayImport(roomOf(e.from)!, roomOf(e.to)!) && !allowed(e))
      .map((e) => `${e.from} → ${e.to} (${roomOf(e.from)} may not import ${roomOf(e.to)})`);
    expect(broken).toEqual([]);
  });

  test("every allowed upward import still exists and still runs up", () => {
    const stale = UPWARD.filter(
      (u) => !all.some((e) => e.from === u.from && e.to === u.to) || mayImport(roomOf(u.from)!, roomOf(u.to)!),
    );
    expect(stale).toEqual([]);
  });

  test("the checker reads every import form", () => {
    const text = `import a from "./a";\nimport type { B } from "../b";\nexport { c } from "./c";\nexport * from "./d";\nimport "./e";\nconst f = await import("./f");\nimport {\n  g,\n} from "./g";`;
    expect(specifiers(text).sort()).toEqual(["../b", "./a", "./c", "./d", "./e", "./f", "./g"]);
  });
});
