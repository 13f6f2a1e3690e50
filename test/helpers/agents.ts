import { fixtureEnv } from "../fixtures";
import { repoRoot, sourceBin, startInferd, tempDir, waitFor, type Inferd } from "./proc";

/** An `inferd agent` process joined to a host. */
export interface AgentProc {
  workerId: string;
  dataDir: string;
  proc: ReturnType<typeof Bun.spawn>;
  output(): string;
  kill9(): Promise<void>;
  /** SIGTERM and the exit code. */
  stop(): Promise<number>;
}

/** A host (`inferd serve` without a local agent) with helpers for the admin API. */
export interface Host extends Inferd {
  admin(path: string, body?: unknown, method?: string): Promise<Response>;
}

/**
 * Starts a host for remote agents; workers are offline after `timeoutMs` of silence. `opts` can
 * reuse a data dir and add arguments (e.g. fixed `--port`/`--tls-port`, to restart the same host).
 */
export async function startHost(
  env: Record<string, string> = {},
  timeoutMs = 2500,
  opts: { dataDir?: string; args?: string[] } = {},
): Promise<Host> {
  const srv = await startInferd({
    env: { INFERD_LOCAL_AGENT: "0", INFERD_WORKER_TIMEOUT_MS: String(timeoutMs), INFERD_LOG_LEVEL: "warn", ...env },
    ...opts,
  });
  return {
    ...srv,
    admin: (path, body, method) =>
      fetch(srv.url + path, {
        method: method ?? (body ? "POST" : "GET"),
        headers: { authorization: `Bearer ${srv.adminToken}`, "content-type": "application/json" },
        body: body ? JSON.stringify(body) : undefined,
      }),
  };
}

/** Runs an inferd agent command (join or run) with the fake runtimes and GPUs on PATH. */
export function spawnAgent(
  args: string[],
  dataDir: string,
  env: Record<string, string> = {},
): { proc: ReturnType<typeof Bun.spawn>; output(): string } {
  let out = "";
  const proc = Bun.spawn([...sourceBin(), "agent", ...args, "--data-dir", dataDir], {
    cwd: repoRoot,
    env: fixtureEnv({
      FAKE_GPUS: "1x NVIDIA L4:23034",
      FAKE_LOAD_MS: "50",
      INFERD_TELEMETRY_INTERVAL_MS: "300",
      INFERD_RESTART_BACKOFF_MS: "100",
      ...env,
    }),
    stdout: "pipe",
    stderr: "pipe",
    stdin: "ignore",
  });
  const pump = async (s: ReadableStream<Uint8Array>) => {
    for await (const c of s as unknown as AsyncIterable<Uint8Array>) out += new TextDecoder().decode(c);
  };
  void pump(proc.stdout as ReadableStream<Uint8Array>);
  void pump(proc.stderr as ReadableStream<Uint8Array>);
  return { proc, output: () => out };
}

/** Adds a worker on the host, joins an agent to it and waits until the host sees it online. */
export function joinAgent(
  host: Host,
  name: string,
  env: Record<string, string> = {},
  dataDir = tempDir(`agent-${name}`),
): Promise<AgentProc> {
  return joinAgentAt(host, name, undefined, env, dataDir);
}

/** Adds a worker on the host and joins an agent with its token at `joinUrl` (default: the join command's own address, else another host of its cluster). */
export async function joinAgentAt(
  host: Host,
  name: string,
  joinUrl?: string,
  env: Record<string, string> = {},
  dataDir = tempDir(`agent-${name}`),
): Promise<AgentProc> {
  const created = await (await host.admin("/admin/workers", { name })).json();
  const [, , , shown, , token] = (created.join_command as string).split(" ");
  const url = joinUrl ?? shown;
  const { proc, output } = spawnAgent(["join", url, "--token", token], dataDir, env);
  await waitFor(
    async () => {
      if (proc.exitCode !== null) throw new Error(`agent ${name} exited ${proc.exitCode}: ${output()}`);
      const workers = await (await host.admin("/admin/workers")).json();
      // Online on the host and past the join on the agent (its credential is written before it runs).
      return (
        (output().includes("running as worker") &&
          workers.some((w: { id: string; state: string }) => w.id === created.id && w.state === "online")) ||
        undefined
      );
    },
    { what: `agent ${name} online`, timeoutMs: 20_000, detail: output },
  );
  return agentHandle(created.id, dataDir, proc, output);
}

/** Restarts an agent from its data dir (`inferd agent`), as after a reboot. */
export async function rerunAgent(host: Host, prev: AgentProc, env: Record<string, string> = {}): Promise<AgentProc> {
  const { proc, output } = spawnAgent([], prev.dataDir, env);
  await waitFor(
    () =>
      output().includes("running as worker") ||
      (proc.exitCode !== null ? Promise.reject(new Error(output())) : undefined),
    { what: "agent running again", timeoutMs: 20_000 },
  );
  return agentHandle(prev.workerId, prev.dataDir, proc, output);
}

function agentHandle(
  workerId: string,
  dataDir: string,
  proc: ReturnType<typeof Bun.spawn>,
  output: () => string,
): AgentProc {
  return {
    workerId,
    dataDir,
    proc,
    output,
    kill9: async () => {
      proc.kill("SIGKILL");
      await proc.exited;
    },
    stop: async () => {
      proc.kill("SIGTERM");
      return proc.exited;
    },
  };
}
