import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { loadConfig, type Config } from "../../src/config";
import { startServer, type Running } from "../../src/server";
import { storeEnv, type Engine } from "./postgres";

/** A server started in this process on a random loopback port with a fresh data dir. */
export interface TestServer extends Running {
  dataDir: string;
  config: Config;
  /** fetch against the server with the admin token. */
  admin(path: string, init?: { method?: string; body?: unknown; headers?: Record<string, string> }): Promise<Response>;
  /** fetch against the server with a given bearer token (or none). */
  call(
    path: string,
    token: string | undefined,
    init?: { method?: string; body?: unknown; headers?: Record<string, string>; raw?: BodyInit },
  ): Promise<Response>;
  /** The settings naming its store (`INFERD_DATABASE_URL` on PostgreSQL, none on SQLite), for a CLI run on it. */
  storeEnv: Record<string, string>;
  /** stops the server and removes its data dir. */
  close(): Promise<void>;
}

/**
 * Starts inferd in-process exactly as `inferd serve` does, with settings overridable by env-style
 * names; `engine: "postgres"` gives it a fresh database of the test PostgreSQL cluster as its store.
 */
export async function startTestServer(
  env: Record<string, string> = {},
  opts: { engine?: Engine } = {},
): Promise<TestServer> {
  const dataDir = mkdtempSync(join(tmpdir(), "inferd-test-"));
  const store = await storeEnv(opts.engine);
  const { config } = loadConfig([], {
    INFERD_PORT: "0",
    INFERD_DATA_DIR: dataDir,
    INFERD_LOCAL_AGENT: "0",
    INFERD_LOG_LEVEL: "error",
    ...store,
    ...env,
  });
  const running = await startServer(config, () => {});
  const call: TestServer["call"] = (path, token, init = {}) => {
    const headers: Record<string, string> = { ...(init.headers ?? {}) };
    if (token) headers.authorization = `Bearer ${token}`;
    let body: BodyInit | undefined = init.raw;
    if (init.body !== undefined) {
      body = JSON.stringify(init.body);
      headers["content-type"] ??= "application/json";
    }
    return fetch(running.url + path, { method: init.method ?? (body !== undefined ? "POST" : "GET"), headers, body });
  };
  return {
    ...running,
    dataDir,
    config,
    storeEnv: store,
    call,
    admin: (path, init) => call(path, running.adminToken, init),
    close: async () => {
      await running.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Creates a project and an sdk and a live key for it through the admin API. */
export async function seedProject(s: TestServer, name: string, slug?: string) {
  const project = await (await s.admin("/admin/projects", { body: { name, ...(slug ? { slug } : {}) } })).json();
  const sdk = await (
    await s.admin(`/admin/projects/${project.slug}/keys`, { body: { name: "sdk", type: "sdk" } })
  ).json();
  const live = await (
    await s.admin(`/admin/projects/${project.slug}/keys`, { body: { name: "live", type: "live" } })
  ).json();
  return { project, sdk: sdk.secret as string, live: live.secret as string };
}
