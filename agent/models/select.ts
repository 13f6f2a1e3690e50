/**
 * Which files of a repo a pull takes: the GGUF of a quantisation tag (as llama.cpp's `-hf` picks
 * it), all parts of a split GGUF, and the files of a snapshot a runtime reads. Pure functions over
 * the repo's file list.
 */

/** The part of a listed file these functions look at. */
export interface NamedFile {
  path: string;
}

/** How a GGUF file name splits: `<prefix>-00001-of-00003.gguf` → prefix, index 1, count 3; tag from the prefix. */
export interface GgufName {
  prefix: string;
  /** The quantisation tag at the end of the prefix (`Q4_K_M`), upper case; "" when there is none. */
  tag: string;
  index: number;
  count: number;
}

/**
 * Splits a GGUF path into prefix, tag and split position (null when it is not a `.gguf`).
 * @example ggufName("Q/Model-Q6_K-00002-of-00003.gguf") // → { prefix: "Q/Model-Q6_K", tag: "Q6_K", index: 2, count: 3 }
 */
export function ggufName(path: string): GgufName | null {
  if (!path.toLowerCase().endsWith(".gguf")) return null;
  let prefix = path.slice(0, -5);
  let index = 1;
  let count = 1;
  const split = /^(.+)-(\d{5})-of-(\d{5})$/i.exec(prefix);
  if (split) {
    prefix = split[1];
    index = Number(split[2]);
    count = Number(split[3]);
  }
  const tag = /[-.]([A-Za-z0-9_]+)$/.exec(prefix)?.[1]?.toUpperCase() ?? "";
  return { prefix, tag, index, count };
}

/** Files beside a model that llama.cpp never loads as the model: projectors, imatrix data, draft heads. */
const SIDECAR = /mmproj|imatrix|mtp-|eagle3-|dflash-|dspark-/i;

/**
 * Whether a path is a GGUF model (not an `mmproj` projector or other sidecar).
 * @example isModelGguf("mmproj-Model-F16.gguf") // → false
 */
export function isModelGguf(path: string): boolean {
  const name = path.slice(path.lastIndexOf("/") + 1);
  return ggufName(path) !== null && !SIDECAR.test(name);
}

/**
 * Every file of the split GGUF `file` belongs to (same prefix, same part count), in part order;
 * `[file]` when it is not split.
 * @example splitParts(files, { path: "M-Q6_K-00001-of-00002.gguf" }) // → the two parts
 */
