/**
 * Finding a model by name: the Hugging Face hub's search (GGUF repos for llama.cpp, safetensors
 * repos for vLLM and SGLang) through the puller's own hub client, or the Ollama library for the
 * `ollama` backend; each hit with what it would pull (per quantisation), its size and whether it
 * fits on this cluster's GPUs (weights and overhead against free GPU memory, else free RAM).
 */
import type { Db } from "../db";
import { AppError } from "../errors";
import { freeMemoryNow } from "../workers/snapshot";
import { ENGINES } from "../../agent/engines";
import { HubError, type HubClient, type HubHit } from "../../agent/models/hub";
import { bestProjector, quantGroups, snapshotFiles } from "../../agent/models/select";
import { estimateFromSize, fitOnGpus } from "./fit";
import {
  ollamaLibraryUrl,
  paramsOfSize,
  Q4_K_M_BYTES_PER_PARAM,
  searchOllamaLibrary,
  type OllamaLibraryModel,
} from "./ollama-library";

/** Backends a search is for (every engine); they decide where it looks and what a hit offers. */
export const SEARCH_BACKENDS = Object.keys(ENGINES);
/** A backend a search is for: `llamacpp` looks for GGUF repos, `ollama` in its library, the others for safetensors repos. */
export type SearchBackend = string;

/** Whether a model of some size fits here: on one GPU (or all of a worker's), in RAM, not at all, or unknown (no worker, no size). */
export interface SearchFit {
  verdict: "gpu" | "ram" | "too_big" | "unknown";
  /** Weights plus overhead (no KV cache yet), in MiB; null when the size is unknown. */
  needs_mib: number | null;
  /** Where it fits best, e.g. "GPU 1 (NVIDIA GeForce RTX 4090) on gpu-box: 23.1 GiB free". */
  where: string | null;
}

/** One thing a hit offers to pull or serve: a quantisation, a whole snapshot, or an Ollama tag. */
export interface SearchOffer {
  /** `Q4_K_M`, `snapshot`, or an Ollama size tag (`0.5b`). */
  label: string;
  /** What to pull or name in a command: `hf:owner/repo:Q4_K_M`, `hf:owner/repo`, `qwen2.5:0.5b`. */
  source: string;
  files: number;
  size_bytes: number | null;
  /** The size is reckoned from the parameter count (Ollama tags), not read from files. */
  estimated: boolean;
  /** The vision projector a quant's pull takes with it (counted in `files` and `size_bytes`), else null. */
  projector_bytes: number | null;
  fit: SearchFit;
}

/** One search hit. */
export interface SearchHit {
  id: string;
  url: string;
  description: string | null;
  downloads: number | null;
  likes: number | null;
  gated: false | string;
  offers: SearchOffer[];
  /** Why there is nothing to offer (a gated listing, no GGUF model in the repo…). */
  note: string | null;
}

/** The answer of a search. */
export interface SearchAnswer {
  query: string;
  backend: SearchBackend;
  from: "huggingface" | "ollama";
  hits: SearchHit[];
}

/** Hits a search answers with (each one costs a file listing on the hub). */
const HITS = 8;

/** How a model of some size fits here. */
type Fitter = (bytes: number | null) => SearchFit;

/** The fit of a size on the workers now (read once): one GPU, all of one worker's GPUs, else RAM. */
async function fitter(db: Db): Promise<Fitter> {
  const now = await freeMemoryNow(db);
  return (bytes) => fitOn(now, bytes);
}

/** The fit of `bytes` on `workers`, best first: one GPU, all of one worker's GPUs, RAM. */
function fitOn({ workers, free }: Awaited<ReturnType<typeof freeMemoryNow>>, bytes: number | null): SearchFit {
  if (bytes === null || workers.length === 0)
    return {
      verdict: "unknown",
      needs_mib: bytes === null ? null : Math.ceil(estimateFromSize(bytes).total_bytes / 1048576),
      where: null,
    };
  const need = estimateFromSize(bytes).total_bytes;
  const needs_mib = Math.ceil(need / 1048576);
  const gib = (mib: number) => `${(mib / 1024).toFixed(1)} GiB free`;
  for (const count of [1, 0]) {
    for (const w of workers) {
      const gpus = free.get(w.id) ?? [];
      const n = count || gpus.length;
      if (!gpus.length || (count === 0 && n < 2)) continue;
      const fit = fitOnGpus(need, gpus, n);
      if (!fit.fits) continue;
      const g = gpus.find((x) => x.index === fit.gpus[0])!;
      const where =
        n === 1
          ? `GPU ${g.index} (${g.name}) on ${w.name}: ${gib(g.free_mib)}`
          : `${n} GPUs on ${w.name}: ${gib(fit.free_mib.reduce((a, b) => a + b, 0))}`;
      return { verdict: "gpu", needs_mib, where };
    }
  }
  for (const w of workers) {
    const ram = w.ramFreeBytes;
    if (ram >= need) return { verdict: "ram", needs_mib, where: `RAM of ${w.name}: ${gib(Math.floor(ram / 1048576))}` };
  }
  return { verdict: "too_big", needs_mib, where: null };
}

