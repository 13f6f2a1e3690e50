/**
 * A base workload's LoRA adapters over HTTP: the admin plane's (`/admin/workloads/:id/adapters`, the
 * dashboard's; operators of the workload's project may add and remove, viewers list) and the
 * control plane's (`/api/workloads/:id/adapters`, a project-scoped `ik_sdk_` key). The admin's adds
 * are the admin's own models; anyone else's pull for the workload's project, within its `model_bytes`
 * and the launch policy's address and path rules (an adapter is data: it never runs).
 */
import { Elysia } from "elysia";
import { z } from "zod";
import type { LaunchPolicy } from "../../agent/launch-policy";
import type { Db } from "../db";
import { principalOf } from "../auth/service";
import { jsonBody } from "../http";
import { ModelManager } from "../models/manager";
import { requireTenantSource, tenantGuard } from "../models/tenant-access";
import { isMachineOperator } from "../users/access";
import { resolveWorkload, type Workload } from "../workloads/service";
import { keyWorkload } from "../workloads/routes";
import { adapterView, listAdapters, type AddedBy, type Adapters } from "./service";

interface Deps {
  db: Db;
  adapters: Adapters;
  policy: LaunchPolicy;
}

/** `POST …/adapters`: the name clients will call it by, and where its files come from. */
export const AdapterCreate = z.strictObject({
  name: z.string().trim().min(1).max(64),
  source: z.string().trim().min(1).max(2000),
});

/** Who adds (a tenant's pull is for the workload's project, its address rules checked now). */
async function tenantAdd(deps: Deps, w: Workload, source: string, who: string | null): Promise<AddedBy> {
  const guard = tenantGuard(deps.policy);
  await requireTenantSource(deps.policy, ModelManager.parse(source), guard);
  return { by: { project: w.project_id }, guard, who };
}

/** The adapter list of a workload. */
async function list(deps: Deps, w: Workload) {
  return { adapters: (await listAdapters(deps.db, w.id)).map(adapterView) };
}

export const adapterAdminRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["adapters"] } })
    .get("/workloads/:id/adapters", async ({ params }) => list(deps, await resolveWorkload(deps.db, params.id)), {
      detail: { summary: "A workload's LoRA adapters: name, source, state, base model, rank, size" },
    })
    .post(
      "/workloads/:id/adapters",
      async ({ params, body, request, set }) => {
        const w = await resolveWorkload(deps.db, params.id);
        const who = principalOf(request);
        const added = isMachineOperator(who)
          ? { by: "admin" as const, who: who.email ?? "admin" }
          : await tenantAdd(deps, w, body.source, who.email);
        const v = await deps.adapters.add(w, body, added);
        set.status = 201;
        return v;
      },
      {
        ...jsonBody(AdapterCreate),
        detail: {
          summary:
            "Add a LoRA adapter (hf:owner/repo, https://…/x.gguf, or a path the operator allows): pulled into the model store, checked against the base (its base model, rank and format), then served as `model: <name>`",
        },
      },
    )
    .delete(
      "/workloads/:id/adapters/:name",
      async ({ params, set }) => {
        await deps.adapters.remove(await resolveWorkload(deps.db, params.id), params.name);
        set.status = 204;
      },
      { detail: { summary: "Remove an adapter (replicas drop it; its files stay in the model store)" } },
    );

/** The control plane's adapter routes: a project-scoped key adds, lists and removes adapters of its workloads. */
export const adapterControlRoutes = (deps: Deps) => {
  const owned = (request: Request, id: string) => keyWorkload(deps.db, request, id);
  return new Elysia({ prefix: "/api", detail: { tags: ["control plane"] } })
    .get("/workloads/:id/adapters", async ({ params, request }) => list(deps, await owned(request, params.id)), {
      detail: { summary: "A workload's LoRA adapters" },
    })
    .post(
      "/workloads/:id/adapters",
      async ({ params, body, request, set }) => {
        const w = await owned(request, params.id);
        const v = await deps.adapters.add(w, body, await tenantAdd(deps, w, body.source, null));
        set.status = 201;
        return v;
      },
      { ...jsonBody(AdapterCreate), detail: { summary: "Add a LoRA adapter (pulled for the key's project)" } },
    )
    .delete(
      "/workloads/:id/adapters/:name",
      async ({ params, request, set }) => {
        await deps.adapters.remove(await owned(request, params.id), params.name);
        set.status = 204;
      },
      { detail: { summary: "Remove a LoRA adapter" } },
    );
};
