/**
 * What a model is and how much memory it needs: the shape read from GGUF metadata or a safetensors
 * `config.json`, and an estimate for a context and a parallelism.
 *
 * The estimate (documented in the README):
 *   weights  = the model files' size (GGUF: as quantised; safetensors: as stored)
 *   KV cache = layers × KV heads × (key length + value length) × 2 bytes (an f16 cache) × context tokens
 *              (llama.cpp shares `-c` among its `-np` slots; vLLM needs at least one `--max-model-len`
 *              sequence, SGLang one `--context-length`)
 *   overhead = 512 MiB (CUDA context, compute buffers) + 5 % of the weights
 * Pure functions: the caller reads the files (see inspect.ts).
 */

/** A model's shape, as far as its files say. */
export interface ModelInfo {
  format: "gguf" | "safetensors";
  architecture: string | null;
  name: string | null;
  parameters: number | null;
  quantization: string | null;
  context_length: number | null;
  layers: number | null;
  heads: number | null;
  kv_heads: number | null;
  /** Key plus value length per KV head (2 × head size for most models). */
  kv_dim: number | null;
  embedding_length: number | null;
  weights_bytes: number;
  /** KV cache bytes per token of context (f16), when the shape is known. */
  kv_bytes_per_token: number | null;
}

/** Memory a model needs for a context, in bytes, with the parts shown. */
export interface Estimate {
  context: number;
  weights_bytes: number;
  kv_bytes: number;
  overhead_bytes: number;
  total_bytes: number;
}

const num = (v: unknown): number | null => (typeof v === "number" ? v : typeof v === "bigint" ? Number(v) : null);

/** GGUF `general.file_type` → its quantisation name (llama.cpp's LLAMA_FTYPE names). */
const FILE_TYPES: Record<number, string> = {
  0: "F32",
  1: "F16",
  2: "Q4_0",
  3: "Q4_1",
  7: "Q8_0",
  8: "Q5_0",
  9: "Q5_1",
  10: "Q2_K",
  11: "Q3_K_S",
  12: "Q3_K_M",
  13: "Q3_K_L",
  14: "Q4_K_S",
  15: "Q4_K_M",
  16: "Q5_K_S",
  17: "Q5_K_M",
  18: "Q6_K",
  19: "IQ2_XXS",
  20: "IQ2_XS",
  21: "Q2_K_S",
  22: "IQ3_XS",
  23: "IQ3_XXS",
  24: "IQ1_S",
  25: "IQ4_NL",
  26: "IQ3_S",
  27: "IQ3_M",
  28: "IQ2_S",
  29: "IQ2_M",
  30: "IQ4_XS",
  31: "IQ1_M",
  32: "BF16",
  36: "TQ1_0",
  37: "TQ2_0",
  38: "MXFP4_MOE",
};

/**
 * The shape of a GGUF model from its metadata and tensor infos (of every part of a split file).
 * @example infoFromGguf({"general.architecture": "llama", "llama.block_count": 2, …}, tensors, 497632)
 */
export function infoFromGguf(
  metadata: Record<string, unknown>,
  tensors: { shape: (number | bigint)[] }[],
  totalBytes: number,
): ModelInfo {
  const arch =
    typeof metadata["general.architecture"] === "string" ? (metadata["general.architecture"] as string) : null;
  const k = (key: string) => num(metadata[`${arch}.${key}`]);
  const layers = k("block_count");
  const heads = k("attention.head_count");
  const kvHeads = k("attention.head_count_kv") ?? heads;
  const embd = k("embedding_length");
  const headSize = heads && embd ? embd / heads : null;
  const kvDim = (k("attention.key_length") ?? headSize ?? 0) + (k("attention.value_length") ?? headSize ?? 0) || null;
  const params = tensors.length
    ? tensors.reduce((sum, t) => sum + t.shape.reduce((p: number, d) => p * Number(d), 1), 0)
    : null;
  const ft = num(metadata["general.file_type"]);
  return {
    format: "gguf",
    architecture: arch,
    name: typeof metadata["general.name"] === "string" ? (metadata["general.name"] as string) : null,
    parameters: params,
    quantization: ft !== null ? (FILE_TYPES[ft] ?? `type ${ft}`) : null,
    context_length: k("context_length"),
    layers,
    heads,
    kv_heads: kvHeads,
    kv_dim: kvDim,
    embedding_length: embd,
    weights_bytes: totalBytes,
    kv_bytes_per_token: layers && kvHeads && kvDim ? layers * kvHeads * kvDim * 2 : null,
  };
}

