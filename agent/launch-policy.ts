/**
 * The launch policy: what a workload saved by a tenant (a project's control-plane key) may make the
 * host run. Plain data plus one pure decision function, shared by the host (checked when a tenant
 * saves a workload, shown in the launch preview) and the agent (checked again just before launch).
 * Workloads saved by the operator (admin token, dashboard) are trusted and carry no policy.
 */
import { isAbsolute, normalize, relative } from "node:path";
import { splitCommand } from "./command";

/** Backend families that run a command (Ollama runs none: its daemon pulls a model by name). */
export const POLICY_FAMILIES = ["vllm", "sglang", "llamacpp"] as const;
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
}

/** The setting (flag and environment variable) that changes each part of the policy. */
export const POLICY_SETTINGS = {
  vllm: { flag: "--policy-vllm-programs", env: "INFERD_POLICY_VLLM_PROGRAMS" },
  sglang: { flag: "--policy-sglang-programs", env: "INFERD_POLICY_SGLANG_PROGRAMS" },
  llamacpp: { flag: "--policy-llamacpp-programs", env: "INFERD_POLICY_LLAMACPP_PROGRAMS" },
  forbidden_flags: { flag: "--policy-forbidden-flags", env: "INFERD_POLICY_FORBIDDEN_FLAGS" },
  model_paths: { flag: "--policy-model-paths", env: "INFERD_POLICY_MODEL_PATHS" },
  tenant_installs: { flag: "--policy-tenant-installs", env: "INFERD_POLICY_TENANT_INSTALLS" },
} as const;

/** Default program prefixes per family. */
export const DEFAULT_PROGRAMS: Record<PolicyFamily, string[]> = {
  vllm: ["vllm serve", "python -m vllm.entrypoints.openai.api_server", "python3 -m vllm.entrypoints.openai.api_server"],
  sglang: ["python -m sglang.launch_server", "python3 -m sglang.launch_server"],
  llamacpp: ["llama-server"],
};

/**
 * Flags that run code or touch files outside the model store: remote model code, plugins loaded from
 * a path, config files that could switch those on, templates read from a path, and llama-server's
 * static file server, slot dumps and log file.
 */
export const DEFAULT_FORBIDDEN_FLAGS = [
  "--trust-remote-code", "--chat-template:path", "--config", "--tool-parser-plugin", "--reasoning-parser-plugin",
  "--middleware", "--logits-processors", "--logits-processor-pattern", "--worker-cls", "--worker-extension-cls",
  "--allowed-local-media-path", "--enable-custom-logit-processor", "--path", "--slot-save-path", "--log-file",
];

/** llama.cpp flags whose value is always a file (so a relative value is a path too). */
const LLAMA_FILE_FLAGS = ["-m", "--model", "-mm", "--mmproj", "--lora", "--lora-scaled", "-md", "--model-draft", "--chat-template-file", "--ssl-key-file", "--ssl-cert-file", "--grammar-file", "--control-vector", "--control-vector-scaled"];

/** Why a tenant's workload may not run: the offending word and the setting that would allow it. */
export interface PolicyViolation {
  /** The word of the command (or the config field) that is not allowed. */
  word: string;
  /** The field of the workload it is in. */
  field: string;
  /** The setting (flag / environment variable) that would allow it. */
  setting: string;
  message: string;
}

/** The policy family of a backend, or null for backends that run no command (Ollama). */
export function familyOf(backend: string): PolicyFamily | null {
  if (backend === "vllm" || backend === "vllm-omni") return "vllm";
  if (backend === "sglang" || backend === "llamacpp") return backend;
  return null;
}

const settingText = (key: keyof typeof POLICY_SETTINGS) => `${POLICY_SETTINGS[key].flag} (${POLICY_SETTINGS[key].env})`;

/** How file-ish a word is: an absolute path, a relative path spelled as one, or neither. */
function pathKind(value: string): "absolute" | "relative" | null {
  if (isAbsolute(value)) return "absolute";
  if (/^(~|\.{1,2})(\/|$)/.test(value) || value.includes("/../")) return "relative";
  return null;
}

/** True when `path` (absolute) lies inside one of `dirs`, after resolving `.` and `..`. */
export function insideDirs(path: string, dirs: string[]): boolean {
  const p = normalize(path);
  return dirs.some((d) => {
    const rel = relative(normalize(d), p);
    return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
  });
}

/** A flag word's name in argparse's spelling (`--a_b=1` → `--a-b`); non-flags give null. */
function flagName(word: string): string | null {
  if (!word.startsWith("-") || /^-\d/.test(word)) return null;
  const name = word.split("=", 1)[0];
  return name.startsWith("--") ? `--${name.slice(2).replace(/_/g, "-")}` : name;
}

/**
 * The forbidden rule a flag falls under, counting argparse's unambiguous abbreviations
 * (`--trust-remote` is `--trust-remote-code` to vLLM) and underscore spellings.
 */
function forbiddenRule(name: string, rules: string[]): { flag: string; pathOnly: boolean } | null {
  for (const rule of rules) {
    const [flag, mod] = rule.split(":");
    const pathOnly = mod === "path";
    if (name === flag) return { flag, pathOnly };
    if (name.startsWith("--") && name.length >= 5 && flag.startsWith(name)) return { flag, pathOnly };
  }
  return null;
}