export function splitParts<F extends NamedFile>(files: F[], file: F): F[] {
  const n = ggufName(file.path);
  if (!n || n.count <= 1) return [file];
  const parts = files.filter((f) => {
    const g = ggufName(f.path);
    return g !== null && g.count === n.count && g.prefix === n.prefix;
  });
  return parts.sort((a, b) => ggufName(a.path)!.index - ggufName(b.path)!.index);
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** The first model GGUF (first part when split) matching `pattern`, in listing order. */
function firstModel<F extends NamedFile>(files: F[], pattern?: RegExp): F | undefined {
  return files.find((f) => isModelGguf(f.path) && ggufName(f.path)!.index === 1 && (!pattern || pattern.test(f.path)));
}

/**
 * The GGUF a quantisation tag names, as llama.cpp does: the first model GGUF (never an `mmproj`)
 * whose name carries the tag (case-insensitive) followed by `.` or `-`; split files give their first
 * part. With `defaulted` (no tag written) it tries Q4_K_M, then Q8_0, then takes the first model
 * GGUF. Undefined when nothing matches.
 * @example pickQuant(files, "q8_0") // → { path: "Model-Q8_0.gguf", … }
 */
export function pickQuant<F extends NamedFile>(files: F[], quant: string, defaulted = false): F | undefined {
  const tags = defaulted ? [quant, "Q4_K_M", "Q8_0"] : [quant];
  for (const tag of tags) {
    const hit = firstModel(files, new RegExp(`(^|[-._/])${escapeRegExp(tag)}[.-]`, "i"));
    if (hit) return hit;
  }
  return defaulted ? firstModel(files) : undefined;
}

/**
 * The bits of a GGUF's quantisation tag: the first number in it (Q4_K_M → 4, BF16 → 16, MXFP4 → 4),
 * 0 when the tag has none (llama.cpp's `extract_quant_bits`, common/download.cpp).
 * @example quantBits("mmproj-Model-F16.gguf") // → 16
 */
export function quantBits(path: string): number {
  const digits = /\d+/.exec(ggufName(path)?.tag ?? "");
  return digits ? Number(digits[0]) : 0;
}

/**
 * The vision projector llama.cpp's `-hf` fetches beside `model`: a GGUF with `mmproj` in its name
 * (first part when split) in the model's folder or one above it; the deepest such folder first, then
 * the projector whose quantisation bits are closest to the model's, then listing order. This is
 * `find_best_mmproj` (`find_best_sibling(files, model, "mmproj")`) in llama.cpp's
 * common/download.cpp, which lists the repo as inferd does. Builds of 2025 before it (common/arg.cpp,
 * `common_get_hf_file`) asked the hub's `/v2/<repo>/manifests/<tag>` and took its `mmprojFile`; for
 * repos with one projector both give the same file. Undefined when the repo has none.
 * @example bestProjector(files, "Model-Q4_K_M.gguf") // → { path: "mmproj-Model-F16.gguf", … }
 */
export function bestProjector<F extends NamedFile>(files: F[], model: string): F | undefined {
  const dirOf = (p: string) => (p.includes("/") ? p.slice(0, p.lastIndexOf("/") + 1) : "");
  const modelDir = dirOf(model);
  const bits = quantBits(model);
  let best: { file: F; depth: number; gap: number } | undefined;
  for (const f of files) {
    const name = f.path.slice(f.path.lastIndexOf("/") + 1);
    const g = ggufName(f.path);
    if (!g || g.index !== 1 || !/mmproj/i.test(name)) continue;
    const dir = dirOf(f.path);
    if (!modelDir.startsWith(dir)) continue;
    const depth = dir.split("/").length;
    const gap = Math.abs(quantBits(f.path) - bits);
    if (!best || depth > best.depth || (depth === best.depth && gap < best.gap)) best = { file: f, depth, gap };
  }
  return best?.file;
}

/**
 * The quantisation tags of the model GGUFs in a repo (upper case, unique, in listing order), for
 * error messages that say what is there.
 * @example availableQuants(files) // → ["Q4_K_M", "Q6_K", "Q8_0"]
 */
export function availableQuants(files: NamedFile[]): string[] {
  const tags = files.filter((f) => isModelGguf(f.path)).map((f) => ggufName(f.path)!.tag || f.path);
  return [...new Set(tags)];
}

/** Weight formats other than safetensors: PyTorch pickles, TensorFlow, Flax, ONNX, Rust, GGUF, Core ML… */
const PYTORCH_WEIGHTS = /\.(bin|pt|pth)$/i;
const OTHER_WEIGHTS = /\.(gguf|onnx|onnx_data|msgpack|h5|ot|tflite|ckpt|mlmodel|keras|pb)$/i;
/** Top-level folders of other checkpoints of the same model (Meta's consolidated `original/`, exports). */
const OTHER_FOLDERS = new Set(["original", "onnx", "openvino", "coreml", "tflite", "tf", "flax"]);
/** Documentation a runtime never reads. */
const DOCS = /(^|\/)(\.gitattributes|[^/]*\.(md|png|jpe?g|gif|webp|svg))$/i;

/**
 * The files of a snapshot that a runtime (vLLM, SGLang, transformers) reads. Kept: every config,
 * tokenizer, chat template, index and remote-code file, and one weight format — safetensors when
 * there are any, else the PyTorch `.bin`/`.pt` files (vLLM's own preference order). Dropped: the
 * other weight formats (`.bin`/`.pt` beside safetensors, GGUF, ONNX, Flax `.msgpack`, TF `.h5`, Rust
 * `.ot`, …), the top-level folders of other checkpoints (`original/`, `onnx/`, …) and docs
 * (`*.md`, images, `.gitattributes`): they can be as large as the model itself and nothing loads them.
 * @example snapshotFiles(files).map((f) => f.path) // → ["config.json", "model-00001-of-00002.safetensors", …]
 */
export function snapshotFiles<F extends NamedFile>(files: F[]): F[] {
  const inOtherFolder = (p: string) => p.includes("/") && OTHER_FOLDERS.has(p.split("/")[0]);
  const candidates = files.filter((f) => !inOtherFolder(f.path) && !DOCS.test(f.path));
  const hasSafetensors = candidates.some((f) => /\.safetensors$/i.test(f.path));
  const hasPytorch = candidates.some((f) => PYTORCH_WEIGHTS.test(f.path));
  return candidates.filter((f) => {
    if (OTHER_WEIGHTS.test(f.path)) return false;
    if (PYTORCH_WEIGHTS.test(f.path)) return !hasSafetensors && hasPytorch;
    return true;
  });
}

/** Whether a snapshot's files hold weights a safetensors/PyTorch runtime can load. */
export function hasRuntimeWeights(files: NamedFile[]): boolean {
  return files.some((f) => /\.(safetensors|bin|pt|pth)$/i.test(f.path));
}

/** One quantisation of a GGUF repo: its tag, the file a pull starts from, every part, and their total size. */
export interface QuantGroup {
  /** The tag (`Q4_K_M`), or "" for a GGUF whose name carries none. */
  quant: string;
  /** The model file (the first part when split). */
  entry: string;
  files: string[];
  size: number;
}

/**
 * The quantisations of a repo's model GGUFs (projectors and other sidecars left out), each with all
 * its split parts and their total size, smallest first; a tag carried by two files is the first
 * one, as `pickQuant` picks it.
 * @example quantGroups(files) // → [{ quant: "Q4_K_M", entry: "M-Q4_K_M.gguf", files: ["M-Q4_K_M.gguf"], size: 4683 }, …]
 */
export function quantGroups<F extends NamedFile & { size: number }>(files: F[]): QuantGroup[] {
  const out: QuantGroup[] = [];
  const seen = new Set<string>();
  for (const f of files) {
    const name = ggufName(f.path);
    if (!name || !isModelGguf(f.path) || name.index !== 1) continue;
    const key = name.tag || f.path;
    if (seen.has(key)) continue;
    seen.add(key);
    const parts = splitParts(files, f);
    out.push({
      quant: name.tag,
      entry: f.path,
      files: parts.map((p) => p.path),
      size: parts.reduce((s, p) => s + Math.max(0, p.size), 0),
    });
  }
  return out.sort((a, b) => a.size - b.size);
}
