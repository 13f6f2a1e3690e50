import { and, asc, eq } from "drizzle-orm";
import type { Db } from "../db";
import { storeLookup } from "../db/memo";
import { first } from "../db/raw";
import { projects, workloads } from "../db/schema";
import { conflict, fromSchemaIssue, notFound, validation } from "../errors";
import { newId, nowIso } from "../ids";
import { uniqueSlug } from "../projects/service";
import { splitCommand } from "../../agent/command";
import { taskFlagProblem } from "../../agent/runtimes/task-flags";
import {
  CONFIG_BY_BACKEND,
  defaultRouting,
  GROUP_FLAGS,
  RESERVED_SLUGS,
  MULTINODE_BACKENDS,
  TOGGLES,
  type Backend,
  type Routing,
  type ExecutionPolicy,
  type ToggleMap,
  type WorkloadCreate,
  type WorkloadUpdate,
} from "./schema";
import { DEFAULTS, PARAMS_BY_POLICY } from "../execution/schema";
import { audit, diffOf, fieldsOf } from "../audit/service";

/** A workload as the control plane returns it (the contract's response fields). */
export interface WorkloadView {
  id: string;
  name: string;
  description: string;
  slug: string;
  project_id: string;
  project_slug: string;
  workload_slug: string;
  task_type: string;
  backend: string;
  model_name: string;
  config: Record<string, unknown>;
  worker_id: string | null;
  gpu_resource_id: string | null;
  /** Machines one replica spans (1: a single worker). */
  nodes: number;
  /** Other names the project base URL (`/endpoint/<project>/v1`) routes to this workload. */
  aliases: string[];
  /** Workload slugs of the project tried in order when this one fails before answering. */
  fallbacks: string[];
  execution_policy: string;
  /** The policy's parameters with defaults filled in. */
  execution_params: Record<string, unknown>;
  /** How requests are spread over the replicas: the one set, else the task type's default. */
  routing: Routing;
  /** True when `routing` is the task type's default (none was set). */
  routing_is_default: boolean;
  /**
   * Volatile lines coding agents put at the top of a prompt (Claude Code's `x-anthropic-billing-header`)
   * are removed before routing and before the runtime sees it, so conversations share its prefix cache.
   */
  stable_prompts: boolean;
  created_at: string;
  updated_at: string;
}

/** A stored workload with its project slug and parsed JSON columns: what the serving side uses. */
export interface Workload extends WorkloadView {
  endpoints: ToggleMap;
  /** Who last set the command: `admin` (trusted) or `tenant` (a control-plane key; the launch policy applies). */
  config_origin: Origin;
  /** Stopped by the operator: no replica runs until started again. */
  paused: boolean;
  /** Until when the request inspector keeps this workload's bodies (ISO time; admin only, see src/workloads/capture.ts), or null. */
  capture_until: string | null;
}

type Row = typeof workloads.$inferSelect;

function toWorkload(r: Row, projectSlug: string): Workload {
  return {
    id: r.id,
    name: r.name,
    description: r.description,
    slug: r.slug,
    project_id: r.projectId,
    project_slug: projectSlug,
    workload_slug: r.slug,
    task_type: r.taskType,
    backend: r.backend,
    model_name: r.modelName,
    config: JSON.parse(r.config),
    worker_id: r.workerId,
    gpu_resource_id: r.gpuResourceId,
    nodes: r.nodes,
    aliases: JSON.parse(r.aliases),
    fallbacks: JSON.parse(r.fallbacks),
    execution_policy: r.executionPolicy,
    execution_params: JSON.parse(r.executionParams),
    routing: (r.routing as Routing | null) ?? defaultRouting(r.taskType),
    routing_is_default: r.routing === null,
    stable_prompts: !!r.stablePrompts,
    config_origin: r.configOrigin,
    paused: r.paused,
    capture_until: r.captureUntil,
    created_at: r.createdAt,
    updated_at: r.updatedAt,
    endpoints: { ...allToggles(true), ...JSON.parse(r.endpoints) },
  };
}

/** The control-plane view: a workload without its dashboard-only fields (toggle map, origin). */
export function publicView(w: Workload): WorkloadView {
  const { endpoints: _toggles, config_origin: _origin, paused: _paused, capture_until: _capture, ...rest } = w;
  return rest;
}

const allToggles = (on: boolean) => Object.fromEntries(TOGGLES.map((t) => [t, on])) as ToggleMap;

