import { Elysia } from "elysia";
import { z } from "zod";
import { MachineInfoSchema, ReplicaReportSchema } from "../../agent/protocol";
import type { AppDeps } from "../deps";
import { AppError, forbidden, fromSchemaIssue } from "../errors";
import { readBodyLimited } from "../http";
import { sha256 } from "../ids";
import { presentedToken } from "../auth/service";
import { recordMachine } from "../workers/service";
import { joinWorker, workerByCredential } from "./service";
import type { ReplicaReport } from "../../agent/protocol";

/** What this module uses of the app's dependencies. */
type Deps = Pick<AppDeps, "agents" | "config" | "db" | "fleet" | "version">;

/** Requests that arrived on the HTTPS listener (agents must use it). */
export const viaTls = new WeakSet<Request>();

const Machine = MachineInfoSchema;
const Report = ReplicaReportSchema;
const Join = z.strictObject({ token: z.string().min(1), version: z.string().min(1), machine: Machine });
const Heartbeat = z.strictObject({ version: z.string(), machine: Machine, replicas: z.array(Report) });
const Logs = z.strictObject({ chunks: z.array(z.strictObject({ assignment_id: z.string(), data_b64: z.string() })) });

/** Reads and checks a JSON body of the agent protocol. */
async function body<T>(deps: Deps, request: Request, schema: z.ZodType<T>): Promise<T> {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder().decode(await readBodyLimited(request, deps.config.maxBodyBytes)));
  } catch (e) {
    if (e instanceof AppError) throw e;
    throw new AppError(400, "invalid_json", "the request body is not valid JSON");
  }
  const r = schema.safeParse(value);
  if (!r.success) throw fromSchemaIssue("body", r.error.issues[0] as never);
  return r.data;
}

/** The remote worker behind a request (HTTPS and a valid credential), and that it was heard from. */
function agentOf(deps: Deps, request: Request) {
  if (!viaTls.has(request)) throw forbidden("https_required", "agents connect to the host's HTTPS port");
  const w = workerByCredential(deps.db, presentedToken(request));
  deps.agents.touch(w.id);
  return w;
}

/** Seconds a long poll may be held. */
const waitMs = (q: unknown) => Math.min(Math.max(Number(q ?? 25_000) || 25_000, 0), 55_000);

/**
 * The agent protocol (HTTPS only): join with a one-time token, then heartbeats with telemetry and
 * replica states, a long poll for what to run, a long poll for requests, streamed answers and logs.
 */
export const agentRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/agent/v1", detail: { tags: ["agents"], hide: true } })
    .post("/join", async ({ request, set }) => {
      if (!viaTls.has(request)) throw forbidden("https_required", "agents connect to the host's HTTPS port");
      const b = await body(deps, request, Join);
      const joined = joinWorker(deps.db, b.token, b.version, deps.version, b.machine as never);
      deps.agents.touch(joined.workerId);
      deps.fleet.reconcile();
      set.status = 201;
      return { worker_id: joined.workerId, credential: joined.credential, host_version: deps.version };
    }, { parse: "none" })
    .post("/heartbeat", async ({ request }) => {
      const w = agentOf(deps, request);
      const b = await body(deps, request, Heartbeat);
      recordMachine(deps.db, w.id, b.machine as never, b.version);
      deps.fleet.scaling?.wake(); // fresh free-memory numbers: a replica waiting for room may start
      deps.fleet.telemetry.add(w.id, b.machine as never);
      for (const r of b.replicas) deps.fleet.report(w.id, r as ReplicaReport);
      return { ok: true };
    }, { parse: "none" })
    .post("/report", async ({ request }) => {
      const w = agentOf(deps, request);
      deps.fleet.report(w.id, (await body(deps, request, Report)) as ReplicaReport);
      return { ok: true };
    }, { parse: "none" })
    .get("/desired", async ({ request, query }) => {
      const w = agentOf(deps, request);
      const snapshot = () => {
        const replicas = deps.fleet.desired(w.id);
        return { revision: sha256(JSON.stringify(replicas)).slice(0, 16), replicas };
      };
      let now = snapshot();
      if (query.rev && query.rev === now.revision) {
        await new Promise<void>((resolve) => {
          const stop = deps.fleet.subscribe(() => done());
          const timer = setTimeout(() => done(), waitMs(query.wait));
          const done = () => {
            clearTimeout(timer);
            stop();
            resolve();
          };
          request.signal.addEventListener("abort", done, { once: true });
        });
        now = snapshot();
      }
      return now;
    })
    .get("/work", async ({ request, query }) => {
      const w = agentOf(deps, request);
      return { items: await deps.agents.hub.poll(w.id, waitMs(query.wait), request.signal) };
    })
    .post("/work/:id/response", async ({ request, params }) => {
      const w = agentOf(deps, request);
      const status = Number(request.headers.get("x-inferd-status") ?? 502);
      const type = request.headers.get("x-inferd-content-type") ?? "application/octet-stream";
      const failure = request.headers.get("x-inferd-failure");
      const code = failure ? deps.agents.hub.fail(w.id, params.id, failure, await request.text()) : await deps.agents.hub.respond(w.id, params.id, status, type, request.body);
      return new Response(JSON.stringify({ status: code }), { status: code === 404 ? 404 : 200, headers: { "content-type": "application/json" } });
    }, { parse: "none" })
    .post("/logs", async ({ request }) => {
      const w = agentOf(deps, request);
      const b = await body(deps, request, Logs);
      const mine = new Set(deps.fleet.replicasOf(w.id).map((r) => r.assignment_id));
      for (const c of b.chunks) if (mine.has(c.assignment_id)) deps.fleet.ringFor(c.assignment_id).push(Buffer.from(c.data_b64, "base64"));
      return { ok: true };
    }, { parse: "none" });
