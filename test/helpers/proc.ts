/**
 * Helpers for tests that run inferd as a child process, from source or as the compiled binary:
 * start `serve` on a free port in a fresh data dir, wait until it listens, stop it, and clean up.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { storeEnv, type Engine } from "./postgres";

/** The repository root. */
export const repoRoot = join(import.meta.dir, "..", "..");

/** The command that runs inferd from source: this Bun on src/main.ts. */
export const sourceBin = (): string[] => [process.execPath, join(repoRoot, "src/main.ts")];

/** How long `startInferd` waits for the `listening on` line before failing. */
export const START_TIMEOUT_MS = 30_000;

/** How long `stop()` waits after SIGTERM before it kills the process and fails. */
export const STOP_TIMEOUT_MS = 15_000;

const dirs: string[] = [];
const running = new Set<Subprocess>();

/**
 * A fresh directory under the OS temp dir, removed by `cleanup()`.
 * @example const dir = tempDir("binary"); // → /tmp/inferd-binary-Ab12Cd
 */
export function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), `inferd-${prefix.replace(/[^\w.-]/g, "_")}-`));
  dirs.push(dir);
  return dir;
}

/** Kills any inferd these helpers started that is still running and removes every `tempDir`. */
export async function cleanup(): Promise<void> {
  for (const proc of running) proc.kill("SIGKILL");
  await Promise.all([...running].map((p) => p.exited));
  running.clear();
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
}

/**
 * Polls `check` until it returns a truthy value (returned) or `timeoutMs` passes (throws, naming
 * `what` and adding `detail()` — e.g. the process output — to the message).
 * @example await waitFor(() => srv.output().includes("admin token"), { what: "the admin token line" });
 */
export async function waitFor<T>(
  check: () => T | Promise<T>,
  opts: { what: string; timeoutMs?: number; intervalMs?: number; detail?: () => string },
): Promise<NonNullable<T>> {
  const deadline = Date.now() + (opts.timeoutMs ?? 10_000);
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline)
      throw new Error(`timed out waiting for ${opts.what}${opts.detail ? `\n--- output ---\n${opts.detail()}` : ""}`);
    await Bun.sleep(opts.intervalMs ?? 25);
  }
}

/** The environment for a child inferd: ours without INFERD_* settings, local agent off, then `env`. */
function childEnv(env: Record<string, string> | undefined): Record<string, string> {
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith("INFERD_")) base[k] = v;
  return { ...base, INFERD_LOCAL_AGENT: "0", ...env };
}