/** Checks `config` against the backend's shape; errors name the field under `config`. */
export function checkConfig(backend: Backend, config: Record<string, unknown>): Record<string, unknown> {
  const r = CONFIG_BY_BACKEND[backend].safeParse(config);
  if (!r.success) {
    const issue = r.error.issues[0];
    const err = fromSchemaIssue("config", { ...issue, path: ["config", ...(issue.path as (string | number)[])] });
    if (issue.code === "invalid_type" && issue.path.length === 1 && issue.path[0] === "command") {
      throw validation("config.command", `is required for backend "${backend}"`);
    }
    throw err;
  }
  return r.data;
}

/**
 * Checks a policy's parameters against its schema and fills in the defaults; errors name the field
 * under `execution_params`.
 */
export function checkParams(policy: ExecutionPolicy, params: Record<string, unknown>): Record<string, unknown> {
  const r = PARAMS_BY_POLICY[policy].safeParse(params);
  if (!r.success) {
    const issue = r.error.issues[0];
    throw fromSchemaIssue("execution_params", {
      ...issue,
      path: ["execution_params", ...(issue.path as (string | number)[])],
    });
  }
  return { ...DEFAULTS[policy], ...r.data };
}

/**
 * Refuses (400) a multi-node workload its backend cannot run across machines, or whose command sets
 * a flag inferd sets itself on group members (ranks, rendezvous addresses, RPC servers).
 */
export function checkNodes(backend: string, config: Record<string, unknown>, nodes: number): void {
  if (nodes <= 1) return;
  if (!(MULTINODE_BACKENDS as readonly string[]).includes(backend)) {
    throw validation(
      "nodes",
      `backend "${backend}" runs on one machine; nodes > 1 needs ${MULTINODE_BACKENDS.join(", ")}`,
    );
  }
  const words = splitCommand(String(config.command ?? ""));
  const set = GROUP_FLAGS.find((f) => words.some((w) => w === f || w.startsWith(`${f}=`)));
  if (set)
    throw validation(
      "config.command",
      `sets ${set}, which inferd sets itself on each member of a multi-node group (nodes: ${nodes}); remove it`,
    );
}

/**
 * Refuses (400, at `config.command`) a command that cannot serve the workload's task type, naming
 * the flag to add (llama.cpp's `--embeddings`, SGLang's `--is-embedding`…: agent/runtimes/task-flags.ts).
 */
export function checkTaskFlags(backend: string, task: string, config: Record<string, unknown>): void {
  if (typeof config.command !== "string") return;
  const problem = taskFlagProblem(backend, task, splitCommand(config.command));
  if (problem) throw validation("config.command", problem);
}

/** A name as the project base matches it: Ollama's clients add `:latest`, which is tried without. */
const bareName = (name: string) => (name.endsWith(":latest") ? name.slice(0, -":latest".length) : name);

/** The other workloads of a project with the names the project base routes by. */
async function otherNames(db: Db, projectId: string, exceptId?: string) {
  const rows = await db
    .select({ id: workloads.id, slug: workloads.slug, modelName: workloads.modelName, aliases: workloads.aliases })
    .from(workloads)
    .where(eq(workloads.projectId, projectId));
  return rows
    .filter((o) => o.id !== exceptId)
    .map((o) => ({
      slug: o.slug,
      names: { slug: [o.slug], "model name": [o.modelName], alias: JSON.parse(o.aliases) as string[] },
    }));
}

type Others = Awaited<ReturnType<typeof otherNames>>;

/** Which name of another workload `name` would also answer to on the project base (`:latest` aside), or undefined. */
function nameClash(
  others: Others,
  name: string,
  kinds: ("slug" | "model name" | "alias")[] = ["slug", "model name", "alias"],
): { slug: string; kind: string } | undefined {
  const bare = bareName(name);
  for (const o of others)
    for (const kind of kinds) if (o.names[kind].some((n) => bareName(n) === bare)) return { slug: o.slug, kind };
  return undefined;
}

const slugTaken = (db: Db, projectId: string, exceptId?: string) => async (slug: string) =>
  RESERVED_SLUGS.includes(slug) || !!nameClash(await otherNames(db, projectId, exceptId), slug);

/**
 * Refuses (409 `slug_taken`) a chosen slug that is another workload's slug, model name or alias: the
 * project base would send that name's requests here too.
 */
async function requireFreeSlug(db: Db, projectId: string, exceptId: string | undefined, slug: string): Promise<void> {
  const clash = nameClash(await otherNames(db, projectId, exceptId), slug, ["model name", "alias"]);
  if (clash)
    throw conflict(
      `slug "${slug}" is already the ${clash.kind} of workload "${clash.slug}" in this project`,
      "slug_taken",
      "slug",
    );
}

