/**
 * Builds the dashboard (ui/index.html and everything it imports) with Bun's HTML bundler, in
 * memory: `index.html` plus content-hashed files under `/assets/`. The source-mode handler serves
 * this directly; `build/build.ts` embeds it in the binary through `uiModules`.
 */
import { realpathSync } from "node:fs";
import { join } from "node:path";
import type { BunPlugin } from "bun";
import { engineFaces } from "../../agent/engines";

/** URL prefix of the hashed, immutable dashboard files. */
export const ASSET_PREFIX = "/assets/";

/** One built file: its URL path (`/index.html` or `/assets/<name>-<hash>.<ext>`), bytes and type. */
export interface UiFile {
  url: string;
  bytes: Uint8Array<ArrayBuffer>;
  type: string;
}

/**
 * The module `inferd:engines` the dashboard imports: every engine's label, hint and starting command
 * from its descriptor (agent/engines), so a new engine shows in the workload form without a UI edit.
 */
const enginesModule: BunPlugin = {
  name: "inferd-engines",
  setup(build) {
    build.onResolve({ filter: /^inferd:engines$/ }, () => ({ path: "engines", namespace: "inferd" }));
    build.onLoad({ filter: /.*/, namespace: "inferd" }, () => ({
      contents: `export const ENGINE_FACES = ${JSON.stringify(engineFaces())};`,
      loader: "js",
    }));
  },
};

/** Bundles `<root>/ui/index.html` for browsers (minified, code-split, no source maps). */
export async function buildUi(root: string): Promise<UiFile[]> {
  const out = await Bun.build({
    entrypoints: [join(root, "ui/index.html")],
    target: "browser",
    publicPath: ASSET_PREFIX,
    naming: { entry: "[name]-[hash].[ext]", chunk: "[name]-[hash].[ext]", asset: "[name]-[hash].[ext]" },
    splitting: true,
    minify: true,
    sourcemap: "none",
    define: { "process.env.NODE_ENV": JSON.stringify("production") },
    plugins: [enginesModule],
    throw: true,
  });
  const files: UiFile[] = [];
  for (const o of out.outputs) {
    const name = o.path.replace(/^\.\//, "");
    const url = name.endsWith(".html") ? "/index.html" : ASSET_PREFIX + name;
    files.push({ url, bytes: new Uint8Array(await o.arrayBuffer()), type: o.type });
  }
  if (!files.some((f) => f.url === "/index.html")) throw new Error("the dashboard build produced no index.html");
  return files;
}

/** Where the in-memory built files pretend to live while compiling (never written there). */
export const UI_EMBED_DIR = "ui/.embedded";

/**
 * The `files` option of `Bun.build` that replaces src/ui/embedded.ts with a module embedding every
 * built dashboard file (each an in-memory file imported `with { type: "file" }`), so nothing is
 * written into the source tree. Keys are real paths, as the bundler matches resolved imports.
 */
export function uiModules(root: string, files: UiFile[]): Record<string, string | Uint8Array> {
  root = realpathSync(root);
  const modules: Record<string, string | Uint8Array> = {};
  const lines: string[] = [];
  const entries: string[] = [];
  files.forEach((f, i) => {
    // A neutral extension keeps the bundler from treating the copy as code or HTML to bundle again.
    const file = join(root, UI_EMBED_DIR, `${i}-${f.url.split("/").pop()}.bin`);
    modules[file] = f.bytes;
    lines.push(`import f${i} from ${JSON.stringify(file)} with { type: "file" };`);
    entries.push(`  ${JSON.stringify(f.url)}: { path: f${i}, type: ${JSON.stringify(f.type)} },`);
  });
  const type = "{ files?: Record<string, { path: string; type: string }> }";
  modules[join(root, "src/ui/embedded.ts")] =
    `${lines.join("\n")}\nexport const embeddedUi: ${type} = { files: {\n${entries.join("\n")}\n} };\n`;
  return modules;
}
