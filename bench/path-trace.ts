/**
 * Preloaded by bench/path.ts's entry count (not part of the test suite): loads every file of `src/` and
 * `agent/` with a call at the start of each function body that notes the function's file and the
 * files on the stack under it, so bench/path.ts can count, for one request, how many times each
 * folder is entered from outside it. It finds a function body by the `{` that ends a line of Bun's
 * printed JavaScript: an arrow whose body is an expression (`(r) => calls.get(r)`) is not marked,
 * so a call of one is not seen.
 */
import { plugin } from "bun";
import { relative } from "node:path";
import { REPO_ROOT } from "./lib";

/** One entry into a function: its file, and the files of src/ and agent/ on the stack under it, nearest first. */
export interface Entry {
  file: string;
  callers: string[];
}
const state = globalThis as unknown as { __pathEntries?: Entry[] | null; __pathEnter?: (file: string) => void };
state.__pathEntries = null;
Error.stackTraceLimit = 60;
const ours = (file: string) => file.startsWith("src/") || file.startsWith("agent/");
state.__pathEnter = (file: string) => {
  const entries = state.__pathEntries;
  if (!entries) return;
  const stack = (new Error().stack ?? "").split("\n");
  const callers: string[] = [];
  for (const frame of stack.slice(3)) {
    const m = /\(?(\/[^():]+):\d+:\d+\)?$/.exec(frame.trim());
    const f = m ? relative(REPO_ROOT, m[1]) : "";
    if (ours(f) && callers.at(-1) !== f) callers.push(f);
  }
  entries.push({ file, callers });
};

/** A line of Bun's printed JavaScript that opens a function body. */
const OPENS =
  /(?:=>|\bfunction\b\*?\s*[\w$]*\s*\(.*\)|^\s*(?:static\s+)?(?:async\s+)?(?:get\s+|set\s+)?\*?\s*(#?[\w$]+)\s*\(.*\))\s*\{$/;
const NOT_METHODS = new Set(["if", "for", "while", "switch", "catch", "with", "return", "await", "new", "typeof"]);
const transpiler = new Bun.Transpiler({ loader: "ts" });

plugin({
  name: "path-trace",
  setup(build) {
    build.onLoad({ filter: /\/(src|agent)\/.*\.ts$/ }, async ({ path }) => {
      const file = relative(REPO_ROOT, path);
      // Bun's transpiler drops import attributes (`with { type: "text" }`): such a file is left as it is.
      if (!ours(file) || file.startsWith("src/db/migrations"))
        return { contents: await Bun.file(path).text(), loader: "ts" };
      const js = transpiler.transformSync(await Bun.file(path).text());
      const call = `globalThis.__pathEnter(${JSON.stringify(file)});`;
      // A line that starts inside a template literal (an odd number of backticks before it) is text.
      let inTemplate = false;
      const out = js
        .split("\n")
        .map((line) => {
          const was = inTemplate;
          inTemplate = (line.replace(/\\./g, "").split("`").length - 1) % 2 === 1 ? !inTemplate : inTemplate;
          if (was || inTemplate) return line;
          const m = OPENS.exec(line);
          if (!m || (m[1] && NOT_METHODS.has(m[1]))) return line;
          return `${line}${call}`;
        })
        .join("\n");
      return { contents: out, loader: "js" };
    });
  },
});
