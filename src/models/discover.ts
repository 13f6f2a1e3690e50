import { closeSync, existsSync, openSync, readdirSync, readFileSync, readSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { basename, join, relative } from "node:path";

/** A GGUF model already on this machine, found where other tools keep theirs. */
export interface LocalModel {
  path: string;
  name: string;
  size_bytes: number;
  origin: "huggingface-cache" | "lmstudio" | "llama.cpp-cache" | "ollama";
  /** The quantisation named in the file name, when it has one. */
  quant: string | null;
}

/** Most files a scan reports, and how deep it looks. */
const MAX_RESULTS = 500;
const MAX_DEPTH = 8;

const QUANT = /(?:^|[-_.])((?:I?Q\d(?:_[A-Z0-9]+)*)|F16|F32|BF16)(?=[-_.]|$)/i;

/** The quantisation tag in a GGUF file name (`Model-Q4_K_M.gguf` → `Q4_K_M`). */
export function quantOf(file: string): string | null {
  return QUANT.exec(basename(file).replace(/\.gguf$/i, ""))?.[1].toUpperCase() ?? null;
}

/** GGUF files under `root` (symlinks followed, split parts after the first and mmproj files skipped). */
function ggufUnder(root: string, depth = 0, out: string[] = []): string[] {
  if (depth > MAX_DEPTH || out.length >= MAX_RESULTS || !existsSync(root)) return out;
  let entries: string[] = [];
  try {
    entries = readdirSync(root);
  } catch {
    return out;
  }
  for (const name of entries) {
    const p = join(root, name);
    const st = statSync(p, { throwIfNoEntry: false });
    if (!st) continue;
    if (st.isDirectory()) ggufUnder(p, depth + 1, out);
    else if (/\.gguf$/i.test(name) && !/mmproj/i.test(name) && !/-0000[2-9]-of-|-000[1-9]\d-of-/.test(name))
      out.push(p);
    if (out.length >= MAX_RESULTS) break;
  }
  return out;
}

/** Models Ollama keeps: each manifest's model layer is a GGUF blob. */
function ollamaModels(root: string): LocalModel[] {
  const manifests = join(root, "manifests");
  if (!existsSync(manifests)) return [];
  const out: LocalModel[] = [];
  const walk = (dir: string, depth: number) => {
    for (const name of readdirSync(dir)) {
      const p = join(dir, name);
      const st = statSync(p, { throwIfNoEntry: false });
      if (st?.isDirectory() && depth < 4) walk(p, depth + 1);
      else if (st?.isFile()) {
        try {
          const m = JSON.parse(readFileSync(p, "utf8")) as {
            layers?: { mediaType: string; digest: string; size: number }[];
          };
          const layer = m.layers?.find((l) => l.mediaType === "application/vnd.ollama.image.model");
          const blob = layer && join(root, "blobs", layer.digest.replace(":", "-"));
          if (!blob || !existsSync(blob)) continue;
          const parts = relative(manifests, p).split("/"); // registry/namespace/model/tag
          const model = parts.slice(-2, -1)[0];
          const ns = parts.slice(-3, -2)[0];
          out.push({
            path: blob,
            name: `${ns && ns !== "library" ? `${ns}/` : ""}${model}:${parts.at(-1)}`,
            size_bytes: statSync(blob).size,
            origin: "ollama",
            quant: null,
          });
        } catch {}
      }
    }
  };
  walk(manifests, 0);
  return out;
}

/**
 * GGUF models other tools already downloaded on this machine, so a first run can offer them: the
 * Hugging Face cache, LM Studio's models folder, llama.cpp's `-hf` cache and Ollama's blobs.
 * Locations follow each tool's own settings (HF_HUB_CACHE/HF_HOME, LLAMA_CACHE, OLLAMA_MODELS).
 */
export function discoverLocalModels(env: Record<string, string | undefined>): LocalModel[] {
  const home = env.HOME || homedir();
  const cache = env.XDG_CACHE_HOME || join(home, ".cache");
  const hfHub = env.HF_HUB_CACHE || join(env.HF_HOME || join(cache, "huggingface"), "hub");
  const found: LocalModel[] = [];
  const add = (origin: LocalModel["origin"], root: string, name: (p: string) => string) => {
    for (const p of ggufUnder(root))
      found.push({ path: p, name: name(p), size_bytes: statSync(p).size, origin, quant: quantOf(p) });
  };
  add("huggingface-cache", hfHub, (p) => {
    const repo = /models--([^/]+)--([^/]+)\//.exec(p);
    return repo ? `${repo[1]}/${repo[2]}/${basename(p)}` : basename(p);
  });
  for (const root of [join(home, ".lmstudio", "models"), join(cache, "lm-studio", "models")])
    add("lmstudio", root, (p) => relative(root, p));
  add("llama.cpp-cache", env.LLAMA_CACHE || join(cache, "llama.cpp"), (p) => basename(p));
  found.push(...ollamaModels(env.OLLAMA_MODELS || join(home, ".ollama", "models")));
  const seen = new Set<string>();
  return found.filter((m) => !seen.has(m.path) && seen.add(m.path)).slice(0, MAX_RESULTS);
}

/** What is at a path on this machine, for forms that name a model file before a workload is saved. */
export interface LocalFile {
  path: string;
  kind: "file" | "folder" | null;
  size_bytes: number | null;
  /** Whether the file starts with the GGUF magic bytes. */
  gguf: boolean;
}

/** Looks at one path (following links): what it is, its size, and whether it is a GGUF file. */
export function checkLocalFile(path: string): LocalFile {
  const st = statSync(path, { throwIfNoEntry: false });
  if (!st) return { path, kind: null, size_bytes: null, gguf: false };
  if (st.isDirectory()) return { path, kind: "folder", size_bytes: null, gguf: false };
  let gguf = false;
  try {
    const fd = openSync(path, "r");
    const head = Buffer.alloc(4);
    readSync(fd, head, 0, 4, 0);
    closeSync(fd);
    gguf = head.toString("latin1") === "GGUF";
  } catch {}
  return { path, kind: "file", size_bytes: st.size, gguf };
}
