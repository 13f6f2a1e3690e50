/**
 * The launch policy: what a workload saved by a tenant (anyone but the admin: an operator or viewer
 * in the dashboard, a project's control-plane key) may make the host run. Plain data plus one pure
 * decision function, shared by the host (checked when a tenant saves a workload, shown in the launch
 * preview) and the agent (checked again just before launch). Workloads whose command the operator
 * of the machine set (the admin token, an admin user) are trusted and carry no policy.
 */
import { engineOf } from "./engines";
import { isAbsolute, normalize, relative } from "node:path";
import { splitCommand } from "./command";
import {
  ADDRESS_FLAGS,
  CONNECT_FLAGS,
  FILE_FLAGS,
  MODEL_URL_FLAGS,
  type FileFlagKind,
  type LaunchPolicy,
  type PolicyFamily,
} from "./launch-flags";
import { AddressRefused, checkUrl } from "./net/address";

export { POLICY_FAMILIES, type PolicyFamily, type LaunchPolicy } from "./launch-flags";

/** The setting (flag and environment variable) that changes each part of the policy. */
export const POLICY_SETTINGS = {
  vllm: { flag: "--policy-vllm-programs", env: "INFERD_POLICY_VLLM_PROGRAMS" },
  sglang: { flag: "--policy-sglang-programs", env: "INFERD_POLICY_SGLANG_PROGRAMS" },
  llamacpp: { flag: "--policy-llamacpp-programs", env: "INFERD_POLICY_LLAMACPP_PROGRAMS" },
  custom: { flag: "--policy-custom-programs", env: "INFERD_POLICY_CUSTOM_PROGRAMS" },
  forbidden_flags: { flag: "--policy-forbidden-flags", env: "INFERD_POLICY_FORBIDDEN_FLAGS" },
  model_paths: { flag: "--policy-model-paths", env: "INFERD_POLICY_MODEL_PATHS" },
  tenant_installs: { flag: "--policy-tenant-installs", env: "INFERD_POLICY_TENANT_INSTALLS" },
  tenant_multinode: { flag: "--policy-tenant-multinode", env: "INFERD_POLICY_TENANT_MULTINODE" },
  private_model_urls: { flag: "--allow-private-model-urls", env: "INFERD_ALLOW_PRIVATE_MODEL_URLS" },
} as const;

/** Default program prefixes per family. */
export const DEFAULT_PROGRAMS: Record<PolicyFamily, string[]> = {
  vllm: ["vllm serve", "python -m vllm.entrypoints.openai.api_server", "python3 -m vllm.entrypoints.openai.api_server"],
  sglang: ["python -m sglang.launch_server", "python3 -m sglang.launch_server", "sglang serve"],
  llamacpp: ["llama-server"],
  // A custom server runs a program of the operator's choice: none for tenants until the operator names one.
  custom: [],
};

/**
 * Flags that run code or touch files outside the model store: remote model code, plugins loaded from
 * a path, config files that could switch those on, templates read from a path, and llama-server's
 * static file server, slot dumps and log file; then the flags that make a runtime open connections
 * of its own (RPC servers, trace exporters, tool servers: see `CONNECT_FLAGS`).
 */
export const DEFAULT_FORBIDDEN_FLAGS = [
  "--trust-remote-code",
  "--chat-template:path",
  "--config",
  "--tool-parser-plugin",
  "--reasoning-parser-plugin",
  "--middleware",
  "--logits-processors",
  "--logits-processor-pattern",
  "--worker-cls",
  "--worker-extension-cls",
  "--allowed-local-media-path",
  "--enable-custom-logit-processor",
  "--path",
  "--slot-save-path",
  "--log-file",
  ...CONNECT_FLAGS,
];

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
  return engineOf(backend)?.family ?? null;
}

/** A policy setting as messages name it: its flag and environment variable. */
export const settingText = (key: keyof typeof POLICY_SETTINGS) =>
  `${POLICY_SETTINGS[key].flag} (${POLICY_SETTINGS[key].env})`;

