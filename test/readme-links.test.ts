/**
 * The README cites only files a clone of this repository has: every relative Markdown link and
 * every inline `path` that names a place in the repository (a top-level folder or file of it, or a
 * path going out of it with `../`) exists. A path with a placeholder (`test/<name>.test.ts`,
 * `test/**` globs) must at least have its folder.
 */
import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { repoRoot } from "./helpers/proc";

const readme = readFileSync(join(repoRoot, "README.md"), "utf8");

/** The README's text outside fenced code blocks, with line numbers. */
function proseLines(text: string): { line: number; text: string }[] {
  let fenced = false;
  return text.split("\n").flatMap((t, i) => {
    if (t.trimStart().startsWith("```")) {
      fenced = !fenced;
      return [];
    }
    return fenced ? [] : [{ line: i + 1, text: t }];
  });
}

/** Top-level names of the repository (its folders and files), which a cited repo path starts with. */
const TOP = new Set(readdirSync(repoRoot).filter((n) => !n.startsWith(".") && n !== "node_modules" && n !== "dist"));

/** The part of a path before its first placeholder or glob (`test/suites/<name>.ts` → `test/suites/`). */
const fixedPart = (path: string) => path.slice(0, path.search(/[<*{…]|$/)).replace(/[^/]*$/, "");

/** Paths the README cites: relative link targets and inline code that names a repository path. */
function citedPaths(): { line: number; path: string }[] {
  const out: { line: number; path: string }[] = [];
  for (const { line, text } of proseLines(readme)) {
    for (const m of text.matchAll(/\]\(([^)\s]+)\)/g)) {
      const target = m[1].split("#")[0];
      if (target && !/^[a-z]+:/i.test(target)) out.push({ line, path: target });
    }
    for (const m of text.matchAll(/`([^`\s]+)`/g)) {
      const span = m[1];
      const first = span.replace(/^\.\//, "").split("/")[0];
      if (
        span.startsWith("../") ||
        (span.includes("/") && TOP.has(first)) ||
        (TOP.has(span) && !span.startsWith("-")) ||
        /^[\w.-]+\.md$/.test(span)
      )
        out.push({ line, path: span });
    }
  }
  return out;
}

describe("README citations", () => {
  test("finds the paths it cites (the check is not empty)", () => {
    const paths = citedPaths().map((c) => c.path);
    expect(paths).toContain("docs/service-contract.md");
    expect(paths).toContain("test/kubernetes.test.ts");
  });

  test("every file or folder the README cites exists in the repository", () => {
    const missing = citedPaths().filter(({ path }) => {
      if (path.startsWith("../") || path.startsWith("/")) return true; // outside the repository: a clone does not have it
      const fixed = /[<*{…]/.test(path) ? fixedPart(path) : path;
      return !existsSync(join(repoRoot, fixed));
    });
    expect(missing.map(({ line, path }) => `README.md:${line}: ${path}`)).toEqual([]);
  });

  test("the service contract the README points at is in docs/", () => {
    expect(readme.includes("(docs/service-contract.md)")).toBe(true);
    expect(readFileSync(join(repoRoot, "docs/service-contract.md"), "utf8")).toStartWith(
      "# Inference Platform Service",
    );
  });
});
