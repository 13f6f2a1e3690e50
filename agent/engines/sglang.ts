/**
 * SGLang (`python3 -m sglang.launch_server`): what inferd assumes of it, and its launcher. The fake
 * that stands for it is `test/fixtures/sglang-bin/python3` (test/fixtures/runtime/).
 */
import { flagValue } from "../command";
import { SERVED_NAME_FLAGS, withServedName } from "../runtimes/args";
import { pythonServer } from "../runtimes/openai-server";
import type { Engine } from "./types";

/** SGLang, as the engine descriptor says it. */
export const sglang: Engine = {
  backend: "sglang",
  label: "SGLang",
  probe: {
    argv: ["python3", "-c", "import sglang; print(sglang.__version__)"],
    version: (out) => /^(\d+\.\d+[\w.+-]*)\s*$/m.exec(out)?.[1],
  },
  install: 'pip install "sglang[all]", or set sglang_version on the workload and inferd installs it',
  family: "sglang",
  needsGpu: true,
  gpuShare: (args) => Number(flagValue(args, ["--mem-fraction-static"]) ?? 0.88) || 0.88,
  multinode: "--nnodes/--node-rank/--dist-init-addr, tensor parallel over the whole group",
  tensorParallelSpansGroup: true,
  programs: ["python -m sglang.launch_server"],
  pinned: {
    field: "sglang_version",
    install: (version) => ({ requirement: `sglang==${version}`, extra: [], prerelease: false }),
  },
  flags: {
    // --tp-size, its alias --tensor-parallel-size, and --tp (argparse takes it for --tp-size).
    tensorParallel: ["--tp-size", "--tensor-parallel-size", "--tp"],
    servedName: SERVED_NAME_FLAGS.python,
    model: ["--model-path", "--model"],
    apiKey: ["--api-key"],
  },
  apiKeyOf: (args) => flagValue(args, ["--api-key"]),
  readiness: (base) => [`${base}/health`, `${base}/v1/models`],
  capacity: ({ args }) => {
    const set = Number(flagValue(args, ["--max-running-requests"]));
    return set > 0
      ? { slots: set, why: "--max-running-requests in its command" }
      : { slots: 256, why: "SGLang's default --max-running-requests" };
  },
  routes: () => ({ tokenize: "generate" }),
  toolsOn: (args) => args.some((a) => a === "--tool-call-parser" || a.startsWith("--tool-call-parser=")),
  /**
   * The command as given (e.g. `python3 -m sglang.launch_server --model-path …`) with the same port
   * rule and served-name rule as vLLM's; `sglang_version` installs that version once like vLLM's.
   */
  launch: (ctx) => {
    const plan = pythonServer(ctx, sglang);
    return {
      ...plan,
      argv: withServedName(
        plan.argv!,
        sglang.flags.servedName,
        flagValue(plan.argv!, sglang.flags.model),
        ctx.spec.workload.model_name,
      ),
    };
  },
  fake: "test/fixtures/sglang-bin/python3",
};
