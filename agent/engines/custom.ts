/**
 * A custom server: any model server the operator runs that is none of the other engines —
 * Hugging Face's text-embeddings-inference, whisper.cpp's server, a Chronos or TimesFM forecaster, an
 * in-house FastAPI app. Its workload says the command (with `{port}`, the loopback port inferd gives
 * it), the path that answers 2xx once it is ready, how many requests it serves at once, and which
 * inferd routes it serves at which of its own paths; inferd forwards those requests as they are.
 * It runs a program of the operator's choice, so tenants may run one only when the operator allows
 * its program (`--policy-custom-programs`, none by default). The fakes that stand for the servers
 * the README shows are `test/fixtures/bin/text-embeddings-router` and `test/fixtures/bin/forecaster`.
 */
import { z } from "zod";
import { splitCommand } from "../command";
import { baseUrlOf, gpuEnv, vendorOfLaunch } from "../runtimes/args";
import type { Engine } from "./types";

/** Where the port goes in a custom command (and the host, always loopback). */
export const PORT_MARK = "{port}";
const HOST_MARK = "{host}";

/** A path on the server: absolute, no scheme, no `..`, no query. */
const ServerPath = z
  .string()
  .max(512)
  .regex(/^\/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$/, "must be a path on the server, such as /embed")
  .refine((p) => !p.split("/").includes(".."), "must not contain ..");

/** An inferd route under `/v1/` (`embeddings`, `audio/transcriptions`, `forecast`…). */
const RouteName = z.string().regex(/^[a-z]+(\/[a-z_]+)?$/, "must be an inferd route under /v1/, such as embeddings");

/** The routes a custom server serves: inferd's route under `/v1/` → the server's own path. */
export type CustomRoutes = Record<string, string>;

/** The config fields of a custom workload besides its command (checked as every command is, plus `{port}`). */
const CUSTOM_FIELDS = {
  ready_path: ServerPath.optional(),
  slots: z.number().int().min(1).max(4096).optional(),
  routes: z
    .record(RouteName, ServerPath)
    .refine((r) => Object.keys(r).length > 0, 'must name at least one route, e.g. {"embeddings": "/embed"}'),
};

/** Requests a custom server serves at once when its workload does not say (the contract's default concurrency). */
export const CUSTOM_SLOTS = 20;

/**
 * The server's path for an inferd request path (`/v1/embeddings`), or null when the workload does
 * not serve that route. Other engines (no map) serve every path as it is.
 * @example runtimePath({ embeddings: "/embed" }, "/v1/embeddings") // → "/embed"
 */
export function runtimePath(routes: CustomRoutes | undefined, path: string): string | null {
  if (!routes) return path;
  const route = path.startsWith("/v1/") ? path.slice(4) : path;
  return Object.hasOwn(routes, route) ? routes[route] : null;
}

/**
 * The answer for a route a custom server does not serve, as a FastAPI app answers a path it lacks
 * (so the Messages and Responses routes fall back to chat completions, see src/dataplane/forward.ts
 * `routeMissing`); the server itself is not asked.
 */
export const notServed = (): Response => Response.json({ detail: "Not Found" }, { status: 404 });

/** A custom workload's route map from its config (none for other backends). */
export const routesOf = (config: Record<string, unknown>): CustomRoutes | undefined =>
  config.routes && typeof config.routes === "object" ? (config.routes as CustomRoutes) : undefined;

/** A custom server, as the engine descriptor says it. */
export const custom: Engine = {
  backend: "custom",
  label: "Custom server",
  // Not in the dashboard's form (its route map has no fields there): made through the API.
  // No one program: `inferd doctor --engines` has nothing to look for.
  probe: { argv: [], version: () => undefined },
  install: "any program on PATH: the workload's command names it",
  family: "custom",
  needsGpu: false,
  programs: [],
  flags: { tensorParallel: [], servedName: [], model: [], apiKey: [] },
  config: CUSTOM_FIELDS,
  configProblem: (config) =>
    typeof config.command === "string" && !config.command.includes(PORT_MARK)
      ? {
          field: "command",
          message: `must say where the server listens with ${PORT_MARK} (inferd gives it a free loopback port), e.g. --port ${PORT_MARK}`,
        }
      : undefined,
  apiKeyOf: () => undefined,
  readiness: (base) => [`${base}/health`],
  capacity: () => ({
    slots: CUSTOM_SLOTS,
    why: "the workload's config.slots, else 20 (the contract's default concurrency)",
  }),
  // A custom server speaks no Messages or Responses: inferd translates them to chat completions.
  routes: () => ({ messages: false, responses: false, tokenize: "generate" }),
  toolsOn: () => false,
  launch: (ctx) => {
    const { config } = ctx.spec.workload;
    const port = ctx.freePort;
    const argv = splitCommand(String(config.command)).map((w) =>
      w.replaceAll(PORT_MARK, String(port)).replaceAll(HOST_MARK, "127.0.0.1"),
    );
    const base = baseUrlOf("127.0.0.1", port);
    return {
      argv,
      env: gpuEnv(ctx.spec.gpu_indices, vendorOfLaunch(ctx.gpus)),
      baseUrl: base,
      port,
      healthUrls: [`${base}${(config.ready_path as string | undefined) ?? "/health"}`],
      prep: [],
      slots: (config.slots as number | undefined) ?? CUSTOM_SLOTS,
      paths: routesOf(config),
    };
  },
  fake: "test/fixtures/bin/text-embeddings-router, test/fixtures/bin/forecaster",
};
