/** Log levels in order of severity. */
const LEVELS = ["error", "warn", "info", "debug"] as const;
type Level = (typeof LEVELS)[number];

let threshold = 2;

/** Sets the lowest level written (`INFERD_LOG_LEVEL`); unknown names keep the default, info. */
export function setLogLevel(level: string): void {
  const i = LEVELS.indexOf(level as Level);
  if (i >= 0) threshold = i;
}

function write(level: Level, msg: string, detail?: unknown): void {
  if (LEVELS.indexOf(level) > threshold) return;
  const extra = detail === undefined ? "" : ` ${detail instanceof Error ? (detail.stack ?? detail.message) : typeof detail === "string" ? detail : JSON.stringify(detail)}`;
  process.stderr.write(`${new Date().toISOString()} ${level.padEnd(5)} ${msg}${extra}\n`);
}

/** The server log, on stderr: one line per event with a UTC timestamp and level. */
export const log = {
  error: (msg: string, detail?: unknown) => write("error", msg, detail),
  warn: (msg: string, detail?: unknown) => write("warn", msg, detail),
  info: (msg: string, detail?: unknown) => write("info", msg, detail),
  debug: (msg: string, detail?: unknown) => write("debug", msg, detail),
};