/**
 * A workload's `aliases` or `fallbacks`, checked against the rest of its project: an alias is
 * not another workload's slug, model name or alias (`:latest` aside: Ollama's clients add it), so it
 * never takes another workload's requests; a fallback is another workload's slug. Duplicates are
 * dropped, order kept.
 */
async function checkRouting(
  db: Db,
  projectId: string,
  selfId: string | undefined,
  selfSlug: string,
  field: "aliases" | "fallbacks",
  values: string[],
): Promise<string[]> {
  const list = [...new Set(values)];
  if (!list.length) return list;
  const others = await otherNames(db, projectId, selfId);
  for (const [i, v] of list.entries()) {
    if (field === "aliases") {
      if (v === selfSlug) throw validation(`aliases.${i}`, `"${v}" is this workload's slug already`);
      const clash = nameClash(others, v);
      if (clash)
        throw conflict(
          `alias "${v}" is already the ${clash.kind} of workload "${clash.slug}" in this project`,
          "alias_taken",
          `aliases.${i}`,
        );
    } else {
      if (v === selfSlug) throw validation(`fallbacks.${i}`, "a workload cannot fall back to itself");
      if (!others.some((o) => o.slug === v)) throw validation(`fallbacks.${i}`, `no workload "${v}" in this project`);
    }
  }
  return list;
}

/** Who set a workload's command: the operator of the machine (an admin: trusted) or a tenant (everyone else: the launch policy applies). */
export type Origin = "admin" | "tenant";

/** The fields of a workload the audit log records when it is made or changed. */
const AUDITED: string[] = [
  "name",
  "description",
  "slug",
  "task_type",
  "backend",
  "model_name",
  "config",
  "worker_id",
  "gpu_resource_id",
  "nodes",
  "aliases",
  "fallbacks",
  "routing",
  "stable_prompts",
  "execution_policy",
  "execution_params",
];

/** Creates a workload in a project; every endpoint toggle starts on. */
export async function createWorkload(
  db: Db,
  project: { id: string; slug: string },
  input: WorkloadCreate,
  origin: Origin = "admin",
): Promise<Workload> {
  const config = checkConfig(input.backend, input.config ?? {});
  checkNodes(input.backend, config, input.nodes ?? 1);
  checkTaskFlags(input.backend, input.task_type ?? "text2text", config);
  if (input.slug !== undefined) await requireFreeSlug(db, project.id, undefined, input.slug);
  const now = nowIso();
  const slug = await uniqueSlug(input.name, input.slug, slugTaken(db, project.id), "workload");
  const row: Row = {
    id: newId("wl"),
    projectId: project.id,
    name: input.name,
    description: input.description ?? "",
    slug,
    taskType: input.task_type ?? "text2text",
    backend: input.backend,
    modelName: input.model_name,
    config: JSON.stringify(config),
    workerId: input.worker_id ?? null,
    gpuResourceId: input.gpu_resource_id ?? null,
    nodes: input.nodes ?? 1,
    aliases: JSON.stringify(await checkRouting(db, project.id, undefined, slug, "aliases", input.aliases ?? [])),
    fallbacks: JSON.stringify(await checkRouting(db, project.id, undefined, slug, "fallbacks", input.fallbacks ?? [])),
    routing: input.routing ?? null,
    stablePrompts: input.stable_prompts ?? true,
    captureUntil: null,
    executionPolicy: input.execution_policy ?? "fixed",
    executionParams: JSON.stringify(checkParams(input.execution_policy ?? "fixed", input.execution_params ?? {})),
    paused: false,
    endpoints: JSON.stringify(allToggles(true)),
    configOrigin: origin,
    createdAt: now,
    updatedAt: now,
  };
  await db.insert(workloads).values(row);
  const w = toWorkload(row, project.slug);
  await audit(
    db,
    "workload.create",
    { type: "workload", id: w.id, label: `${project.slug}/${w.slug}` },
    fieldsOf(w, AUDITED),
  );
  return w;
}

/**
 * The backend and config a patch would leave (checked against the backend's shape), for callers
 * that must judge them before saving (the launch policy).
 */
export function patchedLaunch(
  current: Workload,
  patch: WorkloadUpdate,
): { backend: Backend; config: Record<string, unknown> } {
  const backend = (patch.backend ?? current.backend) as Backend;
  const config =
    patch.config !== undefined || patch.backend !== undefined
      ? checkConfig(backend, patch.config ?? current.config)
      : current.config;
  return { backend, config };
}

