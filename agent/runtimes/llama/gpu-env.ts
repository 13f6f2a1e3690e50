/**
 * How the agent tells the built-in llama.cpp runner which GPU build to load (agent/runtimes/llama-gpu.ts
 * sets these, llama/nlc.ts reads them), and how each build is named to people. No imports: both the
 * agent and the bundled runner include it.
 */

/** The GPU build to load: `cuda`, `vulkan` or `metal`. */
export const GPU_ENV = "INFERD_LLAMA_GPU";

/** Why no GPU build could be had: the runner stays on the CPU and says so. */
export const GPU_UNAVAILABLE_ENV = "INFERD_LLAMA_GPU_UNAVAILABLE";

/** A GPU build node-llama-cpp can load. */
export type LlamaGpuType = "cuda" | "vulkan" | "metal";

/** How each build is named in logs and the replica's row. */
export const GPU_NAMES: Record<LlamaGpuType, string> = { cuda: "CUDA", vulkan: "Vulkan", metal: "Metal" };

/** Whether `s` names a GPU build. */
export const isGpuType = (s: string | undefined): s is LlamaGpuType => s === "cuda" || s === "vulkan" || s === "metal";
