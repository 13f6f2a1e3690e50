import { join } from "node:path";
import { fixtureEnv, readRecord } from "../fixtures";
import type { RecordEvent } from "../fixtures/record";
import { startInferd, tempDir, waitFor, type Inferd } from "./proc";
import type { Engine } from "./postgres";

/** A running inferd with its local agent, fake GPUs and fake runtimes on PATH, and a seeded project. */
export interface Serving extends Inferd {
  /** The FAKE_RECORD file every fake runtime appends to. */
  record: string;
  project: string;
  sdk: string;
  live: string;
  /** fetch with the admin token. */
  admin(path: string, init?: { method?: string; body?: unknown }): Promise<Response>;
  /** fetch on the data plane of a workload with the live key (or `token`). */
  data(
    workload: string,
    path: string,
    init?: {
      method?: string;
      body?: unknown;
      raw?: BodyInit;
      headers?: Record<string, string>;
      token?: string | null;
      signal?: AbortSignal;
    },
  ): Promise<Response>;
  /** Creates a workload through the admin API and returns it. */
  createWorkload(body: Record<string, unknown>): Promise<{ id: string; slug: string; [k: string]: unknown }>;
  /** The admin view of a workload (assignments with states, queue depth, usage). */
  workload(id: string): Promise<WorkloadDetail>;
  /** Waits until every assignment of the workload is in `state` (default ready). */
  waitState(id: string, state?: string, timeoutMs?: number): Promise<WorkloadDetail>;
  /** The fake runtimes' recorded events. */
  events(filter?: (e: RecordEvent) => boolean): RecordEvent[];
}

/** The admin view of a workload, as far as tests read it. */
export interface WorkloadDetail {
  id: string;
  slug: string;
  queue_depth: number;
  usage: { requests: number; input_tokens: number; output_tokens: number; errors: number };
  assignments: {
    id: string;
    state: string;
    reason?: string;
    base_url?: string;
    served_model?: string;
    concurrency: number;
    gpu_indices: number[];
    in_flight: number;
  }[];
  [k: string]: unknown;
}

/**
 * Starts inferd serve with the local agent on; `env` adds settings and FAKE_* knobs; `engine` picks
 * its store (a fresh PostgreSQL database for "postgres"). With `dataDir` (a restart: pass the first
 * server's `storeEnv` in `env`), the project is the one already there and fresh keys are made for it.
 */
export async function startServing(
  env: Record<string, string> = {},
  args: string[] = [],
  dataDir?: string,
  engine?: Engine,
): Promise<Serving> {
  const record = join(tempDir("record"), "events.jsonl");
  const srv = await startInferd({
    env: fixtureEnv({
      INFERD_LOCAL_AGENT: "1",
      INFERD_TELEMETRY_INTERVAL_MS: "300",
      INFERD_RESTART_BACKOFF_MS: "100",
      INFERD_LOG_LEVEL: "warn",
      FAKE_GPUS: "2x NVIDIA GeForce RTX 4090:24564",
      FAKE_LOAD_MS: "100",
      FAKE_RECORD: record,
      ...env,
    }),
    args,
    dataDir,
    engine,
  });
  const call = (
    path: string,
    token: string | null,
    init: {
      method?: string;
      body?: unknown;
      raw?: BodyInit;
      headers?: Record<string, string>;
      signal?: AbortSignal;
    } = {},
  ) => {
    const headers: Record<string, string> = { ...(init.headers ?? {}) };
    if (token) headers.authorization = `Bearer ${token}`;
    let body = init.raw;
    if (init.body !== undefined) {
      body = JSON.stringify(init.body);
      headers["content-type"] ??= "application/json";
    }
    return fetch(srv.url + path, {
      method: init.method ?? (body !== undefined ? "POST" : "GET"),
      headers,
      body,
      signal: init.signal,
    });
  };
  const admin = (path: string, init?: { method?: string; body?: unknown }) => call(path, srv.adminToken, init);
  const made = await admin("/admin/projects", { body: { name: "Serving", slug: "serving" } });
  const project =
    made.status === 409
      ? await (await admin("/admin/projects"))
          .json()
          .then((l: { slug: string }[]) => l.find((p) => p.slug === "serving"))
      : await made.json();
  const sdk = (
    await (await admin(`/admin/projects/${project.slug}/keys`, { body: { name: "sdk", type: "sdk" } })).json()
  ).secret;
  const live = (
    await (await admin(`/admin/projects/${project.slug}/keys`, { body: { name: "live", type: "live" } })).json()
  ).secret;
  const workload = async (id: string) => (await (await admin(`/admin/workloads/${id}`)).json()) as WorkloadDetail;
  return {
    ...srv,
    record,
    project: project.slug,
    sdk,
    live,
    admin,
    data: (w, path, init = {}) =>
      call(`/endpoint/${project.slug}/${w}${path}`, init.token === undefined ? live : init.token, init),
    createWorkload: async (body) => {
      const r = await admin(`/admin/projects/${project.slug}/workloads`, { body });
      if (r.status !== 201) throw new Error(`create workload: ${r.status} ${await r.text()}`);
      return r.json();
    },
    workload,
    waitState: (id, state = "ready", timeoutMs = 30_000) =>
      waitFor(
        async () => {
          const w = await workload(id);
          return w.assignments.length > 0 && w.assignments.every((a) => a.state === state) ? w : undefined;
        },
        { what: `workload ${id} ${state}`, timeoutMs, detail: () => srv.output() },
      ),
    events: (filter) => readRecord(record).filter(filter ?? (() => true)),
  };
}

/** Reads an SSE response into its `data:` payloads (JSON-parsed where possible). */
export async function sseEvents(r: Response): Promise<unknown[]> {
  const text = await r.text();
  return text
    .split(/\r?\n\r?\n/)
    .flatMap((ev) =>
      ev
        .split(/\r?\n/)
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).trim()),
    )
    .map((d) => {
      try {
        return JSON.parse(d);
      } catch {
        return d;
      }
    });
}

/** Servers a test file starts (on `engine`'s store), stopped together at its end: `serve(env)` and `stopAll()`. */
export function servingPool(engine?: Engine) {
  const servers: Serving[] = [];
  return {
    serve: async (env: Record<string, string> = {}) => {
      const s = await startServing(env, [], undefined, engine);
      servers.push(s);
      return s;
    },
    stopAll: () => Promise.all(servers.map((s) => s.stop().catch(() => 0))),
  };
}