/**
 * The policy and its checked parameters a patch would leave, or null when it sends neither. A new
 * policy without parameters starts from its defaults; the same one keeps what it had.
 */
export function patchedPolicy(
  current: Workload,
  patch: WorkloadUpdate,
): { policy: ExecutionPolicy; params: Record<string, unknown> } | null {
  if (patch.execution_policy === undefined && patch.execution_params === undefined) return null;
  const policy = (patch.execution_policy ?? current.execution_policy) as ExecutionPolicy;
  return {
    policy,
    params: checkParams(
      policy,
      patch.execution_params ?? (policy === current.execution_policy ? current.execution_params : {}),
    ),
  };
}

/**
 * Applies the sent fields only; `updated_at` moves only when something changed. A change of
 * backend or config records `origin` as who set the command.
 */
export async function updateWorkload(
  db: Db,
  current: Workload,
  patch: WorkloadUpdate,
  origin: Origin = "admin",
): Promise<Workload> {
  const { backend, config } = patchedLaunch(current, patch);
  checkNodes(backend, config, patch.nodes ?? current.nodes);
  if (patch.task_type !== undefined || patch.backend !== undefined || patch.config !== undefined)
    checkTaskFlags(backend, patch.task_type ?? current.task_type, config);
  if (patch.slug !== undefined && patch.slug !== current.slug)
    await requireFreeSlug(db, current.project_id, current.id, patch.slug);
  const set: Partial<Row> = {};
  if (patch.name !== undefined && patch.name !== current.name) set.name = patch.name;
  if (patch.description !== undefined && patch.description !== current.description) set.description = patch.description;
  if (patch.slug !== undefined && patch.slug !== current.slug)
    set.slug = await uniqueSlug(patch.slug, patch.slug, slugTaken(db, current.project_id, current.id), "workload");
  if (patch.task_type !== undefined && patch.task_type !== current.task_type) set.taskType = patch.task_type;
  if (backend !== current.backend) set.backend = backend;
  if (patch.model_name !== undefined && patch.model_name !== current.model_name) set.modelName = patch.model_name;
  if (JSON.stringify(config) !== JSON.stringify(current.config)) set.config = JSON.stringify(config);
  if ((set.backend !== undefined || set.config !== undefined) && origin !== current.config_origin)
    set.configOrigin = origin;
  if (patch.worker_id !== undefined && patch.worker_id !== current.worker_id) set.workerId = patch.worker_id;
  if (patch.gpu_resource_id !== undefined && patch.gpu_resource_id !== current.gpu_resource_id)
    set.gpuResourceId = patch.gpu_resource_id;
  if (patch.nodes !== undefined && patch.nodes !== current.nodes) set.nodes = patch.nodes;
  const slug = set.slug ?? current.slug;
  for (const field of ["aliases", "fallbacks"] as const) {
    const sent = patch[field];
    if (sent === undefined) continue;
    const checked = await checkRouting(db, current.project_id, current.id, slug, field, sent);
    if (JSON.stringify(checked) !== JSON.stringify(current[field])) set[field] = JSON.stringify(checked);
  }
  if (patch.routing !== undefined && patch.routing !== (current.routing_is_default ? null : current.routing))
    set.routing = patch.routing;
  if (patch.stable_prompts !== undefined && patch.stable_prompts !== current.stable_prompts)
    set.stablePrompts = patch.stable_prompts;
  if (patch.execution_policy !== undefined && patch.execution_policy !== current.execution_policy)
    set.executionPolicy = patch.execution_policy;
  const next = patchedPolicy(current, patch);
  if (next && JSON.stringify(next.params) !== JSON.stringify(current.execution_params))
    set.executionParams = JSON.stringify(next.params);
  if (Object.keys(set).length === 0) return current;
  set.updatedAt = nowIso();
  await db.update(workloads).set(set).where(eq(workloads.id, current.id));
  const after = (await getWorkloadById(db, current.id))!;
  await audit(
    db,
    "workload.update",
    { type: "workload", id: after.id, label: `${after.project_slug}/${after.slug}` },
    diffOf(current, after, AUDITED),
  );
  return after;
}

/** Sets some endpoint toggles and returns the whole map. */
export async function setToggles(db: Db, current: Workload, patch: Partial<ToggleMap>): Promise<ToggleMap> {
  const next = { ...current.endpoints };
  for (const t of TOGGLES) if (patch[t] !== undefined) next[t] = patch[t]!;
  await db
    .update(workloads)
    .set({ endpoints: JSON.stringify(next), updatedAt: nowIso() })
    .where(eq(workloads.id, current.id));
  await audit(
    db,
    "workload.endpoints",
    { type: "workload", id: current.id, label: `${current.project_slug}/${current.slug}` },
    diffOf(current.endpoints, next),
  );
  return next;
}

