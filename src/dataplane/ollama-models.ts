/**
 * What the Ollama API says about models: `/api/tags` (the models the key may call, left out when no
 * workload could answer for them: failed or stopped, ./offered.ts), `/api/ps` (those
 * with a ready replica) and `/api/show` (one model). Names are the ones the project base routes by
 * (model names and aliases, ./target.ts); details come from the model store's metadata when it knows
 * the workload's model, else from what the name says (`Qwen3-8B` → 8B, `…-Q4_K_M` → Q4_K_M).
 */
import { engineOf } from "../../agent/engines";
import { createHash } from "node:crypto";
import type { JsonObject } from "./anthropic";
import type { DataplaneDeps } from "./service";
import type { Workload } from "../workloads/service";
import type { ModelInfo } from "../models/fit";
import { quantOf } from "../models/discover";
import { modelOfWorkload } from "../models/service";
import type { RouteBase } from "./target";
import { offeredModels } from "./offered";

/** What the model store knows of a workload's model (its shape, the command's context), or nulls. */
export interface KnownModel {
  info: ModelInfo | null;
  context?: number;
}

/**
 * A parameter count as Ollama prints it (`8.0B`, `494.03M`), else the size in a model's name.
 * @example parameterSizeOf(null, "Qwen/Qwen3-8B") // → "8B"
 */
export function parameterSizeOf(parameters: number | null | undefined, name: string): string {
  if (parameters && parameters >= 1e9) return `${(parameters / 1e9).toFixed(1)}B`;
  if (parameters && parameters >= 1e6) return `${(parameters / 1e6).toFixed(2)}M`;
  if (parameters && parameters > 0) return String(parameters);
  const m = /(?:^|[-_/:.])(\d+(?:\.\d+)?)([bm])(?=$|[-_/:.])/i.exec(name);
  return m ? `${m[1]}${m[2].toUpperCase()}` : "";
}

/** Ollama's `details` of a workload's model: format, family, parameter size and quantization where known. */
export function detailsOf(w: Pick<Workload, "backend" | "model_name">, known: KnownModel): JsonObject {
  const info = known.info;
  const family = info?.architecture ?? "";
  return {
    parent_model: "",
    format: info?.format ?? (w.backend === "llamacpp" ? "gguf" : ""),
    family,
    families: family ? [family] : null,
    parameter_size: parameterSizeOf(info?.parameters, w.model_name),
    quantization_level: info?.quantization ?? quantOf(w.model_name) ?? "",
  };
}

/** A stable digest for a name of a workload (Ollama lists a manifest digest; inferd has none). */
const digestOf = (w: Workload, name: string) => createHash("sha256").update(`${w.id}:${name}`).digest("hex");

/** A stored timestamp as an ISO string (now when it does not parse). */
const isoOf = (s: string) => {
  const t = Date.parse(s);
  return new Date(Number.isFinite(t) ? t : Date.now()).toISOString();
};

/** One `/api/tags` entry for `name` served by `w`. */
export function tagOf(name: string, w: Workload, known: KnownModel): JsonObject {
  return {
    name,
    model: name,
    modified_at: isoOf(w.updated_at),
    size: known.info?.weights_bytes ?? 0,
    digest: digestOf(w, name),
    details: detailsOf(w, known),
  };
}

/** Ollama keeps a model with `keep_alive: -1` loaded "forever": its expiry is now plus Go's longest duration (~292 years). */
const FOREVER_MS = 9_223_372_036_854;

/** One `/api/ps` entry: a tag plus the expiry (a replica stays until scaled away), the memory and context. */
export function runningOf(name: string, w: Workload, known: KnownModel, now = Date.now()): JsonObject {
  const tag = tagOf(name, w, known);
  const ctx = known.context ?? known.info?.context_length ?? undefined;
  const { modified_at: _m, ...rest } = tag;
  return {
    ...rest,
    expires_at: new Date(now + FOREVER_MS).toISOString(),
    size_vram: tag.size,
    ...(ctx ? { context_length: ctx } : {}),
  };
}

/** Whether a workload's runtime was started able to call tools (the engine's flag for it). */
function toolsOn(w: Workload): boolean {
  const command = typeof w.config.command === "string" ? w.config.command : "";
  return engineOf(w.backend)?.toolsOn(command.split(/\s+/)) ?? true;
}

/** Ollama's `capabilities` of a workload: embedding, or completion (with tools and vision when it has them). */
export function capabilitiesOf(w: Workload): string[] {
  if (w.task_type === "embedding") return ["embedding"];
  const caps = ["completion"];
  if (toolsOn(w)) caps.push("tools");
  if (w.task_type === "image2text") caps.push("vision");
  return caps;
}

/** The `/api/show` answer for a workload inferd translates for: details, the known `model_info`, capabilities. */
export function showOf(w: Workload, known: KnownModel): JsonObject {
  const info = known.info;
  const arch = info?.architecture ?? "";
  const modelInfo: JsonObject = { "general.architecture": arch, "general.basename": w.model_name };
  if (info?.parameters) modelInfo["general.parameter_count"] = info.parameters;
  const ctx = known.context ?? info?.context_length;
  const prefix = arch || "general";
  if (ctx) modelInfo[`${prefix}.context_length`] = ctx;
  if (info?.embedding_length) modelInfo[`${prefix}.embedding_length`] = info.embedding_length;
  return {
    modelfile: `# Served by inferd (${w.backend}) as ${w.project_slug}/${w.slug}\nFROM ${w.model_name}\n`,
    details: detailsOf(w, known),
    model_info: modelInfo,
    capabilities: capabilitiesOf(w),
    modified_at: isoOf(w.updated_at),
  };
}

/** What the model store knows of a workload's model; nothing when it does not (or cannot say). */
export async function knownModelOf(deps: Pick<DataplaneDeps, "db">, w: Workload): Promise<KnownModel> {
  const found = await modelOfWorkload(deps.db, w).catch(() => null);
  return { info: found?.info ?? null, context: found?.context };
}

/** The offered names (./offered.ts) with their workloads, and what the store knows of each workload (by id). */
async function listed(deps: Pick<DataplaneDeps, "db">, request: Request, base: RouteBase) {
  const models = await offeredModels(deps, request, base);
  const ws = new Map(models.flatMap(({ workloads }) => workloads.map((w) => [w.id, w] as const)));
  const known = new Map(
    await Promise.all([...ws.values()].map(async (w) => [w.id, await knownModelOf(deps, w)] as const)),
  );
  return { models, known };
}

/** `GET /api/tags`: every model the key may call on this base. */
export async function tagsOf(
  deps: Pick<DataplaneDeps, "db">,
  request: Request,
  base: RouteBase,
): Promise<{ models: JsonObject[] }> {
  const { models, known } = await listed(deps, request, base);
  return { models: models.map(({ id, workloads: [w] }) => tagOf(id, w, known.get(w.id)!)) };
}

/** `GET /api/ps`: the models the key may call that have a ready replica now. */
export async function psOf(
  deps: Pick<DataplaneDeps, "db" | "fleet">,
  request: Request,
  base: RouteBase,
): Promise<{ models: JsonObject[] }> {
  const { models, known } = await listed(deps, request, base);
  const ready = (w: Workload) => deps.fleet.dispatcher.targetsOf(w.id).length > 0;
  return {
    models: models.flatMap(({ id, workloads }) => {
      const w = workloads.find(ready);
      return w ? [runningOf(id, w, known.get(w.id)!)] : [];
    }),
  };
}
