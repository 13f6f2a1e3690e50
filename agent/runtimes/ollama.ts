import { baseUrlOf } from "./args";
import type { Launcher } from "./types";

/**
 * Parses OLLAMA_HOST the way Ollama does: `host`, `host:port` or a URL; default 127.0.0.1:11434.
 * @example ollamaAddress("0.0.0.0:9999") // → {host: "127.0.0.1", port: 9999, value: "0.0.0.0:9999"}
 */
export function ollamaAddress(raw: string | undefined): { host: string; port: number; value: string } {
  const value = raw?.trim() || "127.0.0.1:11434";
  const url = new URL(/^[a-z]+:\/\//i.test(value) ? value : `http://${value}`);
  const host = !url.hostname || url.hostname === "0.0.0.0" ? "127.0.0.1" : url.hostname.replace(/^\[|\]$/g, "");
  return { host, port: url.port ? Number(url.port) : 11434, value };
}

/**
 * Ollama: no process per replica. The daemon at OLLAMA_HOST serves every Ollama workload; the agent
 * starts `ollama serve` when it is installed and not running, `ollama pull`s the model (progress in
 * the replica's log), then forwards to the daemon's OpenAI-style routes.
 */
export const ollama: Launcher = (ctx) => {
  const addr = ollamaAddress(ctx.env.OLLAMA_HOST);
  const base = baseUrlOf(addr.host, addr.port);
  const bin = ctx.which("ollama");
  const env = { OLLAMA_HOST: addr.value };
  const model = ctx.spec.workload.model_name;
  return {
    env,
    baseUrl: base,
    healthUrls: [`${base}/api/version`],
    prep: [
      bin
        ? { title: `ollama pull ${model}`, argv: [bin, "pull", model], env }
        : { title: `ollama pull ${model}`, ollamaPull: { baseUrl: base, model } },
    ],
    daemon: bin ? { key: `ollama@${base}`, argv: [bin, "serve"], env, healthUrl: `${base}/api/version` } : undefined,
    // The daemon's OLLAMA_NUM_PARALLEL (requests per model at once), as set for the agent; else 1.
    slots: Number(ctx.env.OLLAMA_NUM_PARALLEL) || 1,
  };
};
