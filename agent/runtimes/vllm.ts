import { flagValue } from "../command";
import { SERVED_NAME_FLAGS, withServedName } from "./args";
import { pythonServer } from "./openai-server";
import type { Launcher } from "./types";

/** The model a `vllm serve` command loads: `--model`, else the word after `serve`. */
function loadedModel(argv: string[]): string | undefined {
  const serve = argv.indexOf("serve");
  const positional = serve >= 0 && argv[serve + 1] && !argv[serve + 1].startsWith("-") ? argv[serve + 1] : undefined;
  return flagValue(argv, ["--model"]) ?? positional;
}

/**
 * vLLM and vLLM-Omni: the command as given, plus `--tensor-parallel-size <assignment GPUs>` when it
 * has no tensor-parallel flag, `--host/--port` when it sets no port, and `--served-model-name <model
 * name>` when it loads a model under another name (a local path) and names none. With
 * `vllm_version`, that version is installed once into `<data-dir>/runtimes/vllm/<version>` and put
 * first on PATH.
 */
export const vllm: Launcher = (ctx) => {
  const plan = pythonServer(ctx, { kind: "vllm", tensorParallel: true, versionField: "vllm_version" });
  return {
    ...plan,
    argv: withServedName(plan.argv!, SERVED_NAME_FLAGS.python, loadedModel(plan.argv!), ctx.spec.workload.model_name),
  };
};
