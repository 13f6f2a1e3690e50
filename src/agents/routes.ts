import { Elysia } from "elysia";
import type { z } from "zod";
import { callOf } from "../call";
import {
  AGENT_LIMITS,
  AnswerHeadSchema,
  HeartbeatSchema,
  JoinSchema,
  LogsSchema,
  ReplicaReportSchema,
} from "../../agent/protocol";
import type { Db } from "../db";
import type { Cluster } from "../cluster/cluster";
import type { Fleet } from "../workers/fleet";
import type { RemoteAgents } from "./remote";
import { forbidden, fromSchemaIssue } from "../errors";
import { parseJsonBytes, readBodyLimited } from "../http";
import { sha256 } from "../ids";
import { presentedToken } from "../auth/service";
import { listAssignmentsOfWorker, recordMachine } from "../workers/service";
import { joinWorker, workerByCredential } from "./service";
import { isPoolToken, joinWithPoolToken } from "./join-tokens";

/** What this module uses of the app's dependencies. */
interface Deps {
  db: Db;
  agents: RemoteAgents;
  cluster: Cluster;
  fleet: Fleet;
  version: string;
}

/** `value` checked by `schema`, or 400 `validation_error` naming the first bad field (`where` when it is the whole). */
function checked<T>(schema: z.ZodType<T>, value: unknown, where: string): T {
  const r = schema.safeParse(value);
  if (!r.success) throw fromSchemaIssue(where, r.error.issues[0]);
  return r.data;
}

/** Reads and checks a JSON message of the agent protocol (at most AGENT_LIMITS.messageBytes, 413 beyond). */
async function body<T>(request: Request, schema: z.ZodType<T>): Promise<T> {
  return checked(schema, parseJsonBytes(await readBodyLimited(request, AGENT_LIMITS.messageBytes)), "body");
}

/** The headers of an agent's answer, checked (400 naming a header that is out of bounds). */
function answerHead(request: Request): z.infer<typeof AnswerHeadSchema> {
  const sent = Object.keys(AnswerHeadSchema.shape).map((name) => [name, request.headers.get(name) ?? undefined]);
  return checked(AnswerHeadSchema, Object.fromEntries(sent), "headers");
}

/** The remote worker behind a request (HTTPS and a valid credential), and that it was heard from. */
async function agentOf(deps: Deps, request: Request) {
  if (!callOf(request).viaTls) throw forbidden("https_required", "agents connect to the host's HTTPS port");
  const w = await workerByCredential(deps.db, presentedToken(request));
  deps.agents.touch(w.id);
  return w;
}

/** Seconds a long poll may be held. */
/** An agent process's id from its poll (a UUID); anything else is ignored, as from an agent without one. */
const sessionOf = (q: unknown) => (typeof q === "string" && /^[0-9a-f-]{36}$/.test(q) ? q : undefined);
const waitMs = (q: unknown) => Math.min(Math.max(Number(q ?? 25_000) || 25_000, 0), 55_000);

/**
 * The agent protocol (HTTPS only): join with a worker's one-time token or a pool join token, then
 * heartbeats with telemetry and replica states, a long poll for what to run, a long poll for
 * requests, streamed answers and logs.
 */
export const agentRoutes = (deps: Deps) =>
  new Elysia({ prefix: "/agent/v1", detail: { tags: ["agents"], hide: true } })
    .post(
      "/join",
      async ({ request, set }) => {
        if (!callOf(request).viaTls) throw forbidden("https_required", "agents connect to the host's HTTPS port");
        const b = await body(request, JoinSchema);
        const join = isPoolToken(b.token) ? joinWithPoolToken : joinWorker;
        const joined = await join(deps.db, b.token, b.version, deps.version, b.machine);
        deps.agents.touch(joined.workerId);
        await deps.fleet.reconcile();
        set.status = 201;
        return {
          worker_id: joined.workerId,
          credential: joined.credential,
          host_version: deps.version,
          host_id: deps.cluster.hostId,
          hosts: deps.cluster.peers(),
        };
      },
      { parse: "none" },
    )
    .post(
      "/heartbeat",
      async ({ request }) => {
        const w = await agentOf(deps, request);
        const b = await body(request, HeartbeatSchema);
        await recordMachine(deps.db, w.id, b.machine, b.version);
        deps.fleet.scaling?.wake(); // fresh free-memory numbers: a replica waiting for room may start
        deps.fleet.telemetry.add(w.id, b.machine);
        for (const r of b.replicas) await deps.fleet.report(w.id, r);
        // Every live host of the cluster: the agent takes work from each (one host: just this one).
        return { ok: true, host_id: deps.cluster.hostId, hosts: deps.cluster.peers() };
      },
      { parse: "none" },
    )
    .post(
      "/report",
      async ({ request }) => {
        const w = await agentOf(deps, request);
        await deps.fleet.report(w.id, await body(request, ReplicaReportSchema));
        return { ok: true };
      },
      { parse: "none" },
    )
    .get("/desired", async ({ request, query }) => {
      const w = await agentOf(deps, request);
      const snapshot = async () => {
        const replicas = await deps.fleet.desired(w.id);
        return { revision: sha256(JSON.stringify(replicas)).slice(0, 16), replicas };
      };
      let now = await snapshot();
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
        now = await snapshot();
      }
      return now;
    })
    .get("/work", async ({ request, query }) => {
      const w = await agentOf(deps, request);
      return { items: await deps.agents.hub.poll(w.id, waitMs(query.wait), request.signal, sessionOf(query.session)) };
    })
    .post(
      "/work/:id/response",
      async ({ request, params }) => {
        const w = await agentOf(deps, request);
        const head = answerHead(request);
        const hub = deps.agents.hub;
        // The body is read only for a request this agent holds: an unknown id costs the host nothing.
        const code = !hub.holds(w.id, params.id)
          ? 404
          : head["x-inferd-failure"]
            ? hub.fail(
                w.id,
                params.id,
                head["x-inferd-failure"],
                new TextDecoder().decode(await readBodyLimited(request, AGENT_LIMITS.failureBytes)),
              )
            : await hub.respond(w.id, params.id, head["x-inferd-status"], head["x-inferd-content-type"], request.body);
        return new Response(JSON.stringify({ status: code }), {
          status: code === 404 ? 404 : 200,
          headers: { "content-type": "application/json" },
        });
      },
      { parse: "none" },
    )
    .post(
      "/logs",
      async ({ request }) => {
        const w = await agentOf(deps, request);
        const b = await body(request, LogsSchema);
        const mine = new Set((await listAssignmentsOfWorker(deps.db, w.id)).map((a) => a.id));
        for (const c of b.chunks)
          if (mine.has(c.assignment_id)) deps.fleet.ringFor(c.assignment_id).push(Buffer.from(c.data_b64, "base64"));
        return { ok: true };
      },
      { parse: "none" },
    );
