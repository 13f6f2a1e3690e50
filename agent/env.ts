/**
 * The environment a runtime gets: an allow-list of what model servers need (paths, locale, proxies,
 * GPU, Hugging Face and runtime variables), never inferd's own settings or secrets.
 */

/** Variables passed by exact name. */
const NAMES = new Set([
  "PATH",
  "HOME",
  "USER",
  "LOGNAME",
  "SHELL",
  "LANG",
  "LANGUAGE",
  "TZ",
  "TMPDIR",
  "TERM",
  "COLORTERM",
  "NO_COLOR",
  "LD_LIBRARY_PATH",
  "VIRTUAL_ENV",
  "PYTHONPATH",
  "PYTHONUNBUFFERED",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
  "REQUESTS_CA_BUNDLE",
  "CURL_CA_BUNDLE",
]);

/** Variables passed by prefix: locale, GPU stacks, model hubs and the runtimes' own settings. */
const PREFIXES = [
  "LC_",
  "XDG_",
  "CUDA_",
  "NVIDIA_",
  "NCCL_",
  "GLOO_",
  "CUBLAS_",
  "CUDNN_",
  "ROCR_",
  "HIP_",
  "HSA_",
  "ROCM_",
  "MIOPEN_",
  "HF_",
  "HUGGING_FACE_",
  "TRANSFORMERS_",
  "TORCH_",
  "PYTORCH_",
  "TRITON_",
  "OMP_",
  "MKL_",
  "VLLM_",
  "SGLANG_",
  "OLLAMA_",
  "LLAMA_",
  "GGML_",
  "UV_",
  "PIP_",
  "CONDA_",
];

/** True when a variable may reach a runtime: allow-listed, or named by the operator's `extra` (`NAME` or `PREFIX*`). */
export function passesToRuntime(name: string, extra: string[] = []): boolean {
  if (name.startsWith("INFERD_")) return false;
  if (NAMES.has(name) || PREFIXES.some((p) => name.startsWith(p))) return true;
  return extra.some((e) => (e.endsWith("*") ? name.startsWith(e.slice(0, -1)) : name === e));
}

/**
 * The allow-listed part of `env` for runtimes (values unset are dropped).
 * @example runtimeEnv({ PATH: "/bin", INFERD_ADMIN_TOKEN: "x", AWS_SECRET: "y" }) // → { PATH: "/bin" }
 */
export function runtimeEnv(env: Record<string, string | undefined>, extra: string[] = []): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && passesToRuntime(k, extra)) out[k] = v;
  return out;
}