/** A hub hit with its offers: each GGUF quantisation, or the snapshot a safetensors runtime reads. */
async function hubHit(fit: Fitter, hub: HubClient, hit: HubHit, gguf: boolean): Promise<SearchHit> {
  const base = {
    id: hit.id,
    url: `${hub.endpoint}/${hit.id}`,
    description: hit.pipeline_tag,
    downloads: hit.downloads,
    likes: hit.likes,
    gated: hit.gated,
  };
  let files;
  try {
    files = await hub.listFiles(hit.id, "main");
  } catch (e) {
    if (e instanceof HubError) return { ...base, offers: [], note: e.message };
    throw e;
  }
  if (!gguf) {
    const snap = snapshotFiles(files);
    const size = snap.filter((f) => /\.(safetensors|bin|pt|pth)$/i.test(f.path)).reduce((s, f) => s + f.size, 0);
    if (!size) return { ...base, offers: [], note: "no safetensors weights in this repo" };
    return {
      ...base,
      offers: [
        {
          label: "snapshot",
          source: `hf:${hit.id}`,
          files: snap.length,
          size_bytes: size,
          estimated: false,
          projector_bytes: null,
          fit: fit(size),
        },
      ],
      note: null,
    };
  }
  const groups = quantGroups(files);
  const offers = groups.map((g) => {
    // A quant comes with the repo's vision projector, as llama.cpp's `-hf` fetches it (agent/models/hub.ts).
    const projector = g.quant ? bestProjector(files, g.entry) : undefined;
    const size = g.size + Math.max(0, projector?.size ?? 0);
    return {
      label: g.quant || g.entry,
      source: g.quant ? `hf:${hit.id}:${g.quant}` : `hf:${hit.id}/${g.entry}`,
      files: g.files.length + (projector ? 1 : 0),
      size_bytes: size,
      estimated: false,
      projector_bytes: projector ? projector.size : null,
      fit: fit(size),
    };
  });
  return { ...base, offers, note: offers.length ? null : "no GGUF model files in this repo" };
}

/** An Ollama library model with an offer per size tag (size reckoned as Q4_K_M, Ollama's default). */
function ollamaHit(fit: Fitter, base: string, m: OllamaLibraryModel): SearchHit {
  const offers = (m.sizes.length ? m.sizes : ["latest"]).map((tag) => {
    const params = paramsOfSize(tag);
    const size = params === null ? null : Math.round(params * Q4_K_M_BYTES_PER_PARAM);
    return {
      label: tag,
      source: `${m.name}:${tag}`,
      files: 1,
      size_bytes: size,
      estimated: true,
      projector_bytes: null,
      fit: fit(size),
    };
  });
  return {
    id: m.name,
    url: `${base}/library/${m.name}`,
    description: m.description || null,
    downloads: null,
    likes: null,
    gated: false,
    offers,
    note: null,
  };
}

/** Whether `HF_HUB_OFFLINE` says offline, as huggingface_hub reads it (1, ON, YES or TRUE, any case). */
export const hubOffline = (env: Record<string, string | undefined>): boolean =>
  ["1", "ON", "YES", "TRUE"].includes((env.HF_HUB_OFFLINE ?? "").trim().toUpperCase());

/**
 * Searches for `query` where `backend`'s models come from. A hub or library that cannot be reached
 * (or refuses) is a 502 saying so. With `HF_HUB_OFFLINE` set, a hub search is a 503 before any
 * lookup: offline means not even the hub's name is resolved.
 */
export async function searchModels(
  db: Db,
  hub: HubClient,
  env: Record<string, string | undefined>,
  query: string,
  backend: SearchBackend,
): Promise<SearchAnswer> {
  if (backend !== "ollama" && hubOffline(env)) {
    throw new AppError(
      503,
      "upstream_unavailable",
      `HF_HUB_OFFLINE=${env.HF_HUB_OFFLINE} is set: inferd does not contact the Hugging Face hub (${hub.endpoint}), so it cannot search it; unset HF_HUB_OFFLINE and restart to search`,
    );
  }
  const fit = await fitter(db);
  try {
    if (backend === "ollama") {
      const base = ollamaLibraryUrl(env);
      const found = (await searchOllamaLibrary(query, base)).slice(0, HITS);
      return { query, backend, from: "ollama", hits: found.map((m) => ollamaHit(fit, base, m)) };
    }
    const gguf = backend === "llamacpp";
    const hits = await hub.search(query, { filter: gguf ? "gguf" : "safetensors", limit: HITS });
    return { query, backend, from: "huggingface", hits: await Promise.all(hits.map((h) => hubHit(fit, hub, h, gguf))) };
  } catch (e) {
    if (e instanceof AppError) throw e;
    const where =
      backend === "ollama" ? `the Ollama library (${ollamaLibraryUrl(env)})` : `the Hugging Face hub (${hub.endpoint})`;
    throw new AppError(502, "upstream_unavailable", `searching ${where} failed: ${(e as Error).message}`);
  }
}
