import { join } from "node:path";

/**
 * How to start the built-in llama.cpp runtime (node-llama-cpp behind llama-server's flags): from
 * source, Bun runs `agent/runtimes/llama-runner.ts` directly.
 */
export function builtinLlama(_dataDir: string): { argv: string[]; env: Record<string, string> } {
  return { argv: [process.execPath, join(import.meta.dir, "llama-runner.ts")], env: {} };
}
