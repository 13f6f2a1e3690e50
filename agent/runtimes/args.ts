import { flagValue, hasFlag } from "../command";

/** Port flags understood by vLLM, SGLang and llama-server. */
const PORT = ["--port"];
const HOST = ["--host"];

/**
 * Makes the runtime listen on loopback only: any `--host` is replaced by `--host 127.0.0.1`, so a
 * command can neither expose the runtime on the LAN nor point inferd at another machine; adds
 * `--port <port>` when the command sets none (an explicit port is kept, on loopback). Returns the
 * new args and where the runtime will listen.
 * @example withPort(["vllm", "serve", "m", "--host", "10.0.0.9"], 9001) // → {args: ["vllm", "serve", "m", "--host", "127.0.0.1", "--port", "9001"], host: "127.0.0.1", port: 9001}
 */
export function withPort(args: string[], port: number): { args: string[]; host: string; port: number } {
  const explicit = flagValue(args, PORT);
  const rest: string[] = [];
  for (let i = 0; i < args.length; i++) {
    if (HOST.includes(args[i])) i++;
    else if (!HOST.some((h) => args[i].startsWith(`${h}=`))) rest.push(args[i]);
  }
  const chosen = explicit !== undefined && /^\d+$/.test(explicit) ? Number(explicit) : port;
  return {
    args: [...rest, "--host", "127.0.0.1", ...(explicit !== undefined ? [] : ["--port", String(port)])],
    host: "127.0.0.1",
    port: chosen,
  };
}

/**
 * Adds `<flags[0]> N` unless the command already has one of the engine's tensor-parallel `flags`
 * (an explicit one always wins).
 * @example withTensorParallel(["vllm", "serve", "m"], 2, ["--tensor-parallel-size", "-tp"]) // → ["vllm", "serve", "m", "--tensor-parallel-size", "2"]
 */
export function withTensorParallel(args: string[], gpus: number, flags: string[]): string[] {
  return hasFlag(args, flags) ? args : [...args, flags[0], String(gpus)];
}

/**
 * Environment that gives a runtime exactly its GPUs, by their indices as the agent probed them
 * (`nvidia-smi` / `rocm-smi` order), on the machine's GPU `vendor` (the replica's GPUs; NVIDIA when
 * none are known):
 * - NVIDIA: `CUDA_VISIBLE_DEVICES` with `CUDA_DEVICE_ORDER=PCI_BUS_ID`, since CUDA numbers devices
 *   fastest first by default while nvidia-smi numbers them by PCI bus (CUDA C Programming Guide,
 *   "CUDA Environment Variables"): without it a mixed-GPU machine runs on the wrong GPU.
 * - AMD: `ROCR_VISIBLE_DEVICES` filters the physical devices first and HIP numbers what is left from
 *   0, so `HIP_VISIBLE_DEVICES` and `CUDA_VISIBLE_DEVICES` (which HIP also reads) are `0..n-1` (ROCm
 *   docs, "GPU isolation techniques"): the physical list there would leave a replica on GPUs 2,3 with none.
 * @example gpuEnv([2, 3], "amd") // → {ROCR_VISIBLE_DEVICES: "2,3", HIP_VISIBLE_DEVICES: "0,1", CUDA_VISIBLE_DEVICES: "0,1"}
 */
export function gpuEnv(indices: number[], vendor: "nvidia" | "amd" = "nvidia"): Record<string, string> {
  const list = indices.join(",");
  if (vendor === "nvidia") return { CUDA_VISIBLE_DEVICES: list, CUDA_DEVICE_ORDER: "PCI_BUS_ID" };
  const renumbered = indices.map((_, i) => i).join(",");
  return { ROCR_VISIBLE_DEVICES: list, HIP_VISIBLE_DEVICES: renumbered, CUDA_VISIBLE_DEVICES: renumbered };
}

/** The GPU vendor of a launch: its replica's GPUs' as probed, NVIDIA when none are known. */
export const vendorOfLaunch = (gpus: { vendor: string }[]): "nvidia" | "amd" =>
  gpus[0]?.vendor === "amd" ? "amd" : "nvidia";

/** `http://host:port` with IPv6 hosts bracketed. */
export const baseUrlOf = (host: string, port: number) => `http://${host.includes(":") ? `[${host}]` : host}:${port}`;

/** The flags that name a runtime's served model: llama-server's alias, vLLM's and SGLang's served name. */
export const SERVED_NAME_FLAGS = { llama: ["--alias", "-a"], python: ["--served-model-name", "--served_model_name"] };

/**
 * Adds `<flags[0]> <name>` so the runtime answers with the workload's model name, unless the command
 * names its served model itself or would already serve it under `name` (`loaded`: the model the
 * command loads, which the runtime reports when no name is given — llama-server reports its `-m` path).
 * @example withServedName(["llama-server", "-m", "/d/models/q.gguf"], SERVED_NAME_FLAGS.llama, "/d/models/q.gguf", "qwen") // → [..., "--alias", "qwen"]
 */
export function withServedName(args: string[], flags: string[], loaded: string | undefined, name: string): string[] {
  return hasFlag(args, flags) || loaded === name ? args : [...args, flags[0], name];
}
