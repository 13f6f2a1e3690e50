import { isAbsolute } from "node:path";
import { Elysia } from "elysia";
import { z } from "zod";
import type { Db } from "../db";
import type { LaunchPolicy } from "../../agent/launch-policy";
import { jsonBody } from "../http";
import { listWorkers } from "../workers/service";
import { validation } from "../errors";
import { principalOf } from "../auth/service";
import { isMachineOperator } from "../users/access";
import { ModelManager } from "./manager";
import { pullerOf, requireModelPath, requireOwnModel, requireTenantSource, tenantGuard } from "./tenant-access";
import { checkLocalFile, discoverLocalModels } from "./discover";
import { fitOnGpus, type Estimate } from "./fit";
import type { ModelView } from "./service";
import { SEARCH_BACKENDS, type SearchBackend } from "./search";

/** What this module uses of the app's dependencies. */
interface Deps {
  db: Db;
  models: ModelManager;
  policy: LaunchPolicy;
}

const ModelCreate = z.strictObject({
  source: z.string().trim().min(1).max(2000),
  project: z.string().trim().min(1).max(200).optional(),
});
const STATES = ["downloading", "ready", "failed", "cancelled"] as const;

/** The `q` and `backend` of a search, checked. */
function searchQuery(query: Record<string, string | undefined>): { q: string; backend: SearchBackend } {
  const q = (query.q ?? "").trim();
  if (!q || q.length > 200) throw validation("q", "write 1 to 200 characters of a model's name");
  const backend = (query.backend ?? "llamacpp") as SearchBackend;
  if (!SEARCH_BACKENDS.includes(backend)) throw validation("backend", `must be one of ${SEARCH_BACKENDS.join(", ")}`);
  return { q, backend };
}

/** The states `?state=ready,downloading` keeps (every state when absent). */
function statesOf(value: string | undefined): Set<string> | null {
  if (!value) return null;
  const states = value.split(",").map((s) => s.trim());
  const bad = states.find((s) => !(STATES as readonly string[]).includes(s));
  if (bad) throw validation("state", `"${bad}" is not a model state (${STATES.join(", ")})`);
  return new Set(states);
}

/** Keep-alive comment interval for progress streams. */
const KEEPALIVE_MS = 15_000;

/** Where a model fits: per worker, its GPUs' free memory against the estimate, or its free RAM. */
export async function fitPerWorker(deps: { db: Db }, est: Estimate | null) {
  if (!est) return [];
  return (await listWorkers(deps.db)).map((w) => {
    const gpus = w.gpus.map((g) => ({
      index: g.index,
      name: g.name,
      total_mib: g.memory_total_mib,
      free_mib: Math.max(0, g.memory_total_mib - g.memory_used_mib),
    }));
    const onGpu = gpus.length ? fitOnGpus(est.total_bytes, gpus, 1) : null;
    const ramFree = (w.telemetry as { ram_free_bytes?: number }).ram_free_bytes ?? w.ram_bytes;
    return {
      worker_id: w.id,
      worker: w.name,
      state: w.state,
      needs_mib: Math.ceil(est.total_bytes / 1048576),
      gpus: gpus.map((g) => ({ ...g, fits: g.free_mib * 1048576 >= est.total_bytes })),
      fits_on_gpu: onGpu?.fits ?? false,
      ram_free_mib: Math.floor(ramFree / 1048576),
      fits_in_ram: ramFree >= est.total_bytes,
    };
  });
}