/**
 * Refuses a tenant's workload spanning machines (`nodes > 1`) unless the operator allows it: its
 * members talk over the cluster network, unencrypted.
 */
export function checkNodes(policy: LaunchPolicy, nodes: number): PolicyViolation | null {
  if (nodes <= 1 || policy.tenant_multinode) return null;
  return {
    word: "nodes",
    field: "nodes",
    setting: settingText("tenant_multinode"),
    message: `nodes: ${nodes} machines for one workload is reserved to the operator; the operator allows tenants to with ${settingText("tenant_multinode")}`,
  };
}

/** How file-ish a word is: an absolute path, a relative path spelled as one (`./`, `../`, `~`), or neither. */
function pathKind(value: string): "absolute" | "relative" | null {
  if (isAbsolute(value)) return "absolute";
  if (/^(~|\.{1,2})(\/|$)/.test(value) || value.includes("/../") || value.endsWith("/..")) return "relative";
  return null;
}

/** Inline content rather than a file name (a Jinja template). */
const isInline = (value: string) => /[{}\n]/.test(value);

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
 * The flag of `flags` that `name` means, counting argparse's unambiguous abbreviations
 * (`--trust-remote` is `--trust-remote-code` to vLLM) unless `abbrev` is false; an exact match wins.
 */
function matchFlag(name: string, flags: string[], abbrev = true): string | null {
  if (flags.includes(name)) return name;
  if (!abbrev || !name.startsWith("--") || name.length < 5) return null;
  return flags.find((f) => f.startsWith(name)) ?? null;
}

