/**
 * The server log, on stderr: one line per event with a UTC timestamp and level. The level in force
 * (`--log-level`) can change while serving (the Settings page); the next line obeys it.
 */

/** Log levels in order of severity. */
export const LOG_LEVELS = ["error", "warn", "info", "debug"] as const;
type Level = (typeof LOG_LEVELS)[number];

let threshold = 2;

/** Sets the lowest level written (`--log-level`, at start and when changed at run time); unknown names keep the level in force. */
export function setLogLevel(level: string): void {
  const i = LOG_LEVELS.indexOf(level as Level);
  if (i >= 0) threshold = i;
}

function write(level: Level, msg: string, detail?: unknown): void {
  if (LOG_LEVELS.indexOf(level) > threshold) return;
  const extra =
    detail === undefined
      ? ""
      : ` ${detail instanceof Error ? (detail.stack ?? detail.message) : typeof detail === "string" ? detail : JSON.stringify(detail)}`;
  process.stderr.write(`${new Date().toISOString()} ${level.padEnd(5)} ${msg}${extra}\n`);
}

/** The server log, on stderr: one line per event with a UTC timestamp and level. */
export const log = {
  error: (msg: string, detail?: unknown) => write("error", msg, detail),
  warn: (msg: string, detail?: unknown) => write("warn", msg, detail),
  info: (msg: string, detail?: unknown) => write("info", msg, detail),
  debug: (msg: string, detail?: unknown) => write("debug", msg, detail),
};
