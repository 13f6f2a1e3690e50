import { pythonServer } from "./openai-server";
import type { Launcher } from "./types";

/**
 * SGLang: the command as given (e.g. `python3 -m sglang.launch_server --model-path …`) with the same
 * port rule; `sglang_version` installs that version once like vLLM's.
 */
export const sglang: Launcher = (ctx) => pythonServer(ctx, { kind: "sglang", tensorParallel: false, versionField: "sglang_version" });
