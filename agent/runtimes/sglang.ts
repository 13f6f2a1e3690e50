import { flagValue } from "../command";
import { SERVED_NAME_FLAGS, withServedName } from "./args";
import { pythonServer } from "./openai-server";
import type { Launcher } from "./types";

/**
 * SGLang: the command as given (e.g. `python3 -m sglang.launch_server --model-path …`) with the same
 * port rule and served-name rule as vLLM's; `sglang_version` installs that version once like vLLM's.
 */
export const sglang: Launcher = (ctx) => {
  const plan = pythonServer(ctx, { kind: "sglang", tensorParallel: false, versionField: "sglang_version" });
  return {
    ...plan,
    argv: withServedName(
      plan.argv!,
      SERVED_NAME_FLAGS.python,
      flagValue(plan.argv!, ["--model-path", "--model"]),
      ctx.spec.workload.model_name,
    ),
  };
};
