/**
 * Ollama: no process per replica. The daemon at OLLAMA_HOST serves every Ollama workload; the agent
 * starts `ollama serve` when it is installed and not running (with the GPUs of the machine's Ollama
 * workloads and, unless the operator chose one, OLLAMA_KEEP_ALIVE=-1), `ollama pull`s the model
 * (progress in the replica's log), loads it, then forwards to the daemon's OpenAI-style routes while
 * the daemon lists it as loaded. The fake that stands for it is `test/fixtures/bin/ollama`
 * (test/fixtures/ollama/).
 */
import { isIP } from "node:net";
import { baseUrlOf } from "../runtimes/args";
import type { Engine } from "./types";

/** Where an Ollama daemon listens (`bind`, as Ollama's Host().Host) and where inferd reaches it. */
export interface OllamaAddress {
  /** The address inferd connects to: an unspecified one (0.0.0.0, ::, empty) becomes loopback. */
  host: string;
  port: number;
  /** `host:port` the daemon binds, exactly as envconfig.Host() gives it (IPv6 bracketed). */
  bind: string;
  /** `http://host:port` inferd sends requests to (the daemon serves plain HTTP whatever the scheme). */
  url: string;
  /** The OLLAMA_HOST the daemon and the CLI are given. */
  value: string;
}

/**
 * Go's `net.SplitHostPort` (net/ipsock.go): `host:port`, `[v6]:port`; null where Go returns an error
 * (no port, too many colons, stray brackets). The port may be empty (`host:`).
 */
function splitHostPort(hostport: string): { host: string; port: string } | null {
  const i = hostport.lastIndexOf(":");
  if (i < 0) return null;
  let host = hostport.slice(0, i);
  let from = 0;
  let after = 0;
  if (hostport.startsWith("[")) {
    const end = hostport.indexOf("]");
    if (end < 0 || end + 1 !== i) return null;
    host = hostport.slice(1, end);
    from = 1;
    after = end + 1;
  } else if (host.includes(":")) return null;
  if (hostport.slice(from).includes("[") || hostport.slice(after).includes("]")) return null;
  return { host, port: hostport.slice(i + 1) };
}

/** Go's `net.ParseIP(s).String()`: an IP address in canonical form (IPv4-mapped IPv6 as IPv4), or null when `s` is none. */
function canonicalIp(s: string): string | null {
  const kind = isIP(s);
  if (kind === 4) return s;
  if (kind !== 6 || s.includes("%")) return null;
  const v6 = new URL(`http://[${s}]`).hostname.slice(1, -1);
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(v6);
  if (!mapped) return v6;
  const [hi, lo] = [Number.parseInt(mapped[1], 16), Number.parseInt(mapped[2], 16)];
  return [hi >> 8, hi & 255, lo >> 8, lo & 255].join(".");
}

/** Go's `strconv.ParseInt(s, 10, 32)` kept when within 0–65535 (Host()'s port check), else null. */
function portOf(s: string): number | null {
  if (!/^[+-]?\d+$/.test(s)) return null;
  const n = Number(s);
  return n >= 0 && n <= 65535 ? n : null;
}

/**
 * Parses OLLAMA_HOST as Ollama does — envconfig/config.go (v0.12.6, unchanged through v0.33) `Var`
 * trims spaces and quotes, `Host()`: no `://` → scheme http, port 11434 (bare `ollama.com` →
 * https :443); `http://` → default port 80, `https://` → 443, any other scheme keeps 11434; a path
 * is dropped; `net.SplitHostPort` fails (no port, a bare IPv6 like `::`) → host 127.0.0.1, or the
 * text itself when it is an IP (canonical) or a name; a port that is not 0–65535 → the default.
 * `:port` keeps an empty host (the daemon binds every interface). inferd connects as
 * `ConnectableHost()` (v0.33) does: an unspecified address becomes loopback (`::` → `::1`).
 * @example ollamaAddress("http://10.0.0.5") // → {host: "10.0.0.5", port: 80, bind: "10.0.0.5:80", …}
 */
