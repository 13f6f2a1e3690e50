import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { gguf } from "@huggingface/gguf";
import { infoFromConfig, infoFromGguf, type ModelInfo } from "./fit";

/** The parts of a split GGUF (`x-00001-of-00003.gguf` → all three, when present), else just the file. */
export function ggufParts(entry: string): string[] {
  const m = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/i.exec(basename(entry));
  if (!m) return [entry];
  const n = Number(m[3]);
  return Array.from({ length: n }, (_, i) =>
    join(dirname(entry), `${m[1]}-${String(i + 1).padStart(5, "0")}-of-${m[3]}.gguf`),
  ).filter((p) => existsSync(p));
}

/** Files of a folder, recursively (symlinks followed: a Hugging Face snapshot links into blobs). */
function filesUnder(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    const st = statSync(p, { throwIfNoEntry: false });
    if (!st) return [];
    return st.isDirectory() ? filesUnder(p) : [p];
  });
}

/**
 * Reads what a model on disk is: GGUF metadata and tensor shapes (every part of a split file), or
 * a safetensors folder's `config.json` with the weights' total size. Null when neither applies.
 */
export async function inspectModel(entry: string): Promise<ModelInfo | null> {
  const st = statSync(entry, { throwIfNoEntry: false });
  if (!st) return null;
  if (st.isFile() && entry.toLowerCase().endsWith(".gguf")) {
    const parts = ggufParts(entry);
    const heads = await Promise.all(parts.map((p) => gguf(p, { allowLocalFile: true })));
    const bytes = parts.reduce((s, p) => s + statSync(p).size, 0);
    return infoFromGguf(
      heads[0].metadata as Record<string, unknown>,
      heads.flatMap((h) => h.tensorInfos),
      bytes,
    );
  }
  if (st.isDirectory() && existsSync(join(entry, "config.json"))) {
    const config = JSON.parse(readFileSync(join(entry, "config.json"), "utf8")) as Record<string, unknown>;
    const weights = filesUnder(entry)
      .filter((p) => p.endsWith(".safetensors"))
      .reduce((s, p) => s + statSync(p).size, 0);
    return infoFromConfig(config, weights);
  }
  return null;
}

const cache = new Map<string, { mtimeMs: number; info: ModelInfo | null }>();

/** `inspectModel`, remembered per path until the file changes (placement asks often). */
export async function inspectCached(entry: string): Promise<ModelInfo | null> {
  const st = statSync(entry, { throwIfNoEntry: false });
  if (!st) return null;
  const hit = cache.get(entry);
  if (hit && hit.mtimeMs === st.mtimeMs) return hit.info;
  const info = await inspectModel(entry).catch(() => null);
  cache.set(entry, { mtimeMs: st.mtimeMs, info });
  return info;
}
