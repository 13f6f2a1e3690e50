/**
 * The webhook retry schedule as the `--webhook-retry-schedule` setting writes it (`1m,5m,15m,1h,6h`):
 * parsed for the delivery loop, and checked where the setting is read or changed (pure, so
 * src/config.ts can check the setting with it).
 */

/** The contract's retry delays after attempts 1 to 5: 1 min, 5 min, 15 min, 1 h, 6 h. */
export const DEFAULT_SCHEDULE_MS = [60_000, 300_000, 900_000, 3_600_000, 21_600_000];

const UNITS = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 } as const;

/** The shortest delay between two attempts: shorter would hammer a failing receiver (and our own loop). */
export const MIN_DELAY_MS = 100;
/** The longest delay between two attempts (a week). */
export const MAX_DELAY_MS = 7 * 24 * 3_600_000;
/** The most retries a schedule may list. */
export const MAX_RETRIES = 20;

/**
 * Parses a retry schedule such as `1s,1s,1s,1s,1s` or `1m,5m,15m,1h,6h` (ms, s, m, h): at most 20
 * delays, each from 100 ms to 7 days.
 * @example parseSchedule("500ms,2s,1m") // → [500, 2000, 60000]
 */
export function parseSchedule(text: string): number[] {
  const parts = text.split(",");
  if (parts.length > MAX_RETRIES)
    throw new Error(`a schedule lists at most ${MAX_RETRIES} delays, got ${parts.length}`);
  return parts.map((part) => {
    const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$/.exec(part);
    if (!m) throw new Error(`"${part}" is not a duration (use e.g. 500ms, 1s, 5m, 1h)`);
    const ms = Math.round(Number(m[1]) * UNITS[(m[2] ?? "ms") as keyof typeof UNITS]);
    if (ms < MIN_DELAY_MS) throw new Error(`"${part.trim()}" is shorter than the shortest delay, ${MIN_DELAY_MS}ms`);
    if (ms > MAX_DELAY_MS) throw new Error(`"${part.trim()}" is longer than the longest delay, 7 days`);
    return ms;
  });
}

/** Why a schedule cannot be used, or null when it can (the setting's check). */
export function scheduleProblem(text: string): string | null {
  try {
    parseSchedule(text);
    return null;
  } catch (e) {
    return `${(e as Error).message}; write the delays before attempts 2, 3, … comma-separated, e.g. 1m,5m,15m,1h,6h`;
  }
}
