import { expect, test } from "bun:test";
import { accounting, NOTHING_LOST, runSoakChild } from "../bench/soak/child";

/**
 * The soak's short mode (`bun bench/soak.ts --short --json`, under 2 minutes): kill -9 of inferd,
 * of a runtime and of the remote agent, and a webhook receiver down and up, under mixed traffic.
 * Nothing accepted may be lost, and every 5xx must be explained by a fault.
 */

/** Planned kills of inferd in short mode (see FAULTS in bench/soak.ts). */
const PLANNED_KILLS = 5;
/**
 * Descriptors of the last inferd after the drain may exceed those of the first one before any
 * traffic by this many. Sockets come and go with keep-alive connections that are legitimately idle
 * at the end and were not there at the start: the soak's 6 clients and 8 drain pollers, the remote
 * agent's polls and uploads, the runtimes' and receivers' pooled connections (about 20 at most).
 * A leak per request (over a thousand requests) or per fault would be far beyond it.
 */
const FD_TOLERANCE = 30;
/** Descriptors that are not sockets (SQLite files, runtime PTYs and logs, event fds) are fixed by what runs: a runtime restarting may hold a few more for a moment. */
const NON_SOCKET_FD_TOLERANCE = 4;

test("soak --short: 5 kills of inferd, runtime, agent and receiver faults; no accepted job or owed delivery lost, no unexplained 5xx, fds flat", async () => {
  const { code, report: r } = await runSoakChild(["--short"]);
  expect(r.failures).toEqual([]);
  expect(code).toBe(0);

  expect(r.faults.inferdKills).toBeGreaterThanOrEqual(PLANNED_KILLS);
  expect(r.faults.runtimeKills).toBeGreaterThanOrEqual(1);
  expect(r.faults.agentKills).toBeGreaterThanOrEqual(1);
  expect(r.faults.receiverFlaps).toBeGreaterThanOrEqual(1);
  expect(r.faults.notRecovered).toEqual([]);

  expect(accounting(r)).toEqual(NOTHING_LOST);
  expect(r.requests.sent.chat + r.requests.sent.stream).toBeGreaterThan(0);

  expect(r.inferd.processes).toBe(r.faults.inferdKills + 1);
  expect(r.inferd.fds.idleEnd).toBeLessThanOrEqual(r.inferd.fds.idleStart + FD_TOLERANCE);
  expect(r.inferd.nonSocketFds.idleEnd).toBeLessThanOrEqual(r.inferd.nonSocketFds.idleStart + NON_SOCKET_FD_TOLERANCE);
  expect(r.inferd.nonSocketFds.loadEnd).toBeLessThanOrEqual(r.inferd.nonSocketFds.loadStart + NON_SOCKET_FD_TOLERANCE);
}, 150_000);