const joined = (db: Db) =>
  db
    .select({ w: workloads, projectSlug: projects.slug })
    .from(workloads)
    .innerJoin(projects, eq(projects.id, workloads.projectId));

/** A workload by its id, or undefined. */
export async function getWorkloadById(db: Db, id: string): Promise<Workload | undefined> {
  const r = await first(joined(db).where(eq(workloads.id, id)));
  return r && toWorkload(r.w, r.projectSlug);
}

/**
 * A workload by project slug and workload slug, or undefined: the data plane's lookup, from memory
 * while the store is unchanged (the value at once), else a promise of it.
 */
export function findWorkload(
  db: Db,
  projectSlug: string,
  workloadSlug: string,
): Workload | undefined | Promise<Workload | undefined> {
  // A newline is in no slug: a path segment holding one names no workload, wherever it is cut.
  return workloadBySlugs(db, `${projectSlug}\n${workloadSlug}`);
}

const workloadBySlugs = storeLookup(
  async (db, key) => {
    const cut = key.indexOf("\n");
    const [p, w] = [key.slice(0, cut), key.slice(cut + 1)];
    const r = await first(joined(db).where(and(eq(projects.slug, p), eq(workloads.slug, w))));
    return r && toWorkload(r.w, r.projectSlug);
  },
  ["workloads", "projects"],
);

/**
 * Every workload of a project by its slug, oldest first: the project base URL's routing table,
 * from memory while the store is unchanged (the value at once), else a promise of it.
 */
export const findProjectWorkloads = storeLookup(
  async (db, slug) => {
    const rows = await joined(db).where(eq(projects.slug, slug)).orderBy(asc(workloads.createdAt), asc(workloads.id));
    return rows.map((r) => toWorkload(r.w, r.projectSlug));
  },
  ["workloads", "projects"],
);

/** Every workload of a project, oldest first. */
export async function listWorkloads(db: Db, projectId: string): Promise<Workload[]> {
  const rows = await joined(db)
    .where(eq(workloads.projectId, projectId))
    .orderBy(asc(workloads.createdAt), asc(workloads.id));
  return rows.map((r) => toWorkload(r.w, r.projectSlug));
}

/** Every workload of every project: what the agents reconcile against. */
export async function listAllWorkloads(db: Db): Promise<Workload[]> {
  return (await joined(db).orderBy(asc(workloads.createdAt))).map((r) => toWorkload(r.w, r.projectSlug));
}

/** A workload by id (or by slug within `projectId`), or 404. */
export async function resolveWorkload(db: Db, idOrSlug: string, projectId?: string): Promise<Workload> {
  const byId = await getWorkloadById(db, idOrSlug);
  if (byId) return byId;
  if (projectId) {
    const r = await first(joined(db).where(and(eq(workloads.projectId, projectId), eq(workloads.slug, idOrSlug))));
    if (r) return toWorkload(r.w, r.projectSlug);
  }
  throw notFound(`workload "${idOrSlug}"`);
}

/** Deletes a workload; its runtimes are stopped by the agents' next reconcile. */
export async function deleteWorkload(db: Db, id: string): Promise<void> {
  const w = await getWorkloadById(db, id);
  await db.delete(workloads).where(eq(workloads.id, id));
  if (w) await audit(db, "workload.delete", { type: "workload", id, label: `${w.project_slug}/${w.slug}` });
}

/** What a capture change reads of the workload. */
export interface CaptureOf {
  id: string;
  slug: string;
  project_slug: string;
  capture_until: string | null;
}

/** Sets (or clears, with null) the workload's capture end, already checked; audited as `workload.capture`. */
export async function setCapture(db: Db, current: CaptureOf, until: string | null): Promise<void> {
  if (until === current.capture_until) return;
  await db.update(workloads).set({ captureUntil: until }).where(eq(workloads.id, current.id));
  await audit(
    db,
    "workload.capture",
    { type: "workload", id: current.id, label: `${current.project_slug}/${current.slug}` },
    { capture_until: { from: current.capture_until, to: until } },
  );
}

/** Sets or clears a workload's `paused` flag (stopped by the operator). */
export async function setPaused(db: Db, id: string, paused: boolean): Promise<void> {
  await db.update(workloads).set({ paused, updatedAt: nowIso() }).where(eq(workloads.id, id));
}
