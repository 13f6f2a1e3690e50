import { Elysia } from "elysia";
import type { LaunchPolicy } from "../../agent/launch-policy";
import type { WorkloadDetail } from "../workers/fleet";
import { jsonBody } from "../http";
import { forbidden, validation } from "../errors";
import { getProject } from "../projects/service";
import { canTouchWorkload, keyOf, principalOf, requireWorkloadScope } from "../auth/service";
import { isMachineOperator, type Principal } from "../users/access";
import { withoutOutput } from "../../agent/reason";
import { AdminWorkloadUpdate, TogglePatch, WorkloadCreate, WorkloadUpdate } from "./schema";
import {
  checkConfig,
  checkParams,
  createWorkload,
  deleteWorkload,
  getWorkloadById,
  listWorkloads,
  patchedLaunch,
  patchedPolicy,
  publicView,
  resolveWorkload,
  setCapture,
  setToggles,
  updateWorkload,
  type Origin,
  type Workload,
} from "./service";
import { checkCaptureUntil } from "./capture";
import { policyView, requireTenantLaunch } from "./launch-policy";
import { projectorOf } from "./projector";
import { requireOpenWorker } from "../workers/service";
import { requireReplicaRoom, requireWorkloadRoom } from "../limits/project";
import { requireModelRoom } from "../models/tenants";
import type { Db } from "../db";

/** What this module uses of the app's dependencies. */
interface Deps {
  db: Db;
  policy: LaunchPolicy;
  /** Told after a change that places workloads again. */
  events: { workloadsChanged(): Promise<void> };
  /** The admin view of a workload: the stored fields plus what the serving side knows. */
  describeWorkload(w: Workload): Promise<WorkloadDetail>;
  /** External providers' keys: taken out of a save's config, kept sealed, forgotten (src/providers). */
  providers: {
    take<S extends { backend?: string; config?: Record<string, unknown> }>(
      save: S,
      current?: Workload,
    ): { save: S; key?: string };
    store(workloadId: string, key: string): Promise<void>;
    forget(workloadId: string): Promise<void>;
  };
}

/** Keeps a provider workload's new key, or forgets the key of one that no longer calls a provider. */
async function keepProviderKey(deps: Deps, w: Workload, key: string | undefined, current?: Workload): Promise<void> {
  if (key !== undefined) await deps.providers.store(w.id, key);
  else if (current && current.backend !== w.backend) await deps.providers.forget(w.id);
}

/**
 * Refuses (429 `project_limit`) saving a workload that would pass one of its project's caps:
 * one workload more than `max_workloads`, replicas beyond `max_replicas`, a known model too big
 * for `model_bytes`. For an update (`current`) only what the patch changes is judged.
 */
async function requireProjectRoom(db: Db, projectId: string, body: WorkloadUpdate, current?: Workload): Promise<void> {
  if (!current) await requireWorkloadRoom(db, projectId);
  const policy = current
    ? patchedPolicy(current, body)
    : {
        policy: body.execution_policy ?? "fixed",
        params: checkParams(body.execution_policy ?? "fixed", body.execution_params ?? {}),
      };
  if (policy) await requireReplicaRoom(db, projectId, policy, current?.id);
  const launch = current
    ? patchedLaunch(current, body)
    : { backend: body.backend!, config: checkConfig(body.backend!, body.config ?? {}) };
  if (
    !current ||
    launch.backend !== current.backend ||
    JSON.stringify(launch.config) !== JSON.stringify(current.config)
  )
    await requireModelRoom(db, projectId, launch);
}

/**
 * Refuses what a tenant (anyone but the admin: an operator, a project key) may not save: a command,
 * `--port` or `nodes` the launch policy does not allow (403 `command_not_allowed`; judged when the
 * command or `nodes` changes), a pin to a worker not opened to the project (403 `worker_not_allowed`).
 */
async function requireTenantWorkload(
  deps: Deps,
  projectId: string,
  body: WorkloadUpdate,
  current?: Workload,
): Promise<void> {
  if (!current) {
    requireTenantLaunch(deps.policy, body.backend!, checkConfig(body.backend!, body.config ?? {}), body.nodes);
    await requireOpenWorker(deps.db, projectId, body);
    return;
  }
  const next = patchedLaunch(current, body);
  const changed =
    next.backend !== current.backend ||
    JSON.stringify(next.config) !== JSON.stringify(current.config) ||
    (body.nodes !== undefined && body.nodes !== current.nodes);
  if (changed) requireTenantLaunch(deps.policy, next.backend, next.config, body.nodes ?? current.nodes);
  await requireOpenWorker(deps.db, projectId, {
    worker_id: body.worker_id !== current.worker_id ? body.worker_id : undefined,
    gpu_resource_id: body.gpu_resource_id !== current.gpu_resource_id ? body.gpu_resource_id : undefined,
  });
}

