/**
 * Getting a replica's model before its runtime starts: the models its command names are pulled
 * into the store (with progress), and the command is rewritten to the local files; hub repos for
 * vLLM/SGLang are read from the store through HF_HOME. Repos already in the user's own Hugging Face
 * cache, or any pull while HF_HUB_OFFLINE is set, are left to the runtime as before.
 */
import { existsSync, readdirSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { joinCommand, splitCommand } from "./command";
import { modelRefs, rewriteCommand, type ModelRef } from "./model-refs";
import { DownloadLimiter } from "./models/download";
import { HubClient } from "./models/hub";
import type { ModelSource } from "./models/source";
import { pullModel, type PullProgress } from "./models/pull";
import { hfHome } from "./models/store";
import { makeResolver, type AddressPolicy } from "./net/address";
import { guardedFetch } from "./net/guarded-fetch";
import type { ReplicaSpec, TransferProgress } from "./protocol";

/** What a pull gives a replica: the path to hand the runtime and, for hub repos, the HF home holding it. */
export interface PulledEntry {
  entry: string;
  /** The vision projector pulled with a GGUF quant (absolute), for llama.cpp's `--mmproj`. */
  projector?: string;
  hfHome?: string;
}

/**
 * Pulls one model (joining a pull of the same model already under way), reporting progress.
 * `workload` is the one it is pulled for (the host's store counts it against its project); with
 * `guard` (a tenant's workload), a URL source and every redirect hop must pass the address rules.
 */
export type ModelPuller = (
  source: ModelSource,
  onProgress: (p: TransferProgress) => void,
  signal: AbortSignal,
  opts?: PullFor,
) => Promise<PulledEntry>;

/** For whom a replica's model is pulled, and under which address rules. */
export interface PullFor {
  workload?: Pick<ReplicaSpec["workload"], "id" | "project_slug">;
  guard?: AddressPolicy;
}

/** The hub client a pull of `source` uses: `hub`, or for a guarded URL pull one whose fetch checks every hop. */
export function hubFor(hub: HubClient, source: ModelSource, guard: AddressPolicy | undefined): HubClient {
  return guard && source.kind === "url" ? hub.withFetch(guardedFetch(guard)) : hub;
}

/** A spec ready to launch: the command rewritten to local files, and the environment the models need. */
export interface ResolvedModels {
  spec: ReplicaSpec;
  env: Record<string, string>;
}

/** The common shape of pull progress for replica reports. */
export const toTransfer = (p: PullProgress): TransferProgress => ({
  bytes_done: p.bytes_done,
  bytes_total: p.bytes_total,
  percent: p.percent,
  rate_bps: p.rate_bps,
  eta_s: p.eta_s,
  file: p.file,
});

/** A puller that fetches into `<dataDir>/models` on this machine (remote agents, and the CLI). */
export function directPuller(
  dataDir: string,
  env: Record<string, string | undefined>,
  limiter = new DownloadLimiter(4),
): ModelPuller {
  const hub = new HubClient({ endpoint: env.HF_ENDPOINT || undefined, token: env.HF_TOKEN || undefined });
  const modelsDir = join(dataDir, "models");
  return async (source, onProgress, signal, opts = {}) => {
    const via = hubFor(hub, source, opts.guard);
    const plan = await via.plan(source);
    const pulled = await pullModel(plan, {
      modelsDir,
      hub: via,
      limiter,
      signal,
      onProgress: (p) => onProgress(toTransfer(p)),
    });
    return {
      entry: pulled.entry,
      ...(pulled.projector ? { projector: pulled.projector } : {}),
      ...(source.kind === "hf-repo" ? { hfHome: hfHome(modelsDir) } : {}),
    };
  };
}

/** True when the user's own Hugging Face cache already holds a snapshot of `repo`. */
export function inUserHfCache(repo: string, env: Record<string, string | undefined>): boolean {
  const home = env.HF_HOME || join(env.XDG_CACHE_HOME || join(env.HOME || homedir(), ".cache"), "huggingface");
  const snapshots = join(env.HF_HUB_CACHE || join(home, "hub"), `models--${repo.replace("/", "--")}`, "snapshots");
  return existsSync(snapshots) && readdirSync(snapshots).length > 0;
}

/** Whether a reference is left to the runtime: a hub repo it can get on its own terms. */
function leftToRuntime(ref: ModelRef, env: Record<string, string | undefined>): boolean {
  if (ref.source.kind !== "hf-repo") return false;
  return !!env.HF_HUB_OFFLINE || inUserHfCache(ref.source.repo, env);
}

/**
 * Pulls what the replica's command names and returns the spec to launch. `onDownloading` is called
 * once per model before its pull starts (the replica reports `downloading`), `onProgress` as it goes.
 */
export async function resolveModels(
  spec: ReplicaSpec,
  env: Record<string, string | undefined>,
  pull: ModelPuller,
  hooks: { onDownloading(what: string): void; onProgress(p: TransferProgress): void; signal: AbortSignal },
): Promise<ResolvedModels> {
  const command = spec.workload.config.command;
  if (typeof command !== "string") return { spec, env: {} };
  const words = splitCommand(command);
  const refs = modelRefs(spec.workload.backend, words).filter((r) => !leftToRuntime(r, env));
  if (refs.length === 0) return { spec, env: {} };
  const resolved: { ref: ModelRef; entry: string; projector?: string }[] = [];
  const extra: Record<string, string> = {};
  // A tenant's workload (it carries the launch policy): its model URLs obey the address rules.
  const guard = spec.policy ? { allowPrivate: spec.policy.private_model_urls, resolve: makeResolver() } : undefined;
  for (const ref of refs) {
    hooks.onDownloading(describeSource(ref.source));
    const got = await pull(ref.source, hooks.onProgress, hooks.signal, { workload: spec.workload, guard });
    resolved.push({ ref, entry: got.entry, ...(got.projector ? { projector: got.projector } : {}) });
    if (got.hfHome) Object.assign(extra, { HF_HOME: got.hfHome, HF_HUB_OFFLINE: "1" });
  }
  const config = { ...spec.workload.config, command: joinCommand(rewriteCommand(words, resolved)) };
  return { spec: { ...spec, workload: { ...spec.workload, config } }, env: extra };
}

/** A source as a person would write it. */
export function describeSource(s: ModelSource): string {
  switch (s.kind) {
    case "hf-repo":
      return `hf:${s.repo}${s.revision !== "main" ? `@${s.revision}` : ""}`;
    case "hf-file":
      return `hf:${s.repo}/${s.file}`;
    case "hf-quant":
      return s.defaulted ? `hf:${s.repo} (default quant)` : `hf:${s.repo}:${s.quant}`;
    case "url":
      return s.url;
    default:
      return s.path;
  }
}
