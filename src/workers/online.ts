/** When a worker counts as online: heard from within `--worker-timeout-ms`. */

/** Workers not heard from for this long are offline (`--worker-timeout-ms`). */
let offlineAfterMs = 30_000;

/** Sets how long a silent worker stays online. */
export function setOfflineAfter(ms: number): void {
  offlineAfterMs = ms;
}

/** Whether a worker last seen at `lastSeenAt` (ISO time, null: never) is online at `now` (ms). */
export function isOnline(lastSeenAt: string | null, now: number): boolean {
  return now - (lastSeenAt ? Date.parse(lastSeenAt) : 0) < offlineAfterMs;
}
