/** How a check came out: `fail` makes `inferd doctor` exit 1. */
export type Status = "ok" | "warn" | "fail";

/** One line of `inferd doctor`: what was checked, how it came out, what was found, and what to do. */
export interface Check {
  name: string;
  status: Status;
  detail: string;
  hint?: string;
}

/** A check's result. @example check("gpus", "warn", "no GPU found", "llama.cpp still runs on the CPU") */
export const check = (name: string, status: Status, detail: string, hint?: string): Check =>
  hint ? { name, status, detail, hint } : { name, status, detail };

/** The report: one line per check (status, name, what was found, → what to do) and a count. */
export function formatChecks(checks: Check[]): string {
  const lines = checks.map(
    (c) => `${c.status.padEnd(4)}  ${c.name.padEnd(16)} ${c.detail}${c.hint ? `  → ${c.hint}` : ""}`,
  );
  const count = (s: Status) => checks.filter((c) => c.status === s).length;
  return [...lines, `${count("ok")} ok, ${count("warn")} warn, ${count("fail")} fail`].join("\n");
}