/** Whose a command saved on /admin is: the admin's (trusted), else a tenant's (an operator). */
const originOf = (who: Principal): Origin => (isMachineOperator(who) ? "admin" : "tenant");

/**
 * Refuses (403 `scope_insufficient`) a key scoped to some endpoints changing the names the project
 * base routes by (`model_name`, `aliases`, `slug`): a shared model name makes a pool, which would take
 * requests meant for workloads it may not touch. A project-wide key may (it controls them all).
 */
function requireNamesScope(key: ReturnType<typeof keyOf>, body: WorkloadUpdate, current: Workload): void {
  if (key.scope === "project") return;
  const changed = (["model_name", "aliases", "slug"] as const).find(
    (f) => body[f] !== undefined && JSON.stringify(body[f]) !== JSON.stringify(current[f]),
  );
  if (changed)
    throw forbidden(
      "scope_insufficient",
      `changing ${changed} needs a key scoped to the entire project: the names of a workload decide which requests of the project reach it`,
    );
}

/** The workload `id` names on the control plane, checked against the request's key: its project and scope. */
export async function keyWorkload(db: Db, request: Request, id: string): Promise<Workload> {
  const key = keyOf(request);
  const w = await resolveWorkload(db, id, key.projectId);
  if (w.project_id !== key.projectId) {
    throw forbidden(
      "project_scope_mismatch",
      `workload "${id}" belongs to project "${w.project_slug}", not to this key's project "${key.projectSlug}"`,
    );
  }
  requireWorkloadScope(key, w.project_slug, w.slug);
  return w;
}

/**
 * The control plane (`/api`, `ik_sdk_` keys): create, update, list, get and delete workloads of the
 * key's project. A key scoped to specific endpoints sees and changes only those, and cannot create.
 */
export const controlRoutes = (deps: Deps) => {
  const owned = (request: Request, id: string) => keyWorkload(deps.db, request, id);
  return new Elysia({ prefix: "/api", detail: { tags: ["control plane"] } })
    .get("/policy", () => policyView(deps.policy), {
      detail: { summary: "The launch policy: which commands this key's workloads may run" },
    })
    .post(
      "/projects/:project_id/workloads",
      async ({ params, body, request, set }) => {
        const key = keyOf(request);
        if (key.scope !== "project")
          throw forbidden("scope_insufficient", "creating workloads needs a key scoped to the entire project");
        const project = await getProject(deps.db, params.project_id);
        await requireTenantWorkload(deps, project.id, body);
        await requireProjectRoom(deps.db, project.id, body);
        const w = await createWorkload(deps.db, project, body, "tenant");
        await deps.events.workloadsChanged();
        set.status = 201;
        return publicView(w);
      },
      { ...jsonBody(WorkloadCreate), detail: { summary: "Create a workload" } },
    )
    .get(
      "/projects/:project_id/workloads",
      async ({ params, request }) => {
        const key = keyOf(request);
        const all = await listWorkloads(deps.db, (await getProject(deps.db, params.project_id)).id);
        return all.filter((w) => canTouchWorkload(key, w.project_slug, w.slug)).map(publicView);
      },
      { detail: { summary: "List the project's workloads" } },
    )
    .get("/workloads/:id", async ({ params, request }) => publicView(await owned(request, params.id)), {
      detail: { summary: "Get a workload by id or slug" },
    })
    .patch(
      "/workloads/:id",
      async ({ params, body, request }) => {
        const current = await owned(request, params.id);
        requireNamesScope(keyOf(request), body, current);
        await requireTenantWorkload(deps, current.project_id, body, current);
        await requireProjectRoom(deps.db, current.project_id, body, current);
        const w = await updateWorkload(deps.db, current, body, "tenant");
        await deps.events.workloadsChanged();
        return publicView(w);
      },
      { ...jsonBody(WorkloadUpdate), detail: { summary: "Update a workload (only the sent fields change)" } },
    )
    .delete(
      "/workloads/:id",
      async ({ params, request, set }) => {
        await deleteWorkload(deps.db, (await owned(request, params.id)).id);
        await deps.events.workloadsChanged();
        set.status = 204;
      },
      { detail: { summary: "Delete a workload" } },
    );
};