/** The forbidden rule a flag falls under (`--flag:path` rules forbid only a file value). */
function forbiddenRule(name: string, rules: string[]): { flag: string; pathOnly: boolean } | null {
  const parsed = rules.map((r) => ({ flag: r.split(":")[0], pathOnly: r.split(":")[1] === "path" }));
  const flag = matchFlag(
    name,
    parsed.map((r) => r.flag),
  );
  return parsed.find((r) => r.flag === flag) ?? null;
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
export function checkLaunch(
  policy: LaunchPolicy,
  backend: string,
  config: Record<string, unknown>,
  opts: CheckOptions = {},
): PolicyViolation | null {
  if (engineOf(backend)?.external)
    return {
      word: backend,
      field: "backend",
      setting: "the admin token",
      message: `backend: "${backend}" forwards to an external provider with the operator's key; only the operator (the admin) creates or changes such a workload`,
    };
  const family = familyOf(backend);
  if (!family) return null;
  for (const field of ["vllm_version", "sglang_version"]) {
    if (config[field] !== undefined && !policy.tenant_installs) {
      return {
        word: field,
        field: `config.${field}`,
        setting: settingText("tenant_installs"),
        message: `config.${field}: installing packages is reserved to the operator; the operator allows tenants to with ${settingText("tenant_installs")}`,
      };
    }
  }
  const words = splitCommand(String(config.command ?? ""));
  const matched = matchProgram(words, policy.programs[family]);
  if ("word" in matched && policy.programs[family].length === 0)
    return {
      word: matched.word,
      field: "config.command",
      setting: settingText(family),
      message: `config.command: "${matched.word}" is not allowed: a ${backend} workload runs a program of the operator's choice, and tenants may run one only when the operator allows its program with ${settingText(family)}`,
    };
  if ("word" in matched) {
    const allowed = policy.programs[family].map((p) => `"${p}"`).join(", ");
    return {
      word: matched.word,
      field: "config.command",
      setting: settingText(family),
      message: `config.command: "${matched.word}" is not allowed: a ${backend} command must start with one of ${allowed}; the operator allows more with ${settingText(family)}`,
    };
  }
  return checkArgs(policy, family, matched.rest, opts);
}

/** What the argument checks need: the policy, the family and the model dirs, and how to report. */
interface ArgContext {
  policy: LaunchPolicy;
  family: PolicyFamily;
  dirs: string[];
  opts: CheckOptions;
}

const flagMsg = (word: string, why: string): PolicyViolation => ({
  word,
  field: "config.command",
  setting: settingText("forbidden_flags"),
  message: `config.command: "${word}" is not allowed (${why}); the operator can allow it by leaving it out of ${settingText("forbidden_flags")}`,
});

function pathMsg(c: ArgContext, word: string, why: string): PolicyViolation {
  return {
    word,
    field: "config.command",
    setting: settingText("model_paths"),
    message: `config.command: "${word}" ${why}; tenants may read models only under ${c.dirs.join(", ") || "(no directory)"}, which the operator sets with ${settingText("model_paths")}`,
  };
}

/**
 * Checks the arguments after the program: address flags (inferd's), forbidden flags, file flags'
 * values (always paths), model URLs (the address rules), and any path in a bare word, a `name=path`
 * value or a JSON value.
 */
function checkArgs(
  policy: LaunchPolicy,
  family: PolicyFamily,
  args: string[],
  opts: CheckOptions,
): PolicyViolation | null {
  const c: ArgContext = { policy, family, dirs: policy.model_paths.map((d) => normalize(d)), opts };
  const remoteCode = policy.forbidden_flags.includes("--trust-remote-code");
  for (let i = 0; i < args.length; i++) {
    const word = args[i];
    // Also inside JSON-valued arguments (vLLM's --speculative-config, --hf-overrides…).
    if (remoteCode && /trust[-_]remote[-_]code/i.test(word)) return flagMsg(word, "it lets a model run its own code");
    const name = flagName(word);
    if (!name) {
      const bad = checkValue(c, word);
      if (bad) return bad;
      continue;
    }
    const inline = word.includes("=") ? word.slice(word.indexOf("=") + 1) : undefined;
    const next = args[i + 1];
    const value = inline ?? (next !== undefined && !next.startsWith("-") ? next : undefined);
    const bad = checkFlag(c, word, name, value);
    if (bad) return bad;
    // A value judged with its flag is not judged again as a bare word.
    if (inline === undefined && value !== undefined && (fileKind(c, name) || matchFlag(name, MODEL_URL_FLAGS))) i++;
    else if (inline !== undefined) {
      const inner = checkValue(c, inline);
      if (inner) return inner;
    }
  }
  return null;
}

/** The file kind of a flag in this family (argparse abbreviations counted for vLLM and SGLang), or undefined. */
function fileKind(c: ArgContext, name: string): FileFlagKind | undefined {
  const table = FILE_FLAGS[c.family];
  const flag = matchFlag(name, Object.keys(table), c.family !== "llamacpp");
  return flag ? table[flag] : undefined;
}

/** One flag with its value (if any): address, forbidden, file and URL rules. */
function checkFlag(c: ArgContext, word: string, name: string, value: string | undefined): PolicyViolation | null {
  const address = matchFlag(name, ADDRESS_FLAGS);
  // A custom server listens where inferd says: `--port {port}` is the place the port goes.
  if (address && c.family === "custom" && (value === "{port}" || value === "{host}")) return null;
  if (address) {
    return {
      word,
      field: "config.command",
      setting: "the admin token",
      message: `config.command: "${word}" is not allowed: inferd chooses where a runtime listens (${address}); only the operator's own workloads may set it`,
    };
  }
  const kind = fileKind(c, name);
  const rule = forbiddenRule(name, c.policy.forbidden_flags);
  const fileValue =
    value !== undefined &&
    (kind === "file-or-inline"
      ? !isInline(value)
      : pathKind(value) !== null || /\.(jinja2?|j2)$/.test(value) || kind === "file");
  if (rule && (!rule.pathOnly || fileValue))
    return flagMsg(word, rule.pathOnly ? `${rule.flag} from a file` : `${rule.flag} is reserved to the operator`);
  if (value === undefined) return null;
  if (kind) return checkFileValue(c, kind, value);
  if (c.family === "llamacpp" && matchFlag(name, MODEL_URL_FLAGS)) return checkModelUrl(c, value);
  return null;
}

/**
 * A file flag's value is a path: absolute ones must lie inside the model dirs; a relative one would
 * name a file in the runtime's own empty working directory, so it is refused with that reason.
 * Hub repo ids (`file-or-hub`), inline templates (`file-or-inline`) and llama.cpp's `hf:` names pass.
 */
function checkFileValue(c: ArgContext, kind: FileFlagKind, value: string): PolicyViolation | null {
  if (value.startsWith("hf:") || (kind === "file-or-inline" && isInline(value))) return null;
  const shape = pathKind(value);
  if (kind === "file-or-hub" && shape === null) return null;
  if (shape === "absolute") return checkPath(c, value);
  if (value.startsWith("~")) return pathMsg(c, value, "is in a home directory (~)");
  return pathMsg(
    c,
    value,
    "is a relative path (relative paths resolve against the runtime's own empty working directory: give an absolute one)",
  );
}

/** A tenant's model URL: https only and a public address, unless the operator allows private ones. */
function checkModelUrl(c: ArgContext, value: string): PolicyViolation | null {
  const allowPrivate = c.policy.private_model_urls;
  try {
    checkUrl(value, { what: "a model URL", http: allowPrivate, literal: { allowPrivate } });
    return null;
  } catch (e) {
    if (!(e instanceof AddressRefused)) throw e;
    return {
      word: value,
      field: "config.command",
      setting: settingText("private_model_urls"),
      message: `config.command: "${value}" is not allowed: ${e.message}; tenants' model URLs must be public https addresses unless the operator allows private ones with ${settingText("private_model_urls")}`,
    };
  }
}

/** The strings inside a JSON argument (objects and arrays, a few levels deep), or null when it is no JSON. */
function jsonStrings(word: string): string[] | null {
  if (!/^\s*[[{]/.test(word)) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(word);
  } catch {
    return null;
  }
  const out: string[] = [];
  const walk = (v: unknown, depth: number) => {
    if (typeof v === "string") out.push(v);
    else if (v && typeof v === "object" && depth < 8) for (const x of Object.values(v)) walk(x, depth + 1);
  };
  walk(parsed, 0);
  return out;
}

/** A bare word or inline value: itself, the path of a `name=path` pair and every JSON string are checked as paths. */
function checkValue(c: ArgContext, word: string): PolicyViolation | null {
  const inner = jsonStrings(word);
  const candidates = inner ?? [word, ...(word.includes("=") ? [word.slice(word.indexOf("=") + 1)] : [])];
  for (const s of candidates) {
    const bad = checkPath(c, s);
    if (bad) return bad;
  }
  return null;
}

/** A path-like word must be absolute and inside the model dirs (after symlinks, when resolvable). */
function checkPath(c: ArgContext, word: string): PolicyViolation | null {
  const kind = pathKind(word);
  if (kind === null) return null;
  if (kind === "relative") return pathMsg(c, word, "is a relative path (give an absolute one)");
  const why = outsideModelDirs(word, c.dirs, c.opts.realpath);
  return why ? pathMsg(c, word, why) : null;
}

/**
 * Why an absolute path is not inside `dirs` (`.`/`..` resolved, then its symlinks where `realpath`
 * resolves them), or null when it is: the one path rule for tenants' commands and model pulls.
 * @example outsideModelDirs("/models/../etc/passwd", ["/models"]) // → "is outside the model directories"
 */
export function outsideModelDirs(
  path: string,
  dirs: string[],
  realpath?: (path: string) => string | null,
): string | null {
  if (!insideDirs(path, dirs)) return "is outside the model directories";
  const real = realpath?.(path);
  if (
    real &&
    !insideDirs(
      real,
      dirs.map((d) => realpath?.(d) ?? d),
    )
  )
    return `leads outside the model directories (to ${real})`;
  return null;
}
