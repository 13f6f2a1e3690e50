/**
 * The soak as the tests run it: `bun bench/soak.ts --json …` as a child process, its JSON report,
 * and what a user checks in it, put so that one comparison shows everything that went wrong.
 */
import { join } from "node:path";
import { REPO_ROOT } from "../lib";
import { RECEIVERS } from "./receivers";
import type { SoakReport } from "./report";

/** Runs `bun bench/soak.ts --json <args>`; returns its exit code and report. Its stderr is printed when it failed. */
export async function runSoakChild(args: string[]): Promise<{ code: number; report: SoakReport }> {
  const proc = Bun.spawn([process.execPath, join(REPO_ROOT, "bench/soak.ts"), "--json", ...args], {
    cwd: REPO_ROOT,
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  const line = stdout.trim().split("\n").at(-1) ?? "";
  if (code !== 0 || !line.startsWith("{")) console.error(stderr.slice(-20_000));
  return { code, report: JSON.parse(line) as SoakReport };
}

/**
 * Whether anything accepted was lost and every error explained: every job answered 202 finished
 * (none missing or unfinished), every receiver owed a delivery per finished job with none lost (the
 * 200 receivers got each one delivered, the failing one ended each terminal), and no 5xx, cut
 * stream, unexpected answer or connection error outside a fault. `NOTHING_LOST` is how it reads when
 * all is well.
 */
export function accounting(r: SoakReport) {
  const unexplained = (c: Record<string, { unexplained: number }>) =>
    Object.values(c).reduce((n, x) => n + x.unexplained, 0);
  return {
    jobs: {
      someAccepted: r.jobs.accepted > 0,
      missing: r.jobs.missing,
      unfinished: r.jobs.unfinished,
      allFinished: r.jobs.completed + r.jobs.failed === r.jobs.accepted,
    },
    deliveries: RECEIVERS.map((name) => {
      const d = r.deliveries[name];
      return {
        name,
        owedPerJob: d.owed === r.jobs.accepted,
        noRecord: d.noRecord,
        lost: d.lost,
        allEnded: name === "failing" ? d.terminal === d.owed : d.delivered === d.owed,
      };
    }),
    unexplained: {
      fiveXX: unexplained(r.fiveXX),
      cutStreams: unexplained(r.streams.cut),
      unexpected: r.unexpected,
      connection: r.connection.unexplained,
    },
  };
}

/** `accounting` of a run that lost nothing and whose every error a fault explains. */
export const NOTHING_LOST: ReturnType<typeof accounting> = {
  jobs: { someAccepted: true, missing: [], unfinished: [], allFinished: true },
  deliveries: RECEIVERS.map((name) => ({ name, owedPerJob: true, noRecord: [], lost: [], allEnded: true })),
  unexplained: { fiveXX: 0, cutStreams: 0, unexpected: {}, connection: {} },
};