/** Admin routes for workloads (the dashboard's), including the endpoint toggles. */
export const adminWorkloadRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["admin"] } })
    .get("/policy", () => policyView(deps.policy), {
      detail: {
        summary:
          "The launch policy for workloads saved by tenants (operators, viewers' projects' keys: everyone but the admin)",
      },
    })
    .get(
      "/projector",
      async ({ query }) => {
        const model = typeof query.model === "string" ? query.model.trim() : "";
        if (!model || model.length > 4096 || model.includes("\0"))
          throw validation("model", "must name a llama.cpp model (a GGUF path or a Hugging Face reference)");
        return { model, projector: await projectorOf(deps.db, model) };
      },
      {
        detail: {
          summary: "The projector file (mmproj) known for a llama.cpp model, for a vision workload's --mmproj",
        },
      },
    )
    .get(
      "/projects/:project/workloads",
      async ({ params }) => listWorkloads(deps.db, (await getProject(deps.db, params.project)).id),
      {
        detail: { summary: "List a project's workloads" },
      },
    )
    .post(
      "/projects/:project/workloads",
      async ({ params, body, set, request }) => {
        const project = await getProject(deps.db, params.project);
        const origin = originOf(principalOf(request));
        if (origin === "tenant") await requireTenantWorkload(deps, project.id, body);
        const { save, key } = deps.providers.take(body);
        await requireProjectRoom(deps.db, project.id, save);
        const w = await createWorkload(deps.db, project, save, origin);
        await keepProviderKey(deps, w, key);
        await deps.events.workloadsChanged();
        set.status = 201;
        return w;
      },
      { ...jsonBody(WorkloadCreate), detail: { summary: "Create a workload" } },
    )
    .get(
      "/workloads/:id",
      async ({ params, request }) => {
        const detail = await deps.describeWorkload(await resolveWorkload(deps.db, params.id));
        if (principalOf(request).role !== "viewer") return detail;
        // The runtime's output a reason quotes is a log: operators only.
        return {
          ...detail,
          assignments: detail.assignments.map((a) => (a.reason ? { ...a, reason: withoutOutput(a.reason) } : a)),
        };
      },
      { detail: { summary: "Get a workload (a viewer's replica reasons without the runtime's output)" } },
    )
    .patch(
      "/workloads/:id",
      async ({ params, body, request }) => {
        const { capture_until: sentCapture, ...patch } = body;
        const current = await resolveWorkload(deps.db, params.id);
        const capture = sentCapture === undefined ? undefined : checkCaptureUntil(sentCapture);
        const origin = originOf(principalOf(request));
        if (origin === "tenant") await requireTenantWorkload(deps, current.project_id, patch, current);
        const { save, key } = deps.providers.take(patch, current);
        await requireProjectRoom(deps.db, current.project_id, save, current);
        const w = await updateWorkload(deps.db, current, save, origin);
        await keepProviderKey(deps, w, key, current);
        if (capture !== undefined) await setCapture(deps.db, w, capture);
        await deps.events.workloadsChanged();
        return capture === undefined ? w : ((await getWorkloadById(deps.db, w.id)) ?? w);
      },
      {
        ...jsonBody(AdminWorkloadUpdate),
        detail: {
          summary:
            "Update a workload (`capture_until`: keep its request bodies until then, at most 7 days ahead; null stops)",
        },
      },
    )
    .delete(
      "/workloads/:id",
      async ({ params, set }) => {
        await deleteWorkload(deps.db, (await resolveWorkload(deps.db, params.id)).id);
        await deps.events.workloadsChanged();
        set.status = 204;
      },
      { detail: { summary: "Delete a workload" } },
    )
    .patch(
      "/workloads/:id/endpoints",
      async ({ params, body }) => {
        const map = await setToggles(deps.db, await resolveWorkload(deps.db, params.id), body);
        await deps.events.workloadsChanged();
        return map;
      },
      { ...jsonBody(TogglePatch), detail: { summary: "Switch endpoint toggles; answers the whole map" } },
    );