export function ollamaAddress(raw: string | undefined): OllamaAddress {
  const s = (raw ?? "")
    .trim()
    .replace(/^["']+|["']+$/g, "")
    .trim();
  const cut = s.indexOf("://");
  const scheme = cut < 0 ? "http" : s.slice(0, cut);
  let rest = cut < 0 ? s : s.slice(cut + 3);
  let fallback = cut < 0 ? 11434 : scheme === "http" ? 80 : scheme === "https" ? 443 : 11434;
  if (cut < 0 && s === "ollama.com") [rest, fallback] = ["ollama.com:443", 443];
  const hostport = rest.split("/")[0];
  const split = splitHostPort(hostport);
  const host = split
    ? split.host
    : (canonicalIp(hostport.replace(/^[[\]]+|[[\]]+$/g, "")) ?? (hostport || "127.0.0.1"));
  const port = (split && portOf(split.port)) ?? fallback;
  const connect = host === "" || host === "0.0.0.0" ? "127.0.0.1" : host === "::" ? "::1" : host;
  return {
    host: connect,
    port,
    bind: `${host.includes(":") ? `[${host}]` : host}:${port}`,
    url: baseUrlOf(connect, port),
    value: raw?.trim() || "127.0.0.1:11434",
  };
}

/**
 * Ollama's full name of a model, as /api/ps lists it: a name without a tag gets `:latest`.
 * @example ollamaModelName("llama3.2") // → "llama3.2:latest"
 */
export function ollamaModelName(name: string): string {
  return name.split("/").at(-1)?.includes(":") ? name : `${name}:latest`;
}

/**
 * Requests served at once per model, as Ollama works it out: envconfig.Uint("OLLAMA_NUM_PARALLEL", 1)
 * (`Var`-trimmed, an unsigned decimal, anything else → the default) and server/sched.go `load`
 * `max(NumParallel(), 1)` (v0.12.6). The default 1 dates from v0.9.7 (#11330, 2025-07); before,
 * 0 meant "automatic": server/sched.go defaultParallel 4 (to v0.6.6), 2 (v0.6.7–v0.9.6), backed off
 * to 1 when that did not fit the GPU — so 1 never overstates an older daemon.
 */
function capacityOf(env: Record<string, string | undefined>): { slots: number; why: string } {
  const v = (env.OLLAMA_NUM_PARALLEL ?? "").trim().replace(/^["']+|["']+$/g, "");
  if (/^\d+$/.test(v)) return { slots: Math.max(Number(v), 1), why: "OLLAMA_NUM_PARALLEL" };
  return { slots: 1, why: "Ollama's default OLLAMA_NUM_PARALLEL (1 since v0.9.7)" };
}

/** Whether the daemon at `url` has `model` loaded: listed by GET /api/ps (server/routes.go PsHandler, v0.12.6). */
async function loadedIn(url: string, model: string, signal: AbortSignal): Promise<boolean> {
  const r = await fetch(`${url}/api/ps`, { signal: AbortSignal.any([signal, AbortSignal.timeout(5000)]) });
  const body = (await r.json()) as { models?: { name?: string; model?: string }[] };
  const want = ollamaModelName(model);
  return (body.models ?? []).some((m) => [m.name, m.model].some((n) => n && ollamaModelName(n) === want));
}

/**
 * Loads `model` without generating: POST /api/generate with no prompt (server/routes.go
 * GenerateHandler, v0.12.6: answers `done_reason: "load"` once the scheduler has it loaded, for the
 * daemon's OLLAMA_KEEP_ALIVE).
 */
async function loadInto(url: string, model: string, signal: AbortSignal): Promise<void> {
  const r = await fetch(`${url}/api/generate`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, stream: false }),
    signal,
  });
  if (!r.ok)
    throw new Error(
      `loading ${model}: ${((await r.json().catch(() => ({}))) as { error?: string }).error ?? r.status}`,
    );
}

/** Ollama, as the engine descriptor says it. */
export const ollama: Engine = {
  backend: "ollama",
  label: "Ollama",
  form: {
    hint: "A model from the Ollama library; inferd pulls it and serves it through the Ollama daemon.",
    command: "",
  },
  // "ollama version is 0.12.6", or "Warning: client version is 0.12.6" when no daemon answers.
  probe: { argv: ["ollama", "--version"], version: (out) => /version is (\d+\.\d+[\w.+-]*)/.exec(out)?.[1] },
  install: "install Ollama (https://ollama.com/download); inferd starts `ollama serve` when it is not running",
  family: null,
  needsGpu: false,
  programs: ["ollama serve"],
  flags: { tensorParallel: [], servedName: [], model: [], apiKey: [] },
  apiKeyOf: () => undefined,
  readiness: (base) => [`${base}/api/version`],
  capacity: ({ env }) => capacityOf(env),
  routes: () => ({ tokenize: "generate" }),
  toolsOn: () => true,
  launch: (ctx) => {
    const addr = ollamaAddress(ctx.env.OLLAMA_HOST);
    const base = addr.url;
    const bin = ctx.which("ollama");
    const env = { OLLAMA_HOST: addr.value };
    // envconfig KeepAlive() (v0.12.6): default 5m, then server/sched.go unloads an idle model; a
    // negative value keeps it loaded. The operator's own OLLAMA_KEEP_ALIVE wins.
    const keepAlive: Record<string, string> = ctx.env.OLLAMA_KEEP_ALIVE?.trim() ? {} : { OLLAMA_KEEP_ALIVE: "-1" };
    const model = ctx.spec.workload.model_name;
    return {
      env,
      baseUrl: base,
      healthUrls: ollama.readiness(base),
      prep: [
        bin
          ? { title: `ollama pull ${model}`, argv: [bin, "pull", model], env }
          : { title: `ollama pull ${model}`, ollamaPull: { baseUrl: base, model } },
      ],
      daemon: bin
        ? {
            key: `ollama@${base}`,
            argv: [bin, "serve"],
            env: { ...env, ...keepAlive },
            gpus: ctx.spec.gpu_indices,
            healthUrl: `${base}/api/version`,
          }
        : undefined,
      resident: {
        loaded: (signal) => loadedIn(base, model, signal),
        load: (signal) => loadInto(base, model, signal),
      },
      slots: ollama.capacity({ args: [], gpus: ctx.gpus, env: ctx.env }).slots,
    };
  },
  fake: "test/fixtures/bin/ollama",
};
