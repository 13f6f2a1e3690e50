/**
 * `inferd adapters list|add|rm`: a base workload's LoRA adapters through the running server's admin
 * API (the server pulls and checks an adapter, and its replicas load it), with the admin token.
 */
import { existsSync, readFileSync } from "node:fs";
import type { Config } from "../config";
import { dataPaths, ensureDataDir, runningServer } from "../datadir";
import { commandHint } from "../invocation";
import { table } from "../text-table";
import type { AdapterView } from "./service";

const USAGE = `usage: inferd adapters list <workload> [--json]
       inferd adapters add <workload> <name> <source> [--json]
       inferd adapters rm <workload> <name> [--json]
  <workload>: its id, or <project>/<workload slug>; <source>: hf:owner/repo, https://…/x.gguf or a path here
  clients then call the adapter as "model": "<name>" on the project's base URL`;

/** A workload as far as these commands read it. */
interface WorkloadRef {
  id: string;
  slug: string;
  project_slug: string;
  model_name: string;
}

/** A refusal of the server (its message) or of this command, printed as `inferd: <message>`. */
class AdapterCliError extends Error {}

/** Bytes as a person reads them, e.g. "1.2 MiB". */
function size(b: number): string {
  if (!b) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  for (; b >= 1024 && i < units.length - 1; i++) b /= 1024;
  return `${b.toFixed(i && b < 10 ? 1 : 0)} ${units[i]}`;
}

/** The admin API of the server running on the data dir, or a clear refusal when none runs. */
async function adminApi(config: Config) {
  ensureDataDir(config.dataDir);
  const url = await runningServer(config.dataDir);
  if (!url)
    throw new AdapterCliError(
      `no inferd is running with the data dir ${config.dataDir}: start it first (${commandHint("serve")}); adapters are pulled and served by the server`,
    );
  const file = dataPaths(config.dataDir).adminToken;
  const token = config.adminToken ?? (existsSync(file) ? readFileSync(file, "utf8").trim() : undefined);
  if (!token) throw new AdapterCliError("no admin token: set --admin-token (INFERD_ADMIN_TOKEN)");
  const call = async <T>(path: string, method = "GET", body?: unknown): Promise<{ status: number; data: T }> => {
    const r = await fetch(`${url}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await r.text();
    const data = (text ? JSON.parse(text) : undefined) as T & { error?: { message?: string } };
    if (!r.ok) throw new AdapterCliError(data?.error?.message ?? `the server answered ${r.status}`);
    return { status: r.status, data };
  };
  return { url, call };
}

type Api = Awaited<ReturnType<typeof adminApi>>;

/** The workload named by its id or `<project>/<slug>` (a bare slug: the one workload of that slug in any project). */
async function findWorkload(api: Api, ref: string): Promise<WorkloadRef> {
  const slash = ref.indexOf("/");
  if (slash > 0) {
    const [project, slug] = [ref.slice(0, slash), ref.slice(slash + 1)];
    const ws = (await api.call<WorkloadRef[]>(`/admin/projects/${encodeURIComponent(project)}/workloads`)).data;
    const w = ws.find((x) => x.slug === slug || x.id === slug);
    if (!w) throw new AdapterCliError(`project ${project} has no workload "${slug}"`);
    return w;
  }
  try {
    return (await api.call<WorkloadRef>(`/admin/workloads/${encodeURIComponent(ref)}`)).data;
  } catch (e) {
    if (!(e instanceof AdapterCliError)) throw e;
  }
  const projects = (await api.call<{ slug: string }[]>("/admin/projects")).data;
  const found: WorkloadRef[] = [];
  for (const p of projects)
    found.push(
      ...(await api.call<WorkloadRef[]>(`/admin/projects/${p.slug}/workloads`)).data.filter((w) => w.slug === ref),
    );
  if (found.length === 1) return found[0];
  if (found.length === 0) throw new AdapterCliError(`no workload "${ref}" (give its id or <project>/<workload slug>)`);
  throw new AdapterCliError(
    `"${ref}" names a workload in several projects: say which, e.g. ${found.map((w) => `${w.project_slug}/${w.slug}`).join(" or ")}`,
  );
}

/** The table `inferd adapters list` prints. */
export function adapterTable(list: AdapterView[]): string {
  if (list.length === 0) return "(no adapters; add one with: inferd adapters add <workload> <name> <source>)";
  return table(
    list.map((a) => ({ ...a, base_model: a.base_model ?? "", rank: a.rank ?? "", size: size(a.size_bytes) })),
    ["name", "state", "base_model", "rank", "size", "source", "reason"],
  );
}

/** The adapter once it is no longer pulling (asking again every `everyMs`). */
async function settled(api: Api, w: WorkloadRef, name: string, everyMs = 1000): Promise<AdapterView> {
  for (;;) {
    const { adapters } = (await api.call<{ adapters: AdapterView[] }>(`/admin/workloads/${w.id}/adapters`)).data;
    const a = adapters.find((x) => x.name === name);
    if (!a) throw new AdapterCliError(`adapter ${name} was removed while it was pulled`);
    if (a.state !== "pulling") return a;
    await Bun.sleep(everyMs);
  }
}

/**
 * `inferd adapters list|add|rm`: 0 on success, 1 when the server refuses (its message), 2 on wrong
 * usage. `add` waits until the adapter is pulled and checked: ready, or failed with the reason.
 */
export async function adapterCommand(
  config: Config,
  args: string[],
  out: (s: string) => void,
  err: (s: string) => void,
): Promise<number> {
  const json = args.includes("--json");
  const flag = args.find((a) => a.startsWith("-") && a !== "--json");
  const [verb, workload, ...pos] = args.filter((a) => a !== "--json");
  const arity: Record<string, number> = { list: 0, add: 2, rm: 1 };
  if (flag || !workload || !(verb in arity) || pos.length !== arity[verb]) {
    err(flag ? `inferd: unknown flag ${flag}\n${USAGE}` : USAGE);
    return 2;
  }
  try {
    const api = await adminApi(config);
    const w = await findWorkload(api, workload);
    const path = `/admin/workloads/${w.id}/adapters`;
    if (verb === "list") {
      const { adapters } = (await api.call<{ adapters: AdapterView[] }>(path)).data;
      out(json ? JSON.stringify(adapters) : adapterTable(adapters));
      return 0;
    }
    if (verb === "rm") {
      await api.call(`${path}/${encodeURIComponent(pos[0])}`, "DELETE");
      out(json ? JSON.stringify({ removed: pos[0] }) : `removed adapter ${pos[0]} from ${w.project_slug}/${w.slug}`);
      return 0;
    }
    const [name, source] = pos;
    const added = (await api.call<AdapterView>(path, "POST", { name, source })).data;
    if (added.state === "pulling" && !json) err(`pulling ${source}…`);
    const a = added.state === "pulling" ? await settled(api, w, name) : added;
    if (json) out(JSON.stringify(a));
    if (a.state === "failed") {
      err(`inferd: adapter ${name} failed: ${a.reason ?? "no reason given"}`);
      return 1;
    }
    const what = [a.base_model, a.rank && `rank ${a.rank}`].filter(Boolean).join(", ");
    const base = `${api.url}/endpoint/${w.project_slug}/v1`;
    if (!json) out(`adapter ${name} is ready (${what}): call it as "model": "${name}" on ${base}`);
    return 0;
  } catch (e) {
    if (!(e instanceof AdapterCliError)) throw e;
    err(`inferd: ${e.message}`);
    return 1;
  }
}
