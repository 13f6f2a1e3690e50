/**
 * What a replica needs to sleep and wake its runtime: the engine's calls made in order against its
 * base URL, and the size of the weights a level-1 sleep holds in host RAM.
 */
import { readdirSync, statSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import type { Engine, RuntimeCall } from "./engines/types";

/** How a run of calls ended: every one 2xx, or the first that was not (status 0: no answer). */
export type CallsResult = { ok: true } | { ok: false; call: RuntimeCall; status: number; body: string };

/** How long one sleep or wake call may take (a level-2 wake reads the weights again). */
const CALL_TIMEOUT_MS = 10 * 60_000;

/**
 * Makes `calls` in order against `baseUrl` (with the runtime's key), stopping at the first that does
 * not answer 2xx.
 * @example await runCalls("http://127.0.0.1:8000", [{ method: "POST", path: "/sleep?level=1" }])
 */
export async function runCalls(baseUrl: string, calls: RuntimeCall[], apiKey?: string): Promise<CallsResult> {
  for (const call of calls) {
    const headers: Record<string, string> = apiKey ? { authorization: `Bearer ${apiKey}` } : {};
    if (call.body !== undefined) headers["content-type"] = "application/json";
    try {
      const r = await fetch(`${baseUrl}${call.path}`, {
        method: call.method,
        headers,
        body: call.body === undefined ? undefined : JSON.stringify(call.body),
        signal: AbortSignal.timeout(CALL_TIMEOUT_MS),
      });
      const body = await r.text();
      if (!r.ok) return { ok: false, call, status: r.status, body: body.slice(0, 500) };
    } catch (e) {
      return { ok: false, call, status: 0, body: (e as Error).message };
    }
  }
  return { ok: true };
}

/** Bytes of the regular files under `path` (a file or a folder, a few levels deep); undefined when it is not there. */
function bytesOnDisk(path: string, depth = 4): number | undefined {
  try {
    const st = statSync(path);
    if (st.isFile()) return st.size;
    if (!st.isDirectory() || depth === 0) return 0;
    return readdirSync(path).reduce((sum, name) => sum + (bytesOnDisk(join(path, name), depth - 1) ?? 0), 0);
  } catch {
    return undefined;
  }
}

/**
 * The size (MiB) of the model a command loads, from its files on disk: a local path, or a hub repo
 * (`owner/name`) in the Hugging Face cache the runtime reads (`HF_HUB_CACHE`, else `HF_HOME`/hub,
 * else ~/.cache/huggingface/hub: its newest snapshot, whose files link to the blobs); undefined when
 * neither is on disk.
 * @example weightsMib(vllm, ["vllm", "serve", "Qwen/Qwen3-8B"], { HF_HOME: "/models/hf" }) // → 15623
 */
export function weightsMib(
  engine: Engine,
  argv: string[],
  env: Record<string, string | undefined> = {},
): number | undefined {
  const flag = engine.flags.model.map((f) => argv.indexOf(f)).find((i) => i >= 0);
  const serve = argv.indexOf("serve");
  const model =
    flag !== undefined ? argv[flag + 1] : serve >= 0 && !argv[serve + 1]?.startsWith("-") ? argv[serve + 1] : undefined;
  const path = !model ? undefined : model.startsWith("/") ? model : hubSnapshot(model, env);
  const bytes = path === undefined ? undefined : bytesOnDisk(path);
  return bytes === undefined ? undefined : Math.round(bytes / (1024 * 1024));
}

/** The newest snapshot folder of hub repo `repo` in the Hugging Face cache `env` points at, if any. */
function hubSnapshot(repo: string, env: Record<string, string | undefined>): string | undefined {
  if (!/^[A-Za-z0-9][\w.-]*\/[\w.-]+$/.test(repo)) return undefined;
  const home = env.HF_HOME || join(env.XDG_CACHE_HOME || join(env.HOME || homedir(), ".cache"), "huggingface");
  const snapshots = join(env.HF_HUB_CACHE || join(home, "hub"), `models--${repo.replace("/", "--")}`, "snapshots");
  try {
    const all = readdirSync(snapshots).map((name) => join(snapshots, name));
    return all.sort((a, b) => statSync(b).mtimeMs - statSync(a).mtimeMs)[0];
  } catch {
    return undefined;
  }
}

/** A refusal in words for the replica's report and log. */
export function refusal(r: Extract<CallsResult, { ok: false }>): string {
  const what = `${r.call.method} ${r.call.path}`;
  return r.status === 0 ? `${what} got no answer (${r.body})` : `${what} answered ${r.status}: ${r.body.trim()}`;
}