/** The shape of a safetensors model from its `config.json` (text models; nested `text_config` too). */
export function infoFromConfig(config: Record<string, unknown>, weightsBytes: number): ModelInfo {
  const c = (
    config.text_config && typeof config.text_config === "object"
      ? { ...config, ...(config.text_config as object) }
      : config
  ) as Record<string, unknown>;
  const layers = num(c.num_hidden_layers);
  const heads = num(c.num_attention_heads);
  const kvHeads = num(c.num_key_value_heads) ?? heads;
  const embd = num(c.hidden_size);
  const headSize = num(c.head_dim) ?? (heads && embd ? embd / heads : null);
  const archs = Array.isArray(c.architectures) ? (c.architectures as string[]) : [];
  return {
    format: "safetensors",
    architecture: archs[0] ?? (typeof c.model_type === "string" ? c.model_type : null),
    name: typeof c._name_or_path === "string" ? c._name_or_path : null,
    parameters: null,
    quantization: typeof c.torch_dtype === "string" ? c.torch_dtype : typeof c.dtype === "string" ? c.dtype : null,
    context_length: num(c.max_position_embeddings),
    layers,
    heads,
    kv_heads: kvHeads,
    kv_dim: headSize ? headSize * 2 : null,
    embedding_length: embd,
    weights_bytes: weightsBytes,
    kv_bytes_per_token: layers && kvHeads && headSize ? layers * kvHeads * headSize * 2 * 2 : null,
  };
}

/** Bytes needed beyond weights and KV cache: a CUDA context and compute buffers. */
const BASE_OVERHEAD = 512 * 1024 * 1024;

/**
 * The memory to run a model with `context` tokens of KV cache (default: 4096, capped by the
 * model's own context length).
 * @example estimate(info, { context: 2048 }).total_bytes
 */
export function estimate(info: ModelInfo, opts: { context?: number } = {}): Estimate {
  const context = opts.context && opts.context > 0 ? opts.context : Math.min(4096, info.context_length ?? 4096);
  const kv = (info.kv_bytes_per_token ?? 0) * context;
  const overhead = overheadOf(info.weights_bytes);
  return {
    context,
    weights_bytes: info.weights_bytes,
    kv_bytes: kv,
    overhead_bytes: overhead,
    total_bytes: info.weights_bytes + kv + overhead,
  };
}

/** The overhead of the estimate for weights of this size. */
const overheadOf = (weights: number) => BASE_OVERHEAD + Math.round(weights * 0.05);

/**
 * The least memory a model of `weightsBytes` needs, before its shape is known (a hub file not yet
 * pulled): weights and overhead, no KV cache (`context` 0).
 * @example estimateFromSize(4 << 30).total_bytes // → weights + 512 MiB + 5 %
 */
export function estimateFromSize(weightsBytes: number): Estimate {
  const overhead = overheadOf(weightsBytes);
  return {
    context: 0,
    weights_bytes: weightsBytes,
    kv_bytes: 0,
    overhead_bytes: overhead,
    total_bytes: weightsBytes + overhead,
  };
}

/** A GPU as the fit needs it: index and free memory in MiB. */
export interface FreeGpu {
  index: number;
  name: string;
  total_mib: number;
  free_mib: number;
}

/** Whether `needBytes` fits on `count` GPUs of a worker (split evenly), choosing those with most room. */
export function fitOnGpus(
  needBytes: number,
  gpus: FreeGpu[],
  count = 1,
): { fits: boolean; gpus: number[]; need_per_gpu_mib: number; free_mib: number[] } {
  const per = Math.ceil(needBytes / count / 1048576);
  const best = [...gpus].sort((a, b) => b.free_mib - a.free_mib).slice(0, count);
  return {
    fits: best.length === count && best.every((g) => g.free_mib >= per),
    gpus: best.map((g) => g.index).sort((a, b) => a - b),
    need_per_gpu_mib: per,
    free_mib: best.map((g) => g.free_mib),
  };
}

/** `1.5 GiB`-style size for messages. */
export function gib(bytes: number): string {
  return `${(bytes / 1073741824).toFixed(1)} GiB`;
}