/** Which allowed prefix the command starts with, or the first word that departs from every prefix. */
function matchProgram(words: string[], prefixes: string[]): { rest: string[] } | { word: string } {
  let best = { depth: -1, word: words[0] ?? "" };
  for (const prefix of prefixes) {
    const want = splitCommand(prefix);
    let i = 0;
    while (i < want.length && words[i] === want[i]) i++;
    if (i === want.length) return { rest: words.slice(want.length) };
    if (i > best.depth) best = { depth: i, word: words[i] ?? "(nothing)" };
  }
  return { word: best.word };
}

/** Options of `checkLaunch`: how to resolve symlinks (the agent does, on its own machine). */
export interface CheckOptions {
  realpath?: (path: string) => string | null;
}

/**
 * Decides whether a tenant's workload may run under `policy`: its program, each flag and each file
 * path in its command, and any package install. Returns the first violation, or null.
 * @example checkLaunch(policy, "vllm", { command: "bash -c x" }) // → { word: "bash", setting: "--policy-vllm-programs …", … }
 */
export function checkLaunch(policy: LaunchPolicy, backend: string, config: Record<string, unknown>, opts: CheckOptions = {}): PolicyViolation | null {
  const family = familyOf(backend);
  if (!family) return null;
  for (const field of ["vllm_version", "sglang_version"]) {
    if (config[field] !== undefined && !policy.tenant_installs) {
      return { word: field, field: `config.${field}`, setting: settingText("tenant_installs"), message: `config.${field}: installing packages is reserved to the operator; the operator allows tenants to with ${settingText("tenant_installs")}` };
    }
  }
  const words = splitCommand(String(config.command ?? ""));
  const matched = matchProgram(words, policy.programs[family]);
  if ("word" in matched) {
    const allowed = policy.programs[family].map((p) => `"${p}"`).join(", ") || "none";
    return { word: matched.word, field: "config.command", setting: settingText(family), message: `config.command: "${matched.word}" is not allowed: a ${backend} command must start with one of ${allowed}; the operator allows more with ${settingText(family)}` };
  }
  return checkArgs(policy, family, matched.rest, opts);
}

/** Checks the arguments after the program: forbidden flags and file paths outside the model dirs. */
function checkArgs(policy: LaunchPolicy, family: PolicyFamily, args: string[], opts: CheckOptions): PolicyViolation | null {
  const flagMsg = (word: string, why: string): PolicyViolation => ({ word, field: "config.command", setting: settingText("forbidden_flags"), message: `config.command: "${word}" is not allowed (${why}); the operator can allow it by leaving it out of ${settingText("forbidden_flags")}` });
  const dirs = policy.model_paths.map((d) => normalize(d));
  const pathMsg = (word: string, why: string): PolicyViolation => ({ word, field: "config.command", setting: settingText("model_paths"), message: `config.command: "${word}" ${why}; tenants may read models only under ${dirs.join(", ") || "(no directory)"}, which the operator sets with ${settingText("model_paths")}` });
  const remoteCode = policy.forbidden_flags.includes("--trust-remote-code");
  for (let i = 0; i < args.length; i++) {
    const word = args[i];
    // Also inside JSON-valued arguments (vLLM's --speculative-config, --hf-overrides…).
    if (remoteCode && /trust[-_]remote[-_]code/i.test(word)) return flagMsg(word, "it lets a model run its own code");
    const name = flagName(word);
    const inline = word.includes("=") && name ? word.slice(word.indexOf("=") + 1) : undefined;
    const next = args[i + 1];
    const value = inline ?? (next !== undefined && !next.startsWith("-") ? next : undefined);
    if (name) {
      const rule = forbiddenRule(name, policy.forbidden_flags);
      if (rule && (!rule.pathOnly || (value !== undefined && (pathKind(value) || /\.(jinja2?|j2)$/.test(value))))) {
        return flagMsg(word, rule.pathOnly ? `${rule.flag} from a file` : `${rule.flag} is reserved to the operator`);
      }
      const fileFlag = family === "llamacpp" && LLAMA_FILE_FLAGS.includes(name);
      if (fileFlag && value !== undefined && !value.startsWith("hf:") && pathKind(value) === null) {
        return pathMsg(value, "is a relative path (give an absolute one)");
      }
      if (inline !== undefined) {
        const bad = checkPath(inline, dirs, opts, pathMsg);
        if (bad) return bad;
      }
      continue;
    }
    const bad = checkPath(word, dirs, opts, pathMsg);
    if (bad) return bad;
  }
  return null;
}

/** A path-like word must be absolute and inside the model dirs (after symlinks, when resolvable). */
function checkPath(word: string, dirs: string[], opts: CheckOptions, msg: (w: string, why: string) => PolicyViolation): PolicyViolation | null {
  const kind = pathKind(word);
  if (kind === null) return null;
  if (kind === "relative") return msg(word, "is a relative path (give an absolute one)");
  if (!insideDirs(word, dirs)) return msg(word, "is outside the model directories");
  const real = opts.realpath?.(word);
  if (real && !insideDirs(real, dirs.map((d) => opts.realpath?.(d) ?? d))) return msg(word, `leads outside the model directories (to ${real})`);
  return null;
}
