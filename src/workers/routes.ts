import { Elysia } from "elysia";
import { z } from "zod";
import type { Db } from "../db";
import type { HostCert } from "../tls/hostcert";
import type { SeriesKeeper } from "../usage/series-store";
import type { Fleet } from "./fleet";
import { notFound } from "../errors";
import { jsonBody } from "../http";
import { resolveWorkload } from "../workloads/service";
import { createRemoteWorker, deleteRemoteWorker } from "./remote";
import {
  createAssignment,
  removeAssignment,
  getAssignment,
  getWorker,
  listAssignments,
  listWorkers,
  requireOpenWorker,
  setAssignmentConcurrency,
  setWorkerOpenTo,
  workerView,
  type WorkerView,
} from "./service";
import { getProject } from "../projects/service";
import { gpuHistory } from "./telemetry";
import { principalOf } from "../auth/service";
import { isMachineOperator, seesProject, type Principal } from "../users/access";
import { withoutOutput } from "../../agent/reason";
import type { WorkerReplica } from "./fleet";

/** What this module uses of the app's dependencies. */
interface Deps {
  db: Db;
  /** The remote agents' links: a deleted worker's is forgotten. */
  agents: { forget(workerId: string): void };
  fleet: Fleet;
  hostCert: HostCert;
  series: SeriesKeeper;
  /** The HTTPS URL agents join. */
  joinUrl(): string;
  /** Cloud GPU workers (src/cloud): a cloud worker's delete ends its pod first. */
  cloud: {
    remove(workerId: string): Promise<WorkerView | undefined>;
    podOf(workerId: string): Promise<object | undefined>;
  };
}

const AssignmentCreate = z.strictObject({
  worker_id: z.string().min(1).max(128),
  concurrency: z.number().int().min(1).max(1000).optional(),
  gpus: z.union([z.literal(1), z.literal(2), z.literal(4), z.literal(8)]).optional(),
  force: z.boolean().optional(),
});
const AssignmentPatch = z.strictObject({ concurrency: z.number().int().min(1).max(1000) });
const WorkerPatch = z.strictObject({
  open_to: z.union([z.literal("*"), z.array(z.string().min(1).max(128)).max(1000)]),
});
const WorkerCreate = z.strictObject({
  name: z
    .string()
    .trim()
    .min(1)
    .max(100)
    .regex(/^[A-Za-z0-9][A-Za-z0-9._-]*$/, "letters, digits, dots, dashes and underscores"),
});

/** Keep-alive comment interval for live log streams. */
const KEEPALIVE_MS = 15_000;

/** A live SSE stream of rings: the tail first, then every new chunk, as `{assignment_id, text}`. */
function followLogs(
  rings: { id: string; ring: import("../../agent/ring").LogRing }[],
  tailBytes: number,
  signal: AbortSignal,
): Response {
  const enc = new TextEncoder();
  const cleanups: (() => void)[] = [];
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      const send = (id: string, text: string) => {
        if (text) controller.enqueue(enc.encode(`data: ${JSON.stringify({ assignment_id: id, text })}\n\n`));
      };
      // A comment first, so the browser knows the stream is open even while the log is still empty.
      controller.enqueue(enc.encode(": connected\n\n"));
      for (const { id, ring } of rings) {
        const dec = new TextDecoder();
        send(id, dec.decode(ring.tail(tailBytes), { stream: true }));
        cleanups.push(ring.subscribe((chunk) => send(id, dec.decode(chunk, { stream: true }))));
      }
      const ka = setInterval(() => controller.enqueue(enc.encode(": keep-alive\n\n")), KEEPALIVE_MS);
      cleanups.push(() => clearInterval(ka));
      signal.addEventListener("abort", () => {
        cleanups.forEach((c) => c());
        try {
          controller.close();
        } catch {}
      });
    },
    cancel() {
      cleanups.forEach((c) => c());
    },
  });
  return new Response(body, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
}

/**
 * A worker as `who` may see it, or undefined when it is none of theirs. Admins see everything. A
 * member sees a worker that runs one of their projects' workloads or is open to one of their
 * projects, with only those replicas (their reasons without the runtime's output unless they may
 * read logs) and only their projects in `open_to`: never another project's workload or slug.
 */
export function workerFor(
  who: Principal,
  w: WorkerView,
  replicas: WorkerReplica[],
): (WorkerView & { replicas: WorkerReplica[] }) | undefined {
  if (isMachineOperator(who)) return { ...w, replicas };
  const mine = replicas
    .filter((r) => seesProject(who, r.project_id))
    .map((r) => (who.role === "operator" || !r.reason ? r : { ...r, reason: withoutOutput(r.reason) }));
  const openTo = w.open_to === "*" ? "*" : w.open_to.filter((p) => seesProject(who, p));
  if (!mine.length && openTo !== "*" && !openTo.length) return undefined;
  return { ...w, open_to: openTo, replicas: mine };
}

