/**
 * The engines inferd drives, one descriptor each (see ./types.ts). Adding an engine is its file
 * (descriptor and launcher) and one line here, plus the fake that stands for it in test/fixtures.
 */
import { flagValue } from "../command";
import { custom } from "./custom";
import { anthropicProvider, openaiProvider } from "./providers";
import { llamacpp } from "./llamacpp";
import { ollama } from "./ollama";
import { sglang } from "./sglang";
import type { Engine } from "./types";
import { vllm } from "./vllm";
import { vllmOmni } from "./vllm-omni";

/** Every engine, by its workload `backend` value, in the order the dashboard's form offers them. */
export const ENGINES: Record<string, Engine> = Object.fromEntries(
  [llamacpp, ollama, vllm, vllmOmni, sglang, custom, openaiProvider, anthropicProvider].map((e) => [e.backend, e]),
);

/** What the dashboard shows of an engine (its bundle embeds these as `inferd:engines`: src/ui/bundle.ts, ui/lib/constants.ts). */
export interface EngineFace {
  id: string;
  label: string;
  hint: string;
  command: string;
  /** Whether the workload form offers it (its workloads can be made there). */
  offered: boolean;
  /** Whether its workloads serve LoRA adapters (the descriptor's `lora`). */
  lora: boolean;
}

/** Every engine as the dashboard shows it, in the form's order. */
export const engineFaces = (): EngineFace[] =>
  Object.values(ENGINES).map((e) => ({
    id: e.backend,
    label: e.label,
    hint: e.form?.hint ?? "",
    command: e.form?.command ?? "",
    offered: !!e.form,
    lora: !!e.lora,
  }));

/** The engine of a backend, or undefined for an unknown one. */
export const engineOf = (backend: string): Engine | undefined => ENGINES[backend];

/** The tensor-parallel flags a backend reads (none for llama.cpp and Ollama). */
export const tpFlags = (backend: string): string[] => engineOf(backend)?.flags.tensorParallel ?? [];

/**
 * The tensor-parallel size a command sets for its backend, or undefined when it sets none (or not a
 * positive whole number).
 * @example tensorParallelOf("sglang", ["python3", "-m", "sglang.launch_server", "--tp-size", "2"]) // → 2
 * @example tensorParallelOf("vllm", ["vllm", "serve", "m", "--tp-size", "2"]) // → undefined (not a vLLM flag)
 */
export function tensorParallelOf(backend: string, args: string[]): number | undefined {
  const value = flagValue(args, tpFlags(backend));
  const n = Number(value);
  return value !== undefined && Number.isInteger(n) && n > 0 ? n : undefined;
}
