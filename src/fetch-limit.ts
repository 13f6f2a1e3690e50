/**
 * Bun's `fetch` runs at most 256 requests at once per process unless BUN_CONFIG_MAX_HTTP_REQUESTS
 * says more, and reads that variable only when the process starts (setting it later changes
 * nothing). inferd's requests to every runtime go through `fetch`, so a long-running inferd (the
 * server, an agent) starts itself again in place (`execve`: same process id, same arguments) with
 * the limit raised, unless the operator set one.
 */

/** Requests inferd's `fetch` may have open at once (to all runtimes together). */
export const FETCH_LIMIT = 16_384;

/**
 * Replaces this process with itself, BUN_CONFIG_MAX_HTTP_REQUESTS set to FETCH_LIMIT, when the
 * variable is unset; returns (doing nothing) when it is set. Call it before opening anything.
 */
export function raiseFetchLimit(env: Record<string, string | undefined> = process.env): void {
  if (env.BUN_CONFIG_MAX_HTTP_REQUESTS || !process.execve) return;
  // A compiled inferd is its own program; from source, Bun runs the script with its own flags.
  const argv = Bun.isStandaloneExecutable
    ? [process.execPath, ...process.argv.slice(2)]
    : [process.execPath, ...process.execArgv, ...process.argv.slice(1)];
  const next: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) next[k] = v;
  next.BUN_CONFIG_MAX_HTTP_REQUESTS = String(FETCH_LIMIT);
  process.execve(process.execPath, argv, next);
}
