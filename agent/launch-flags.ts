/**
 * The launch policy's flag tables: which flags choose a runtime's address (inferd's alone for
 * tenants), which make it open connections elsewhere (forbidden to tenants by default), and which
 * take a file or directory path, per runtime family. Spelled as the runtimes' argparse spells them.
 */
/** Backend families that run a command (Ollama runs none: its daemon pulls a model by name). */
export const POLICY_FAMILIES = ["vllm", "sglang", "llamacpp", "custom"] as const;
export type PolicyFamily = (typeof POLICY_FAMILIES)[number];

/** The operator's rules for tenant workloads. */
export interface LaunchPolicy {
  /** Per family, the command prefixes a tenant's command may start with (e.g. `vllm serve`). */
  programs: Record<PolicyFamily, string[]>;
  /** Flags a tenant may not pass; `--flag:path` forbids the flag only when its value is a file path. */
  forbidden_flags: string[];
  /** Directories tenants' commands may read model files from (absolute). */
  model_paths: string[];
  /** Whether tenants may set `vllm_version` / `sglang_version` (which install packages). */
  tenant_installs: boolean;
  /** Whether tenants may set `nodes > 1` (a workload spanning machines). */
  tenant_multinode: boolean;
  /** Whether tenants' model URLs may reach loopback and private addresses (and use http://). */
  private_model_urls: boolean;
}

/** Flags that choose where a runtime listens: for tenants' workloads inferd alone sets these. */
export const ADDRESS_FLAGS = ["--port", "--host", "--uds", "--reuse-port"];

/**
 * Flags that make a runtime open connections of its own (llama.cpp RPC servers, OTLP trace
 * exporters, vLLM's tool server, KV-cache transfer and event endpoints, multi-node rendezvous):
 * part of the default forbidden flags, so the operator may allow them.
 */
export const CONNECT_FLAGS = [
  "--rpc",
  "--otlp-traces-endpoint",
  "--oltp-traces-endpoint",
  "--tool-server",
  "--kv-transfer-config",
  "--kv-events-config",
  "--data-parallel-address",
  "--master-addr",
  "--dist-init-addr",
  // llama.cpp's -dr pulls a model from a Docker registry (common/arg.cpp, 2025 builds): an address
  // inferd cannot check the way it checks -mu/-mmu URLs.
  "-dr",
  "--docker-repo",
];

/**
 * How a file flag's value is read: `file` is always a path; `file-or-hub` a path when it looks like
 * one, else a hub repo id; `file-or-inline` inline content (a template with `{`) or else a path.
 */
export type FileFlagKind = "file" | "file-or-hub" | "file-or-inline";

const each = (kind: FileFlagKind, names: string[]) =>
  Object.fromEntries(names.map((n) => [n, kind])) as Record<string, FileFlagKind>;

const SSL = ["--ssl-keyfile", "--ssl-certfile", "--ssl-ca-certs"];

/** Per family, the flags whose value is a file or directory (values of `=` forms and JSON are checked apart). */
export const FILE_FLAGS: Record<PolicyFamily, Record<string, FileFlagKind>> = {
  vllm: {
    ...each("file-or-hub", [
      "--model",
      "--tokenizer",
      "--hf-config-path",
      "--speculative-model",
      "--qlora-adapter-name-or-path",
      "--generation-config",
    ]),
    ...each("file", ["--download-dir", ...SSL]),
    ...each("file-or-inline", ["--chat-template"]),
  },
  sglang: {
    ...each("file-or-hub", ["--model-path", "--model", "--tokenizer-path", "--speculative-draft-model-path"]),
    ...each("file", [
      "--download-dir",
      ...SSL,
      "--file-storage-path",
      "--decrypted-config-file",
      "--decrypted-draft-config-file",
    ]),
    ...each("file-or-inline", ["--chat-template", "--completion-template"]),
  },
  llamacpp: each("file", [
    "-m",
    "--model",
    "-mm",
    "--mmproj",
    "--lora",
    "--lora-scaled",
    "-md",
    "--model-draft",
    "-mv",
    "--model-vocoder",
    "--chat-template-file",
    "--api-key-file",
    "--ssl-key-file",
    "--ssl-cert-file",
    "--grammar-file",
    "-jf",
    "--json-schema-file",
    "--control-vector",
    "--control-vector-scaled",
    "--api-key-file",
    "--system-prompt-file",
    "-f",
    "--file",
    "-bf",
    "--binary-file",
    "-lcs",
    "--lookup-cache-static",
    "-lcd",
    "--lookup-cache-dynamic",
    "--prompt-cache",
    "--slot-save-path",
    "--log-file",
  ]),
  // A custom server's flags are its own: every path-shaped word is judged as a path (inside the model dirs).
  custom: {},
};

/** llama.cpp flags whose value is a URL the agent downloads a model from. */
export const MODEL_URL_FLAGS = ["-mu", "--model-url", "-mmu", "--mmproj-url"];
