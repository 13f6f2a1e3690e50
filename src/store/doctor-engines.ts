/**
 * `inferd doctor --engines`: for each engine inferd drives (agent/engines), whether it is on this
 * machine and which version, the pinned versions installed in the data dir, how inferd tells it is
 * ready, the requests at once it will assume and why, the routes it serves itself, and what is
 * missing, in words a user can act on. Read from the engine descriptors, so a new engine shows up here.
 */
import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { ENGINES } from "../../agent/engines";
import type { Engine, NativeRoutes } from "../../agent/engines/types";
import { probeGpus, realExec, type Exec } from "../../agent/gpu";
import type { GpuInfo } from "../../agent/protocol";

/** One engine as this machine has it. */
export interface EngineReport {
  backend: string;
  label: string;
  /** Its version on PATH, or null when it is not installed there. */
  version: string | null;
  /** Versions inferd installed for workloads that pin one (`<data-dir>/runtimes/<backend>/`). */
  pinned: string[];
  /** What inferd asks of a runtime before routing to it (paths of its base URL). */
  readiness: string[];
  /** Requests at once inferd assumes for a command that does not say, on this machine's first GPU. */
  capacity: { slots: number; why: string };
  /** The routes it serves itself: yes, no, or asked on first use. */
  routes: Record<keyof NativeRoutes, string>;
  /** What is missing, each a sentence saying what to do. */
  missing: string[];
}

/** How doctor runs a probe: the command's stdout and stderr together, or null when it cannot run. */
export type ProbeExec = (argv: string[]) => Promise<string | null>;

/** Runs `argv` (killed after 10 s), giving its stdout and stderr together; null when missing or failed. */
const probeExec: ProbeExec = async (argv) => {
  try {
    const p = Bun.spawn(argv, { stdout: "pipe", stderr: "pipe", stdin: "ignore", timeout: 10_000 });
    const [out, err] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text()]);
    return (await p.exited) === 0 ? `${out}\n${err}` : null;
  } catch {
    return null;
  }
};

/** The versions with a finished install under `<dataDir>/runtimes/<backend>/`. */
function pinnedVersions(dataDir: string, backend: string): string[] {
  const dir = join(dataDir, "runtimes", backend);
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((v) => existsSync(join(dir, v, ".inferd-installed")))
    .sort();
}

const said = (v: boolean | string | undefined) =>
  v === undefined ? "asked on first use (a 404 says no)" : v === true ? "yes" : v === false ? "no" : v;

/** One engine's report. */
async function reportOf(
  e: Engine,
  ctx: {
    dataDir: string;
    gpus: GpuInfo[];
    env: Record<string, string | undefined>;
    run: ProbeExec;
    which: (c: string) => string | null;
  },
): Promise<EngineReport> {
  const out = await ctx.run(e.probe.argv);
  const version = out === null ? null : (e.probe.version(out) ?? "unknown version");
  const pinned = e.pinned ? pinnedVersions(ctx.dataDir, e.backend) : [];
  const missing: string[] = [];
  if (version === null && pinned.length === 0) missing.push(`${e.label} is not installed here: ${e.install}`);
  if (e.needsGpu && ctx.gpus.length === 0)
    missing.push(`no GPU found (nvidia-smi, rocm-smi): ${e.label} needs an NVIDIA or AMD GPU and its driver`);
  if (e.pinned && !ctx.which("uv") && !ctx.which("python3"))
    missing.push(`neither uv nor python3 is on PATH: workloads setting ${e.pinned.field} cannot be installed`);
  if (e.backend === "vllm" && !ctx.which("ray"))
    missing.push(
      "no `ray` on PATH: multi-node workloads with --distributed-executor-backend ray need it (pip install ray; inferd adds it to pinned versions)",
    );
  const routes = e.routes(version ?? undefined);
  return {
    backend: e.backend,
    label: e.label,
    version,
    pinned,
    readiness: e.readiness("").map((u) => u || "/"),
    capacity: e.capacity({ args: [], gpus: ctx.gpus.slice(0, 1), env: ctx.env }),
    routes: { messages: said(routes.messages), responses: said(routes.responses), tokenize: routes.tokenize },
    missing,
  };
}

/** Every engine's report, in the registry's order. */
export async function engineReports(
  dataDir: string,
  env: Record<string, string | undefined> = process.env,
  deps: { exec?: Exec; run?: ProbeExec; which?: (c: string) => string | null } = {},
): Promise<EngineReport[]> {
  const gpus = await probeGpus(deps.exec ?? realExec);
  const which = deps.which ?? ((c: string) => Bun.which(c, { PATH: env.PATH ?? "" }));
  const ctx = { dataDir, gpus, env, run: deps.run ?? probeExec, which };
  // A custom server is whatever program its workload names: there is nothing to look for.
  return Promise.all(
    Object.values(ENGINES)
      .filter((e) => e.probe.argv.length > 0)
      .map((e) => reportOf(e, ctx)),
  );
}

/** The reports in words: a block per engine. */
export function formatEngineReports(reports: EngineReport[]): string {
  return reports
    .map((r) => {
      const found = r.version !== null ? `installed: ${r.version}` : r.pinned.length ? "not on PATH" : "not installed";
      const lines = [
        `${r.label} (${r.backend}): ${found}${r.pinned.length ? `; pinned versions installed: ${r.pinned.join(", ")}` : ""}`,
        `  ready when:   ${r.readiness.join(" or ")} answers 2xx`,
        `  capacity:     ${r.capacity.slots} requests at once (${r.capacity.why})`,
        `  own routes:   Messages ${r.routes.messages}; Responses ${r.routes.responses}; token counting by ${r.routes.tokenize}`,
        ...r.missing.map((m) => `  missing:      ${m}`),
      ];
      return lines.join("\n");
    })
    .join("\n\n");
}
