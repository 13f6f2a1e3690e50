/**
 * Ollama: no process per replica. The daemon at OLLAMA_HOST serves every Ollama workload; the agent
 * starts `ollama serve` when it is installed and not running, `ollama pull`s the model (progress in
 * the replica's log), then forwards to the daemon's OpenAI-style routes. The fake that stands for it
 * is `test/fixtures/bin/ollama` (test/fixtures/ollama/).
 */
import { baseUrlOf, gpuEnv, vendorOfLaunch } from "../runtimes/args";
import type { Engine } from "./types";

/** Go's net.SplitHostPort: `host:port`, `[v6]:port` or `:port`; null where Go errs (no port, too many colons). */
function splitHostPort(hostport: string): [string, string] | null {
  if (hostport.startsWith("[")) {
    const end = hostport.indexOf("]");
    return end > 0 && hostport[end + 1] === ":" ? [hostport.slice(1, end), hostport.slice(end + 2)] : null;
  }
  const colon = hostport.indexOf(":");
  return colon >= 0 && colon === hostport.lastIndexOf(":")
    ? [hostport.slice(0, colon), hostport.slice(colon + 1)]
    : null;
}

/**
 * Where the Ollama daemon listens for OLLAMA_HOST, read as Ollama's envconfig/config.go `Host()`
 * does (v0.12): no scheme means http on 11434, `http://` without a port means 80 and `https://` 443;
 * `host:port`, `[v6]:port` and `:port` (every interface); a bare host or IP (`::`, `[::1]`) takes the
 * default port; a bad port the default. `host` is where inferd connects: an unspecified address
 * (empty, 0.0.0.0, ::) is reached on loopback. `value` is what the daemon inferd starts is given.
 * @example ollamaAddress(":9999") // → {host: "127.0.0.1", port: 9999, value: ":9999"}
 * @example ollamaAddress("http://10.0.0.5") // → {host: "10.0.0.5", port: 80, value: "http://10.0.0.5"}
 */
export function ollamaAddress(raw: string | undefined): { host: string; port: number; value: string } {
  const value = raw?.trim() ?? "";
  let defaultPort = 11434;
  let hostport = value;
  const cut = value.indexOf("://");
  if (cut >= 0) {
    const scheme = value.slice(0, cut);
    hostport = value.slice(cut + 3);
    if (scheme === "http") defaultPort = 80;
    else if (scheme === "https") defaultPort = 443;
  }
  hostport = hostport.split("/")[0];
  const split = splitHostPort(hostport);
  const host = split ? split[0] : hostport.replace(/^\[|\]$/g, "") || "127.0.0.1";
  const n = split && /^\d+$/.test(split[1]) ? Number(split[1]) : Number.NaN;
  const port = Number.isInteger(n) && n <= 65535 ? n : defaultPort;
  const connect = host === "" || host === "0.0.0.0" ? "127.0.0.1" : host === "::" ? "::1" : host;
  return { host: connect, port, value: value || "127.0.0.1:11434" };
}

/** Ollama, as the engine descriptor says it. */
export const ollama: Engine = {
  backend: "ollama",
  label: "Ollama",
  // "ollama version is 0.12.6", or "Warning: client version is 0.12.6" when no daemon answers.
  probe: { argv: ["ollama", "--version"], version: (out) => /version is (\d+\.\d+[\w.+-]*)/.exec(out)?.[1] },
  install: "install Ollama (https://ollama.com/download); inferd starts `ollama serve` when it is not running",
  family: null,
  needsGpu: false,
  programs: ["ollama serve"],
  flags: { tensorParallel: [], servedName: [], model: [], apiKey: [] },
  apiKeyOf: () => undefined,
  readiness: (base) => [`${base}/api/version`],
  // The daemon's OLLAMA_NUM_PARALLEL (requests per model at once), as set for the agent; else 1.
  capacity: ({ env }) => {
    const n = Number(env.OLLAMA_NUM_PARALLEL);
    return n > 0 ? { slots: n, why: "OLLAMA_NUM_PARALLEL" } : { slots: 1, why: "Ollama's default OLLAMA_NUM_PARALLEL" };
  },
  routes: () => ({ tokenize: "generate" }),
  toolsOn: () => true,
  launch: (ctx) => {
    const addr = ollamaAddress(ctx.env.OLLAMA_HOST);
    const base = baseUrlOf(addr.host, addr.port);
    const bin = ctx.which("ollama");
    const env = { OLLAMA_HOST: addr.value };
    // The daemon inferd starts: kept loaded while the workload runs (Ollama unloads a model after
    // OLLAMA_KEEP_ALIVE, 5 minutes by default: envconfig KeepAlive, server/sched.go) unless the
    // operator set it, and on the replica's GPUs only (else Ollama schedules on every visible GPU).
    const daemonEnv: Record<string, string> = {
      ...env,
      OLLAMA_KEEP_ALIVE: ctx.env.OLLAMA_KEEP_ALIVE ?? "-1",
      ...(ctx.spec.gpu_indices.length ? gpuEnv(ctx.spec.gpu_indices, vendorOfLaunch(ctx.gpus)) : {}),
    };
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
        ? { key: `ollama@${base}`, argv: [bin, "serve"], env: daemonEnv, healthUrl: `${base}/api/version` }
        : undefined,
      slots: ollama.capacity({ args: [], gpus: ctx.gpus, env: ctx.env }).slots,
    };
  },
  fake: "test/fixtures/bin/ollama",
};