/** A live SSE stream of one model's pull: its view now, at each step, and when it ends. */
function progressStream(deps: Deps, id: string, signal: AbortSignal): Response {
  const enc = new TextEncoder();
  let cleanup = () => {};
  const body = new ReadableStream<Uint8Array>({
    async start(controller) {
      let closed = false;
      const send = (v: ModelView) => {
        if (!closed)
          controller.enqueue(
            enc.encode(
              `data: ${JSON.stringify({ id: v.id, state: v.state, reason: v.reason, progress: v.progress, size_bytes: v.size_bytes })}\n\n`,
            ),
          );
      };
      const close = () => {
        if (closed) return;
        closed = true;
        cleanup();
        try {
          controller.close();
        } catch {}
      };
      // Listen first, then send the view now: a pull ending in between still reaches the stream.
      const unsubscribe = deps.models.subscribe(id, (v) => {
        send(v);
        if (!deps.models.isRunning(id)) close();
      });
      const ka = setInterval(() => !closed && controller.enqueue(enc.encode(": keep-alive\n\n")), KEEPALIVE_MS);
      cleanup = () => {
        unsubscribe();
        clearInterval(ka);
      };
      signal.addEventListener("abort", close);
      send(await deps.models.view(id));
      if (!deps.models.isRunning(id)) close();
    },
    cancel: () => cleanup(),
  });
  return new Response(body, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
}

/**
 * Pulls a model for the principal: the admin's own, or (a tenant, or the admin naming a project) for
 * a project; a tenant's source obeys the launch policy (see tenant-access.ts).
 */
async function pullFor(deps: Deps, request: Request, body: z.infer<typeof ModelCreate>) {
  const who = principalOf(request);
  const by = await pullerOf(deps.db, who, body.project);
  if (isMachineOperator(who)) return deps.models.pull(body.source, by);
  const guard = tenantGuard(deps.policy);
  await requireTenantSource(deps.policy, ModelManager.parse(body.source), guard);
  return deps.models.pull(body.source, by, guard);
}

/**
 * Admin routes of the model store: pull, list, show with fit, progress, cancel, remove, discover.
 * Tenants (operators; viewers only read) pull within the launch policy and act only on models
 * pulled for their projects; discovering files on the machine is the admin's.
 */
export const modelRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["models"] } })
    .get(
      "/models",
      async ({ query }) => {
        const states = statesOf(query.state);
        const list = await deps.models.list();
        return states ? list.filter((m) => states.has(m.state)) : list;
      },
      {
        detail: {
          summary:
            "Models in the store (pulled, downloading, registered), with size, shape and users; `?state=ready,downloading` keeps those states",
        },
      },
    )
    .post(
      "/models",
      async ({ body, set, request }) => {
        const v = await pullFor(deps, request, body);
        set.status = v.state === "ready" ? 200 : 202;
        return v;
      },
      {
        ...jsonBody(ModelCreate),
        detail: {
          summary:
            "Pull a model (hf:owner/repo, hf:owner/repo:Q4_K_M, hf:owner/repo/file.gguf, https://…, or a local path to register); `project` pulls it for a project (a non-admin's pull always is: public https URLs and paths under --policy-model-paths only)",
        },
      },
    )
    .get("/models/discover", () => discoverLocalModels(process.env), {
      detail: {
        summary:
          "GGUF files already on this machine (Hugging Face cache, LM Studio, llama.cpp cache, Ollama); admin only",
      },
    })
    .get(
      "/models/search",
      ({ query }) => {
        const { q, backend } = searchQuery(query);
        return deps.models.search(q, backend);
      },
      {
        detail: {
          summary:
            "Find a model by name: Hugging Face repos (GGUF for llamacpp, safetensors for vllm/sglang) or the Ollama library (backend=ollama), each with its quantisations, sizes and fit on this cluster's GPUs",
        },
      },
    )
    .get(
      "/models/file",
      ({ query, request }) => {
        const path = typeof query.path === "string" ? query.path : "";
        if (!isAbsolute(path) || path.length > 4096 || path.includes("\0"))
          throw validation("path", "must be an absolute path");
        if (!isMachineOperator(principalOf(request))) requireModelPath(deps.policy, path, "path");
        return checkLocalFile(path);
      },
      {
        detail: {
          summary:
            "What is at a path on this machine (file or folder, size, GGUF or not), to check a model path before saving a workload; a non-admin may look only under --policy-model-paths",
        },
      },
    )
    .get(
      "/models/:id",
      async ({ params }) => {
        const v = await deps.models.view(params.id);
        return { ...v, fit: await fitPerWorker(deps, v.estimate) };
      },
      { detail: { summary: "A model with its memory estimate against each worker's free GPU memory" } },
    )
    .get(
      "/models/:id/progress",
      async ({ params, request, server }) => {
        server?.timeout(request, 0);
        await deps.models.view(params.id); // 404 for an unknown model, before the stream starts
        return progressStream(deps, params.id, request.signal);
      },
      { detail: { summary: "The pull's progress as server-sent events (bytes, %, rate, ETA), ending with its state" } },
    )
    .post(
      "/models/:id/cancel",
      async ({ params, request }) => {
        await requireOwnModel(deps.db, principalOf(request), params.id, "cancel");
        return deps.models.cancel(params.id);
      },
      {
        detail: {
          summary: "Stop a pull (pulling again resumes it); a non-admin only of a model pulled for their project",
        },
      },
    )
    .post(
      "/models/:id/dismiss",
      async ({ params, request }) => {
        await requireOwnModel(deps.db, principalOf(request), params.id, "dismiss");
        return deps.models.dismiss(params.id);
      },
      {
        detail: {
          summary:
            "Forget a failed or cancelled pull: its row and the partial files it left (409 for any other state); a non-admin only of a model pulled for their project",
        },
      },
    )
    .delete(
      "/models/:id",
      async ({ params, request }) => {
        await requireOwnModel(deps.db, principalOf(request), params.id, "remove");
        return deps.models.remove(params.id);
      },
      {
        detail: {
          summary:
            "Remove a model (refused while a workload uses it); a non-admin only a model pulled for their project",
        },
      },
    );
