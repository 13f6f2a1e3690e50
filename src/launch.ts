/**
 * `inferd launch <agent>`: points a coding agent at this server and starts it. Through the running
 * server's admin API it picks a chat workload whose runtime can call tools (or says which flags a
 * workload's runtime needs), makes a key for its project (once: kept in `<data-dir>/agents/`), and
 * gives the agent its settings where it reads them — environment variables, or a config file of
 * inferd's own under `<data-dir>/agents/<agent>/` that the agent is pointed at (the user's own
 * config is never touched) — then runs it. `--print` shows the settings instead.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { engineOf } from "../agent/engines";
import { splitCommand } from "../agent/command";
import type { Config } from "./config";
import { dataPaths, runningServer } from "./datadir";
import { AGENTS, TOOL_FLAGS } from "./coding-agents";

/** Why launch cannot go on, in words a user can act on (the CLI prints it and exits 2). */
export class LaunchError extends Error {}

/** A workload as the admin API lists it (what launch reads). */
interface ListedWorkload {
  slug: string;
  project_slug: string;
  backend: string;
  task_type: string;
  model_name: string;
  config: Record<string, unknown>;
}

/** Whether a workload's runtime was started able to call tools. */
function callsTools(w: ListedWorkload): boolean {
  const command = typeof w.config.command === "string" ? w.config.command : "";
  let words: string[] = [];
  try {
    words = splitCommand(command);
  } catch {
    return false;
  }
  return engineOf(w.backend)?.toolsOn(words) ?? false;
}

/** The admin API of the running server. */
async function adminApi(config: Config): Promise<{ url: string; call<T>(path: string, body?: unknown): Promise<T> }> {
  const url = await runningServer(config.dataDir);
  if (!url)
    throw new LaunchError(`no inferd is running with the data dir ${config.dataDir}: start it first (inferd serve)`);
  const file = dataPaths(config.dataDir).adminToken;
  const token = config.adminToken ?? (existsSync(file) ? readFileSync(file, "utf8").trim() : undefined);
  if (!token) throw new LaunchError("no admin token: set --admin-token (INFERD_ADMIN_TOKEN)");
  return {
    url,
    call: async <T>(path: string, body?: unknown) => {
      const r = await fetch(`${url}${path}`, {
        method: body === undefined ? "GET" : "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const json = (await r.json()) as T & { error?: { message: string } };
      if (!r.ok) throw new Error(json.error?.message ?? `HTTP ${r.status}`);
      return json;
    },
  };
}

/** Picks the workload: the one named, else the first chat workload that can call tools. */
function pick(all: ListedWorkload[], agent: string, wanted?: string): ListedWorkload {
  const chats = all.filter((w) => w.task_type === "text2text" || w.task_type === "image2text");
  if (wanted) {
    const w = chats.find((x) => x.slug === wanted || x.model_name === wanted);
    if (!w) throw new LaunchError(`no chat workload "${wanted}" here`);
    if (!callsTools(w) && TOOL_FLAGS[w.backend])
      throw new LaunchError(
        `${w.project_slug}/${w.slug} cannot call tools, which ${agent} needs: add ${TOOL_FLAGS[w.backend]} to its command`,
      );
    return w;
  }
  const fit = chats.find(callsTools);
  if (fit) return fit;
  const lines = chats.map(
    (w) => `  ${w.project_slug}/${w.slug} (${w.backend}): add ${TOOL_FLAGS[w.backend] ?? "tool calling"}`,
  );
  throw new LaunchError(
    chats.length
      ? `no chat workload here can call tools, which ${agent} needs:\n${lines.join("\n")}`
      : `no chat workload here: create one (a text2text workload whose runtime calls tools) first`,
  );
}

/** The key launch uses for a project: made once, kept in `<data-dir>/agents/<project>.key`. */
async function keyFor(config: Config, api: Awaited<ReturnType<typeof adminApi>>, project: string): Promise<string> {
  const dir = join(config.dataDir, "agents");
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = join(dir, `${project}.key`);
  if (existsSync(file)) {
    const kept = readFileSync(file, "utf8").trim();
    const keys = await api.call<{ prefix: string; revoked_at: string | null }[]>(`/admin/projects/${project}/keys`);
    if (keys.some((k) => !k.revoked_at && kept.startsWith(k.prefix))) return kept;
  }
  const made = await api.call<{ secret: string }>(`/admin/projects/${project}/keys`, {
    name: "coding agents (inferd launch)",
    type: "live",
  });
  writeFileSync(file, `${made.secret}\n`, { mode: 0o600 });
  return made.secret;
}

/**
 * `inferd launch <agent> [--project <slug>] [--workload <slug>] [--print] [-- <agent's arguments>]`:
 * 0 (or the agent's exit code) on success.
 */
export async function launchCommand(config: Config, args: string[], out: (s: string) => void): Promise<number> {
  const dash = args.indexOf("--");
  const own = dash < 0 ? args : args.slice(0, dash);
  const passed = dash < 0 ? [] : args.slice(dash + 1);
  const [name, ...rest] = own;
  const agent = name ? AGENTS[name] : undefined;
  if (!agent)
    throw new LaunchError(
      `usage: inferd launch <${Object.keys(AGENTS).join("|")}> [--project <slug>] [--workload <slug>] [--print] [-- <its arguments>]`,
    );
  const opt = (flag: string) => {
    const i = rest.indexOf(flag);
    return i < 0 ? undefined : rest[i + 1];
  };
  const print = rest.includes("--print");
  const api = await adminApi(config);
  const projects = opt("--project")
    ? [opt("--project")!]
    : (await api.call<{ slug: string }[]>("/admin/projects")).map((p) => p.slug);
  const all: ListedWorkload[] = [];
  for (const p of projects) all.push(...(await api.call<ListedWorkload[]>(`/admin/projects/${p}/workloads`)));
  const w = pick(all, name, opt("--workload"));
  const key = await keyFor(config, api, w.project_slug);
  const dir = join(config.dataDir, "agents", name);
  const settings = agent.settings({ url: api.url, project: w.project_slug, key, model: w.model_name }, dir);
  if (print) {
    out(`# ${name} → ${w.project_slug}/${w.slug} (${w.model_name}) on ${api.url}`);
    for (const [k, v] of Object.entries(settings.env)) out(`export ${k}=${JSON.stringify(v)}`);
    for (const f of settings.files) out(`# ${f.path}\n${f.text}`);
    if (settings.args) out(`# run: ${agent.program} ${settings.args.join(" ")}`);
    return 0;
  }
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  for (const f of settings.files) writeFileSync(f.path, f.text, { mode: 0o600 });
  const run = spawnSync(agent.program, [...(settings.args ?? []), ...passed], {
    stdio: "inherit",
    env: { ...process.env, ...settings.env },
  });
  if (run.error)
    throw new LaunchError(`could not start ${agent.program}: ${run.error.message} (is it installed? npm i -g …)`);
  return run.status ?? 1;
}
