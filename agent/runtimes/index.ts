import { llamacpp } from "./llamacpp";
import { ollama } from "./ollama";
import { sglang } from "./sglang";
import type { Launcher } from "./types";
import { vllm } from "./vllm";

/** The launcher of each backend. */
export const LAUNCHERS: Record<string, Launcher> = { vllm, "vllm-omni": vllm, sglang, llamacpp, ollama };
