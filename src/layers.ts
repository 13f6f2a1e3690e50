/**
 * The house's layering, written down once: every folder and top-level file of `src/` (and `agent/`,
 * `ui/`) in a layer, lowest first. A file may import what lies in a lower layer, never a higher one;
 * inside a layer the rooms are independent of each other, except in an `ordered` layer, where a room
 * may import the rooms listed before it. `test/layers.test.ts` enforces it; README "Layout" says it in words.
 */

/** One layer: its name, what it is for, and its rooms (paths from the repository root). */
export interface Layer {
  name: string;
  says: string;
  rooms: string[];
  /** Whether a room may import the rooms listed before it in this layer. */
  ordered?: boolean;
}

/** The layers, lowest first. */
export const LAYERS: Layer[] = [
  {
    name: "ground",
    says: "helpers that import nothing of the house",
    rooms: [
      "src/version.ts",
      "src/words.ts",
      "src/log.ts",
      "src/ids.ts",
      "src/perms.ts",
      "src/text-table.ts",
      "src/invocation.ts",
      "src/types.d.ts",
      "src/layers.ts",
      "src/call.ts",
      "src/fetch-limit.ts",
      "src/coding-agents.ts",
    ],
  },
  {
    name: "agent",
    says: "the GPU agent: probes, runtimes, supervision, the pull loop, the launch policy, the shared protocol",
    rooms: ["agent"],
  },
  {
    name: "store",
    says: "the data dir, the store (schema, opening, backups, doctor), errors, settings' names, HTTP helpers, TLS, the cluster's hosts",
    rooms: [
      "src/datadir.ts",
      "src/db",
      "src/errors.ts",
      "src/config.ts",
      "src/http.ts",
      "src/multipart.ts",
      "src/tls",
      "src/cluster",
      "src/store",
    ],
    ordered: true,
  },
  {
    name: "shared",
    says: "what features share: execution policies as data, the audit log, request records, traces, usage, limits, dispatch order, the dashboard's files",
    rooms: [
      "src/execution",
      "src/audit",
      "src/inspector",
      "src/tracing",
      "src/usage",
      "src/limits",
      "src/dispatch",
      "src/ui",
    ],
    ordered: true,
  },
  {
    name: "people",
    says: "settings, users and their sessions, projects, keys, and the gate that authenticates a request",
    rooms: ["src/settings", "src/users", "src/projects", "src/keys", "src/auth"],
    ordered: true,
  },
  {
    name: "control plane",
    says: "workloads, external providers, models, LoRA adapters, placement, the fleet of workers, scaling, remote agents, webhooks",
    rooms: [
      "src/workloads",
      "src/providers",
      "src/models",
      "src/adapters",
      "src/placement",
      "src/workers",
      "src/cloud",
      "src/scaling",
      "src/agents",
      "src/webhooks",
    ],
    ordered: true,
  },
  {
    name: "data plane",
    says: "requests answered now, jobs answered later, batches of jobs",
    rooms: ["src/dataplane", "src/jobs", "src/batches"],
    ordered: true,
  },
  { name: "edges", says: "the admin extras, the API docs", rooms: ["src/admin", "src/docs"] },
  {
    name: "wiring",
    says: "the app's dependencies, the app, the server, the desktop window, the command line",
    rooms: [
      "src/deps.ts",
      "src/error-plugin.ts",
      "src/app.ts",
      "src/server.ts",
      "src/desktop.ts",
      "src/launch.ts",
      "src/cli.ts",
      "src/main.ts",
    ],
    ordered: true,
  },
  { name: "dashboard", says: "the dashboard's pages, which read the API's types", rooms: ["ui"] },
];

/** An import that runs up against the layering on purpose, until the change named in `why` lands. */
export interface Upward {
  from: string;
  to: string;
  why: string;
}

/** The imports allowed to run up (file to file), each until the change named in its `why` lands. */
export const UPWARD: Upward[] = [
  ...["src/audit/routes.ts", "src/usage/routes.ts", "src/users/routes.ts", "src/projects/routes.ts"].map((from) => ({
    from,
    to: "src/auth/service.ts",
    why: "principalOf: the request object's principal (src/call.ts), typed and checked by auth; until principals move into users/",
  })),
  {
    from: "src/usage/routes.ts",
    to: "src/users/access.ts",
    why: "projectScope of the principal: goes with principalOf into users/",
  },
  {
    from: "src/users/signin.ts",
    to: "src/auth/service.ts",
    why: "openSession: the gate's session cookie and audit (the rows themselves are users', users/session-rows.ts)",
  },
  {
    from: "src/users/signin.ts",
    to: "src/auth/oidc.ts",
    why: "OIDC sign-in belongs with users' sign-in (DESIGN: users, OIDC through a kept library)",
  },
  {
    from: "src/config.ts",
    to: "src/webhooks/schedule.ts",
    why: "the retry schedule's check, a pure module, until settings' checks are registered by their features",
  },
  { from: "src/config.ts", to: "src/limits/defaults.ts", why: "the default key limits' check: as above" },

  {
    from: "src/inspector/routes.ts",
    to: "src/workloads/service.ts",
    why: "resolveWorkload for the inspector's workload filter",
  },
  {
    from: "src/workloads/projector.ts",
    to: "src/models/service.ts",
    why: "listModelRows: the model store's rows a workload's projector offers",
  },
  {
    from: "src/workloads/routes.ts",
    to: "src/models/tenants.ts",
    why: "requireModelRoom: a tenant's model quota, checked when a workload is saved",
  },
  {
    from: "src/workloads/routes.ts",
    to: "src/workers/service.ts",
    why: "requireOpenWorker: a pinned worker must be open to the project",
  },
  { from: "src/workloads/routes.ts", to: "src/workers/fleet.ts", why: "the WorkloadDetail type of describeWorkload" },
  { from: "src/models/routes.ts", to: "src/workers/service.ts", why: "listWorkers: the fit of a model on each worker" },
  {
    from: "src/models/search.ts",
    to: "src/workers/snapshot.ts",
    why: "freeMemoryNow: the hub search's fit on today's free memory",
  },
];

/** The room that holds a path: the longest room that is the path or a folder above it. */
export function roomOf(path: string): string | undefined {
  let best: string | undefined;
  for (const layer of LAYERS) {
    for (const room of layer.rooms) {
      if ((path === room || path.startsWith(`${room}/`)) && room.length > (best?.length ?? 0)) best = room;
    }
  }
  return best;
}

/** Where a room stands: its layer's index and its place in that layer. */
export function placeOf(room: string): { layer: number; index: number } | undefined {
  for (const [layer, { rooms }] of LAYERS.entries()) {
    const index = rooms.indexOf(room);
    if (index >= 0) return { layer, index };
  }
  return undefined;
}

/** Whether `from` may import `to` by the layering (both rooms; a room may always import itself). */
export function mayImport(from: string, to: string): boolean {
  if (from === to) return true;
  const a = placeOf(from);
  const b = placeOf(to);
  if (!a || !b) return false;
  if (a.layer !== b.layer) return b.layer < a.layer;
  return !!LAYERS[a.layer]!.ordered && b.index < a.index;
}
