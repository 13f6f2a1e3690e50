/**
 * vLLM-Omni: vLLM's server for omni-modality models (`vllm serve <model> --omni`), shipped as the
 * `vllm-omni` package, whose install brings the vLLM it is built on and its own `vllm` command. The
 * fake that stands for it is `test/fixtures/bin/vllm` with `--omni`.
 */
import type { Engine } from "./types";
import { launchVllm, vllm } from "./vllm";

/** vLLM-Omni: vLLM's descriptor, but installed as the `vllm-omni` package. */
export const vllmOmni: Engine = {
  ...vllm,
  backend: "vllm-omni",
  label: "vLLM-Omni",
  form: { hint: "vLLM for image, audio and video generation models.", command: "vllm serve {model} --omni" },
  probe: {
    argv: ["python3", "-c", "import vllm_omni; print(vllm_omni.__version__)"],
    version: (out) => /^(\d+\.\d+[\w.+-]*)\s*$/m.exec(out)?.[1],
  },
  install: "pip install vllm-omni, or set vllm_version on the workload and inferd installs it",
  multinode: undefined,
  // vLLM-Omni's own server (vllm_omni's entrypoints) is not known to serve vLLM's sleep routes: its
  // replicas stop rather than sleep until that is checked.
  sleep: undefined,
  pinned: {
    field: "vllm_version",
    install: (version) => ({ requirement: `vllm-omni==${version}`, extra: [], prerelease: false }),
  },
  launch: (ctx) => launchVllm(vllmOmni)(ctx),
};
