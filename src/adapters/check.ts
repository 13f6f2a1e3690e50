/**
 * What an adapter on disk is, and whether a base workload can serve it: a PEFT LoRA folder
 * (`adapter_config.json` + `adapter_model.safetensors`, as peft's `save_pretrained` writes it: vLLM
 * and SGLang load these) or a GGUF LoRA (llama.cpp's convert_lora_to_gguf.py: `general.type =
 * "adapter"`, `adapter.type = "lora"`). Pure reading and pure rules; no store, no HTTP.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { basename, join } from "node:path";
import { gguf } from "@huggingface/gguf";

/** What an adapter's own files say. */
export interface AdapterInfo {
  format: "peft" | "gguf";
  /** The model it was trained on: PEFT's `base_model_name_or_path`; a GGUF's `general.architecture`. */
  base: string | null;
  rank: number | null;
  bytes: number;
}

/** An adapter that cannot be served, with the reason in words. */
export class AdapterRefused extends Error {
  override name = "AdapterRefused";
}

/** Bytes of the regular files under a folder (symlinks followed: a hub snapshot links into blobs). */
function bytesUnder(dir: string): number {
  return readdirSync(dir).reduce((sum, name) => {
    const st = statSync(join(dir, name), { throwIfNoEntry: false });
    return sum + (!st ? 0 : st.isDirectory() ? bytesUnder(join(dir, name)) : st.size);
  }, 0);
}

/**
 * Reads an adapter at `entry` (a folder or a `.gguf` file). Throws `AdapterRefused` when it is not a
 * LoRA adapter (a full model, another PEFT type, a GGUF model).
 */
export async function readAdapter(entry: string): Promise<AdapterInfo> {
  const st = statSync(entry, { throwIfNoEntry: false });
  if (!st) throw new AdapterRefused(`nothing is at ${entry}`);
  if (st.isFile() && entry.toLowerCase().endsWith(".gguf")) {
    const { metadata, tensorInfos } = await gguf(entry, { allowLocalFile: true });
    const m = metadata as Record<string, unknown>;
    if (m["general.type"] !== "adapter" || m["adapter.type"] !== "lora")
      throw new AdapterRefused(
        `${basename(entry)} is a GGUF ${String(m["general.type"] ?? "model")}, not a LoRA adapter (general.type "adapter", adapter.type "lora")`,
      );
    // The rank is the small side of a lora_a tensor ([n_embd, rank] in GGUF's order).
    const a = tensorInfos.find((t) => t.name.endsWith(".lora_a"));
    const rank = a ? Math.min(...a.shape.map(Number)) : null;
    return { format: "gguf", base: (m["general.architecture"] as string) ?? null, rank, bytes: st.size };
  }
  const config = st.isDirectory() ? join(entry, "adapter_config.json") : "";
  if (!config || !existsSync(config))
    throw new AdapterRefused(
      "not a LoRA adapter: expected a folder with adapter_config.json (peft's save_pretrained) or a GGUF LoRA file",
    );
  let c: Record<string, unknown>;
  try {
    c = JSON.parse(readFileSync(config, "utf8")) as Record<string, unknown>;
  } catch (e) {
    throw new AdapterRefused(`adapter_config.json is not JSON: ${(e as Error).message}`);
  }
  if (c.peft_type !== undefined && String(c.peft_type).toUpperCase() !== "LORA")
    throw new AdapterRefused(`a ${String(c.peft_type)} adapter, not LoRA: the engines serve LoRA adapters only`);
  const rank = Number(c.r);
  return {
    format: "peft",
    base: typeof c.base_model_name_or_path === "string" ? c.base_model_name_or_path : null,
    rank: Number.isInteger(rank) && rank > 0 ? rank : null,
    bytes: bytesUnder(entry),
  };
}

/** The ranks vLLM takes for `--max-lora-rank` (vllm/config/lora.py, 0.11): an adapter's rank is rounded up to one. */
export const VLLM_RANKS = [1, 8, 16, 32, 64, 128, 256, 320, 512] as const;

/**
 * The `--max-lora-rank` a runtime needs for adapters of `ranks`: the smallest vLLM allows that is at
 * least the largest rank (16 at least, vLLM's default), undefined past 512.
 * @example maxRankFor([8, 48]) // → 64
 */
export function maxRankFor(ranks: number[]): number | undefined {
  const top = Math.max(16, ...ranks);
  return VLLM_RANKS.find((r) => r >= top);
}

/** What the base workload serves, for the checks: its engine, its model's hub repo or path, and a GGUF's architecture. */
export interface BaseOf {
  backend: string;
  /** The hub repo or path its command loads (undefined: not known). */
  model?: string;
  /** A GGUF model's `general.architecture`, when the store knows it. */
  architecture?: string;
  /** `--max-lora-rank` set in its command, if any. */
  maxRank?: number;
}

/** The last part of a repo id or path, lower case (`Qwen/Qwen3-8B` and `/models/qwen3-8b/` → `qwen3-8b`). */
const tail = (s: string) => basename(s.replace(/\/+$/, "")).toLowerCase();

/**
 * Throws `AdapterRefused` when `base` cannot serve `a`: a PEFT adapter on llama.cpp (it takes GGUF
 * adapters) or a GGUF one on vLLM/SGLang; one trained on another model (PEFT: its base repo's name
 * differs from the workload's model; GGUF: another architecture); a rank past what the engine takes.
 */
export function checkAgainst(a: AdapterInfo, base: BaseOf): void {
  const gguf = base.backend === "llamacpp";
  if (gguf && a.format !== "gguf")
    throw new AdapterRefused(
      "llama.cpp takes GGUF LoRA adapters (convert_lora_to_gguf.py); this is a PEFT folder, which vLLM and SGLang serve",
    );
  if (!gguf && a.format !== "peft")
    throw new AdapterRefused(
      `${base.backend} takes PEFT LoRA adapters (adapter_config.json + safetensors); this is a GGUF one, which llama.cpp serves`,
    );
  if (gguf && a.base && base.architecture && a.base !== base.architecture)
    throw new AdapterRefused(
      `the adapter is for the ${a.base} architecture and this workload's model is ${base.architecture}`,
    );
  if (!gguf && a.base && base.model && tail(a.base) !== tail(base.model))
    throw new AdapterRefused(`the adapter was trained on ${a.base} and this workload serves ${base.model}`);
  if (!gguf && a.rank !== null) {
    const limit = base.maxRank ?? VLLM_RANKS[VLLM_RANKS.length - 1];
    if (a.rank > limit)
      throw new AdapterRefused(
        `its rank ${a.rank} is above ${limit}, the largest ${base.maxRank ? "--max-lora-rank in the workload's command" : `${base.backend} takes`}`,
      );
  }
}
