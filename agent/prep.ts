import type { LogRing } from "./ring";
import type { LogSink } from "./logfile";
import { ptySpawn, type SpawnFn } from "./supervisor";
import type { PrepStep } from "./runtimes/types";

/** Where prep output goes: the replica's ring and log file. */
export interface PrepOutput {
  ring: LogRing;
  logFile?: LogSink;
}

const write = (out: PrepOutput, text: string | Uint8Array) => {
  out.ring.push(text);
  out.logFile?.write(text);
};

/** Pulls a model through the Ollama API, writing each progress line to the log. */
async function ollamaPull(baseUrl: string, model: string, out: PrepOutput, signal: AbortSignal): Promise<void> {
  const r = await fetch(`${baseUrl}/api/pull`, {
    method: "POST",
    body: JSON.stringify({ model, stream: true }),
    signal,
  });
  if (!r.ok || !r.body)
    throw new Error(`ollama pull ${model} failed: HTTP ${r.status} ${await r.text().catch(() => "")}`);
  let buf = "";
  const dec = new TextDecoder();
  for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) {
    buf += dec.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (!line) continue;
      const ev = JSON.parse(line) as { status?: string; error?: string; total?: number; completed?: number };
      if (ev.error) throw new Error(`ollama pull ${model} failed: ${ev.error}`);
      const pct = ev.total ? ` ${Math.floor(((ev.completed ?? 0) / ev.total) * 100)}%` : "";
      write(out, `${ev.status ?? ""}${pct}\r\n`);
    }
  }
}

/**
 * Runs the steps before a runtime starts (version installs, model pulls) one after another, each
 * under a PTY with its output in the replica's log. Throws with the step's title and exit code.
 */
export async function runPrep(
  steps: PrepStep[],
  env: Record<string, string>,
  out: PrepOutput,
  signal: AbortSignal,
  spawn: SpawnFn = ptySpawn,
): Promise<void> {
  for (const step of steps) {
    if (signal.aborted) throw new Error("stopped");
    if (step.done?.()) continue;
    step.before?.();
    write(out, `\x1b[1m[inferd] ${step.title}\x1b[0m\r\n`);
    if (step.ollamaPull) {
      await ollamaPull(step.ollamaPull.baseUrl, step.ollamaPull.model, out, signal);
    } else if (step.argv) {
      let proc;
      try {
        proc = spawn({ argv: step.argv, env: { ...env, ...(step.env ?? {}) }, onData: (c) => write(out, c) });
      } catch (e) {
        throw new Error(`${step.title} failed: command not found: ${step.argv[0]} (${(e as Error).message})`);
      }
      const onAbort = () => proc.kill("SIGTERM");
      signal.addEventListener("abort", onAbort, { once: true });
      const exit = await proc.exited;
      await Promise.race([proc.outputClosed, Bun.sleep(1000)]);
      proc.close();
      signal.removeEventListener("abort", onAbort);
      if (exit.code !== 0) {
        const tail = out.ring.lastLines(10);
        throw new Error(
          `${step.title} failed (${exit.signal ? `killed by ${exit.signal}` : `exit code ${exit.code}`})\n${tail}`,
        );
      }
    }
    step.after?.();
  }
}
