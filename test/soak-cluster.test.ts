import { afterAll, expect, test } from "bun:test";
import { accounting, NOTHING_LOST, runSoakChild } from "../bench/soak/child";
import { stopTestPostgres, testPostgres } from "./helpers/postgres";

/**
 * The cluster soak's short mode (`bun bench/soak.ts --short --json --hosts 2 --database-url …`, about
 * 2 minutes) on a real PostgreSQL started here: two hosts and a remote agent under mixed traffic,
 * each host killed with -9 in turn (a leader restarted once the other leads, one kept down until it
 * is listed gone), and runtime, agent and receiver faults between. Nothing accepted by either host
 * may be lost, the lead must move, and every 5xx must be explained by a fault.
 */

/** Planned kills of a host in short mode with two hosts (see FAULTS in bench/soak.ts): two each. */
const PLANNED_KILLS = 4;

afterAll(async () => {
  await stopTestPostgres();
});

test("soak --short --hosts 2: each host killed in turn, the lead moves; no accepted job or owed delivery lost, no unexplained 5xx", async () => {
  const url = await (await testPostgres()).createDatabase();
  const { code, report: r } = await runSoakChild(["--short", "--hosts", "2", "--database-url", url]);
  expect(r.failures).toEqual([]);
  expect(code).toBe(0);

  // Both hosts were killed, and the lead moved to the other host each time the leader died.
  const c = r.cluster!;
  expect(c.hosts).toHaveLength(2);
  expect(r.faults.inferdKills).toBeGreaterThanOrEqual(PLANNED_KILLS);
  for (const h of c.hosts) {
    expect({ host: h.name, killed: h.kills >= 1, processes: h.inferd.processes }).toEqual({
      host: h.name,
      killed: true,
      processes: h.kills + 1,
    });
    // Both hosts served the clients.
    expect(h.requests.ok).toBeGreaterThan(0);
  }
  expect(c.hosts.reduce((n, h) => n + h.killsListedGone, 0)).toBeGreaterThanOrEqual(1);
  expect(c.leader.killsOfLeader).toBeGreaterThanOrEqual(1);
  expect(c.leader.changes).toBeGreaterThanOrEqual(c.leader.killsOfLeader);
  expect(new Set(c.leader.seen.map((s) => s.host)).size).toBe(2);
  expect(r.faults.runtimeKills).toBeGreaterThanOrEqual(1);
  expect(r.faults.agentKills).toBeGreaterThanOrEqual(1);
  expect(r.faults.receiverFlaps).toBeGreaterThanOrEqual(1);
  expect(r.faults.notRecovered).toEqual([]);

  // Every job either host answered 202 finished (read back by id through the other host), every
  // delivery owed arrived, and errors came only from faults: a request without an answer only
  // from a host that was down, a 5xx or a cut stream only during a fault.
  expect(accounting(r)).toEqual(NOTHING_LOST);
}, 240_000);