/** Admin routes for workers, assignments and runtime logs. */
export const workerRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/admin", detail: { tags: ["admin"] } })
    .get(
      "/workers",
      async ({ request }) => {
        const who = principalOf(request);
        const out = [];
        for (const w of await listWorkers(deps.db)) {
          const seen = workerFor(who, w, await deps.fleet.replicasOf(w.id));
          const pod = seen && isMachineOperator(who) ? await deps.cloud.podOf(w.id) : undefined;
          if (seen) out.push(pod ? { ...seen, cloud: pod } : seen);
        }
        return out;
      },
      { detail: { summary: "Workers with their GPUs, telemetry and replicas" } },
    )
    .post(
      "/workers",
      async ({ body, set }) => {
        const { worker, token } = await createRemoteWorker(deps.db, body.name, deps.hostCert.fingerprint);
        set.status = 201;
        return { ...worker, join_token: token, join_command: `inferd agent join ${deps.joinUrl()} --token ${token}` };
      },
      {
        ...jsonBody(WorkerCreate),
        detail: { summary: "Add a remote worker: the join token (shown once) and the command to run on it" },
      },
    )
    .delete(
      "/workers/:id",
      async ({ params }) => {
        // A cloud worker goes only once its provider confirms its pod is gone.
        const cloud = await deps.cloud.remove((await getWorker(deps.db, params.id)).id);
        if (cloud) return cloud;
        const w = await deleteRemoteWorker(deps.db, params.id);
        deps.agents.forget(w.id);
        await deps.fleet.reconcile();
        return w;
      },
      { detail: { summary: "Delete a remote worker: its credential stops working, its work goes back to the queue" } },
    )
    .patch(
      "/workers/:id",
      async ({ params, body }) => {
        const openTo =
          body.open_to === "*"
            ? "*"
            : [...new Set(await Promise.all(body.open_to.map(async (p) => (await getProject(deps.db, p)).id)))];
        return setWorkerOpenTo(deps.db, params.id, openTo);
      },
      {
        ...jsonBody(WorkerPatch),
        detail: { summary: 'Open a worker to projects (ids or slugs, or "*"): their tenants may pin workloads to it' },
      },
    )
    .get(
      "/workers/:id",
      async ({ params, request }) => {
        const seen = workerFor(
          principalOf(request),
          workerView(await getWorker(deps.db, params.id)),
          await deps.fleet.replicasOf(params.id),
        );
        if (!seen) throw notFound(`worker "${params.id}"`);
        const pod = isMachineOperator(principalOf(request)) ? await deps.cloud.podOf(seen.id) : undefined;
        return {
          ...seen,
          ...(pod ? { cloud: pod } : {}),
          history: await gpuHistory(deps.series, deps.fleet.telemetry, params.id),
        };
      },
      { detail: { summary: "A worker with its telemetry history" } },
    )
    .post(
      "/workloads/:id/assignments",
      async ({ params, body, set, request }) => {
        const w = await resolveWorkload(deps.db, params.id);
        if (!isMachineOperator(principalOf(request)))
          await requireOpenWorker(deps.db, w.project_id, { worker_id: body.worker_id });
        const a = await createAssignment(deps.db, w, body);
        await deps.fleet.reconcile();
        set.status = 201;
        return a;
      },
      { ...jsonBody(AssignmentCreate), detail: { summary: "Run a workload on a worker" } },
    )
    .get(
      "/workloads/:id/assignments",
      async ({ params }) => listAssignments(deps.db, (await resolveWorkload(deps.db, params.id)).id),
      {
        detail: { summary: "Where a workload runs" },
      },
    )
    .patch(
      "/assignments/:id",
      async ({ params, body }) => {
        await setAssignmentConcurrency(deps.db, params.id, body.concurrency);
        deps.fleet.setCapacity(params.id, body.concurrency);
        return getAssignment(deps.db, params.id);
      },
      { ...jsonBody(AssignmentPatch), detail: { summary: "Change an assignment's concurrent request slots" } },
    )
    .delete(
      "/assignments/:id",
      async ({ params }) => {
        const a = await removeAssignment(deps.db, params.id);
        await deps.fleet.reconcile();
        return a;
      },
      { detail: { summary: "Stop running a workload on a worker" } },
    )
    .get(
      "/workloads/:id/logs",
      async ({ params, query, request }) => {
        const w = await resolveWorkload(deps.db, params.id);
        const all = await listAssignments(deps.db, w.id);
        const chosen = query.assignment ? all.filter((a) => a.id === query.assignment) : all;
        if (query.assignment && chosen.length === 0)
          throw notFound(`assignment "${query.assignment}" of this workload`);
        const asked = Number(query.bytes ?? 65536);
        const tail = Math.min(Math.max(Number.isFinite(asked) ? asked : 65536, 0), 1 << 20);
        const rings = chosen.map((a) => ({ id: a.id, ring: deps.fleet.ringFor(a.id) }));
        if (query.follow === "1" || query.follow === "true") return followLogs(rings, tail, request.signal);
        return {
          replicas: rings.map(({ id, ring }) => ({
            assignment_id: id,
            state: all.find((a) => a.id === id)?.state,
            offset: ring.end,
            text: new TextDecoder().decode(ring.tail(tail)),
          })),
        };
      },
      { detail: { summary: "Runtime output of a workload's replicas; ?follow=1 streams it live (SSE)" } },
    );
