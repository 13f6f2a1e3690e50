import { pythonServer } from "./openai-server";
import type { Launcher } from "./types";

/**
 * vLLM and vLLM-Omni: the command as given, plus `--tensor-parallel-size <assignment GPUs>` when it
 * has no tensor-parallel flag and `--host/--port` when it sets no port. With `vllm_version`, that
 * version is installed once into `<data-dir>/runtimes/vllm/<version>` and put first on PATH.
 */
export const vllm: Launcher = (ctx) => pythonServer(ctx, { kind: "vllm", tensorParallel: true, versionField: "vllm_version" });