/** Spawns a command with its output collected: `all` (interleaved in arrival order), `stdout`, `stderr`. */
function spawnCollecting(cmd: string[], cwd: string, env: Record<string, string>) {
  const proc = Bun.spawn(cmd, { cwd, env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  running.add(proc);
  void proc.exited.then(() => running.delete(proc));
  const text = { all: "", stdout: "", stderr: "" };
  const pump = async (stream: ReadableStream<Uint8Array>, part: "stdout" | "stderr") => {
    const decoder = new TextDecoder();
    for await (const chunk of stream) {
      const s = decoder.decode(chunk, { stream: true });
      text.all += s;
      text[part] += s;
    }
  };
  const drained = Promise.all([pump(proc.stdout, "stdout"), pump(proc.stderr, "stderr")]);
  return { proc, text, drained };
}

/** Options shared by `startInferd` and `runInferd`. */
export interface InferdOptions {
  /** The command to run; default `sourceBin()`. Pass `[binaryPath]` for a compiled binary. */
  bin?: string[];
  /** Extra arguments after the defaults. */
  args?: string[];
  /** Environment on top of ours (INFERD_* removed, INFERD_LOCAL_AGENT=0). */
  env?: Record<string, string>;
  /** Working directory; default the repository root. */
  cwd?: string;
}

/** A running `inferd serve` started by `startInferd`. */
export interface Inferd {
  url: string;
  proc: Subprocess;
  dataDir: string;
  adminToken: string;
  /** The settings naming its store (`INFERD_DATABASE_URL` on PostgreSQL, none on SQLite): pass them again to restart it on the same store. */
  storeEnv: Record<string, string>;
  /** Everything it printed so far, stdout and stderr interleaved. */
  output(): string;
  /** SIGTERM, then waits for the exit code (kills it and throws if it does not stop in time). */
  stop(): Promise<number>;
  /** SIGKILL, as a crash or power cut would, and waits until it is gone. */
  kill9(): Promise<void>;
}

/**
 * Starts `inferd serve --port 0 --data-dir <dataDir>` and waits for its `listening on` line.
 * The data dir defaults to a fresh `tempDir`; `engine: "postgres"` gives it a fresh database of the
 * test PostgreSQL cluster unless `env` already names one (a restart passes `storeEnv` back).
 * Fails with the collected output if it exits or does not listen within START_TIMEOUT_MS.
 * @example const srv = await startInferd(); await fetch(`${srv.url}/healthz`); await srv.stop();
 */
export async function startInferd(opts: InferdOptions & { dataDir?: string; engine?: Engine } = {}): Promise<Inferd> {
  const dataDir = opts.dataDir ?? tempDir("data");
  const cmd = [...(opts.bin ?? sourceBin()), "serve", "--port", "0", "--data-dir", dataDir, ...(opts.args ?? [])];
  const store = opts.env?.INFERD_DATABASE_URL
    ? { INFERD_DATABASE_URL: opts.env.INFERD_DATABASE_URL }
    : await storeEnv(opts.engine);
  const env = childEnv({ ...opts.env, ...store });
  const { proc, text } = spawnCollecting(cmd, opts.cwd ?? repoRoot, env);
  let exited = false;
  void proc.exited.then(() => (exited = true));
  const url = await waitFor(
    () => {
      const m = /listening on (http:\/\/\S+)/.exec(text.stdout);
      if (m) return m[1];
      if (exited)
        throw new Error(
          `inferd exited with code ${proc.exitCode ?? proc.signalCode} before listening: ${cmd.join(" ")}\n--- output ---\n${text.all}`,
        );
      return undefined;
    },
    { what: `"listening on" from ${cmd.join(" ")}`, timeoutMs: START_TIMEOUT_MS, detail: () => text.all },
  ).catch(async (e) => {
    proc.kill("SIGKILL");
    await proc.exited;
    throw e;
  });
  const tokenFile = join(dataDir, "admin-token");
  const flagIndex = opts.args?.indexOf("--admin-token") ?? -1;
  const adminToken =
    /admin token \(.*\): (ik_admin_\S+)/.exec(text.stdout)?.[1] ??
    (existsSync(tokenFile) ? readFileSync(tokenFile, "utf8").trim() : undefined) ??
    (flagIndex >= 0 ? opts.args?.[flagIndex + 1] : undefined) ??
    env.INFERD_ADMIN_TOKEN ??
    "";
  return {
    url,
    proc,
    dataDir,
    adminToken,
    storeEnv: store,
    output: () => text.all,
    stop: async () => {
      if (exited) return proc.exited;
      proc.kill("SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), STOP_TIMEOUT_MS);
      const code = await proc.exited;
      clearTimeout(timer);
      if (proc.signalCode === "SIGKILL")
        throw new Error(`inferd did not stop within ${STOP_TIMEOUT_MS} ms of SIGTERM\n--- output ---\n${text.all}`);
      return code;
    },
    kill9: async () => {
      proc.kill("SIGKILL");
      await proc.exited;
    },
  };
}

/**
 * Runs one inferd command to its end (e.g. `version`, or a `serve` expected to refuse) and returns
 * its exit code and output. Killed and failed after `timeoutMs`.
 * @example const r = await runInferd({ args: ["version"] }); // → { code: 0, stdout: "0.1.0\n", … }
 */
export async function runInferd(
  opts: InferdOptions & { timeoutMs?: number } = {},
): Promise<{ code: number; stdout: string; stderr: string; output: string }> {
  const cmd = [...(opts.bin ?? sourceBin()), ...(opts.args ?? [])];
  const { proc, text, drained } = spawnCollecting(cmd, opts.cwd ?? repoRoot, childEnv(opts.env));
  const limit = opts.timeoutMs ?? START_TIMEOUT_MS;
  const timer = setTimeout(() => proc.kill("SIGKILL"), limit);
  const code = await proc.exited;
  clearTimeout(timer);
  await drained;
  if (proc.signalCode === "SIGKILL")
    throw new Error(`${cmd.join(" ")} did not finish within ${limit} ms\n--- output ---\n${text.all}`);
  return { code, stdout: text.stdout, stderr: text.stderr, output: text.all };
}

/** Whether a process with this pid exists (zombies count as gone once reaped). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
