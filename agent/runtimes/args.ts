import { flagValue, hasFlag } from "../command";

/** Port flags understood by vLLM, SGLang and llama-server. */
const PORT = ["--port"];
const HOST = ["--host"];

/**
 * Adds `--host 127.0.0.1 --port <port>` when the command sets no port (and `--host` only when it
 * sets none); an explicit port is kept. Returns the new args and where the runtime will listen.
 * @example withPort(["vllm", "serve", "m"], 9001) // → {args: [..., "--host", "127.0.0.1", "--port", "9001"], host: "127.0.0.1", port: 9001}
 */
export function withPort(args: string[], port: number): { args: string[]; host: string; port: number } {
  const explicit = flagValue(args, PORT);
  const hostFlag = flagValue(args, HOST);
  const host = !hostFlag || hostFlag === "0.0.0.0" || hostFlag === "::" ? "127.0.0.1" : hostFlag;
  if (explicit !== undefined) return { args, host, port: Number(explicit) };
  return { args: [...args, ...(hostFlag ? [] : ["--host", "127.0.0.1"]), "--port", String(port)], host, port };
}

/** vLLM's tensor-parallel flag names. */
export const TP_FLAGS = ["--tensor-parallel-size", "-tp"];

/**
 * Adds `--tensor-parallel-size N` unless the command already has a tensor-parallel flag
 * (an explicit one always wins).
 * @example withTensorParallel(["vllm", "serve", "m"], 2) // → ["vllm", "serve", "m", "--tensor-parallel-size", "2"]
 */
export function withTensorParallel(args: string[], gpus: number): string[] {
  return hasFlag(args, TP_FLAGS) ? args : [...args, "--tensor-parallel-size", String(gpus)];
}

/** Environment that gives a runtime exactly its GPUs (NVIDIA and ROCm names). */
export function gpuEnv(indices: number[]): Record<string, string> {
  const list = indices.join(",");
  return { CUDA_VISIBLE_DEVICES: list, HIP_VISIBLE_DEVICES: list, ROCR_VISIBLE_DEVICES: list };
}

/** `http://host:port` with IPv6 hosts bracketed. */
export const baseUrlOf = (host: string, port: number) => `http://${host.includes(":") ? `[${host}]` : host}:${port}`;
