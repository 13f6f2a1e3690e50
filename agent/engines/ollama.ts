/**
 * Ollama: no process per replica. The daemon at OLLAMA_HOST serves every Ollama workload; the agent
 * starts `ollama serve` when it is installed and not running, `ollama pull`s the model (progress in
 * the replica's log), then forwards to the daemon's OpenAI-style routes. The fake that stands for it
 * is `test/fixtures/bin/ollama` (test/fixtures/ollama/).
 */
import { baseUrlOf } from "../runtimes/args";
import type { Engine } from "./types";

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
      daemon: bin ? { key: `ollama@${base}`, argv: [bin, "serve"], env, healthUrl: `${base}/api/version` } : undefined,
      slots: ollama.capacity({ args: [], gpus: ctx.gpus, env: ctx.env }).slots,
    };
  },
  fake: "test/fixtures/bin/ollama",
};
