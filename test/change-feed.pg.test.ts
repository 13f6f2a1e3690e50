/**
 * Issue 33, "one change feed", on a real PostgreSQL: two hosts on one database (each opens the store
 * and listens for changes as `inferd serve` does). A key's priority and weight, or a worker's cluster
 * address, changed through host A (the admin API's and the agent heartbeat's functions) reach host
 * B's memos within a second, not at some later re-read; a heartbeat that changes nothing is silent;
 * the triggers are (re)made from the code's declaration at every start.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { SQL } from "bun";
import { eq } from "drizzle-orm";
import { openPgStore, type Store } from "../src/db";
import { CHANGE_FEED, changeVersion, listenForChanges, onChange } from "../src/db/notify";
import { projects } from "../src/db/schema";
import { createKey, findKeyBySecret, setKeyLimits } from "../src/keys/service";
import { syncTicket } from "../src/dataplane/service";
import { classOf } from "../src/dispatch/queue";
import { issueLocalCredential, workerByCredential } from "../src/agents/service";
import { createRemoteWorker } from "../src/workers/remote";
import { recordMachine } from "../src/workers/service";
import type { MachineInfo } from "../agent/protocol";
import { cleanup, waitFor } from "./helpers/proc";
import { stopTestPostgres, testPostgres } from "./helpers/postgres";

/** A host as far as the change feed goes: its store, listening on the change channel. */
interface Host {
  store: Store;
  heard: string[];
  stop(): Promise<void>;
}

async function startHost(url: string): Promise<Host> {
  const store = await openPgStore(url, 4);
  const unlisten = await listenForChanges(store.db, store.pg!);
  const heard: string[] = [];
  const unwatch = onChange(store.db, (t) => heard.push(t));
  return {
    store,
    heard,
    stop: async () => {
      unwatch();
      await unlisten();
      await store.close();
    },
  };
}

const machine = (clusterAddress?: string): MachineInfo => ({
  hostname: "gpu-box",
  cpu_cores: 8,
  ram_bytes: 64 << 30,
  ram_free_bytes: 32 << 30,
  gpus: [],
  load_avg: [0.1, 0.1, 0.1],
  probed_at: new Date().toISOString(),
  ...(clusterAddress ? { cluster_address: clusterAddress } : {}),
});

/** Well under the 30 s a stale memo would otherwise wait for: a change must arrive by notification. */
const PROMPTLY = 5_000;

let url: string;
let a: Host;
let b: Host;
const project = { id: "prj_feed", slug: "feed" };

beforeAll(async () => {
  url = await (await testPostgres()).createDatabase();
  a = await startHost(url);
  b = await startHost(url);
  await a.store.db
    .insert(projects)
    .values({ id: project.id, name: "Feed", slug: project.slug, createdAt: new Date().toISOString() });
});

afterAll(async () => {
  for (const h of [a, b]) await h?.stop().catch(() => {});
  await cleanup();
  await stopTestPostgres();
});

describe("two hosts on one database hear each other's changes", () => {
  test("a key's priority and weight set on host A apply to host B's next request", async () => {
    const key = await createKey(a.store.db, project, { name: "tenant", type: "live" });
    // Host B serves the key: authenticated once, then answered from its memo.
    const before = await findKeyBySecret(b.store.db, key.secret);
    expect([before?.priority, before?.weight]).toEqual([null, null]);
    expect(findKeyBySecret(b.store.db, key.secret)).toBe(before); // held: no store read

    await setKeyLimits(a.store.db, key.id, { priority: "batch", weight: 5 });
    const after = await waitFor(
      async () => {
        const k = await findKeyBySecret(b.store.db, key.secret);
        return (k?.priority === "batch" && k.weight === 5 && k) || undefined;
      },
      { what: "host B reading the key's new priority and weight", timeoutMs: PROMPTLY, intervalMs: 20 },
    );
    // What B's next request of the key waits as: the batch class, with its share.
    const ticket = syncTicket(after);
    expect(classOf(ticket)).toBe("batch");
    expect(ticket.weight).toBe(5);

    await setKeyLimits(a.store.db, key.id, { priority: null, weight: 2 });
    await waitFor(
      async () => {
        const k = await findKeyBySecret(b.store.db, key.secret);
        return (k?.priority === null && k.weight === 2) || undefined;
      },
      { what: "host B reading the key's priority cleared and weight 2", timeoutMs: PROMPTLY, intervalMs: 20 },
    );
  });

  test("a worker's cluster address reported through host A reaches host B (its agent lookup and its re-placement)", async () => {
    const { worker } = await createRemoteWorker(a.store.db, "gpu-box", "0".repeat(64));
    const credential = await issueLocalCredential(a.store.db, worker.id);
    await recordMachine(a.store.db, worker.id, machine());
    expect((await workerByCredential(b.store.db, credential)).clusterAddress).toBeNull();

    const heardBefore = b.heard.filter((t) => t === "workers").length;
    await recordMachine(a.store.db, worker.id, machine("10.1.2.3"));
    await waitFor(
      async () => (await workerByCredential(b.store.db, credential)).clusterAddress === "10.1.2.3" || undefined,
      {
        what: "host B reading the worker's cluster address",
        timeoutMs: PROMPTLY,
        intervalMs: 20,
      },
    );
    // B's change listeners (the leader re-places workloads on them) heard it too.
    expect(b.heard.filter((t) => t === "workers").length).toBeGreaterThan(heardBefore);
  });

  test("a heartbeat that changes no watched column is silent on the other hosts", async () => {
    const { worker } = await createRemoteWorker(a.store.db, "quiet-box", "0".repeat(64));
    await recordMachine(a.store.db, worker.id, machine("10.9.9.9"));
    // Wait for that change to be heard, then note B's count of worker changes.
    const mark = async (name: string) => {
      const seen = changeVersion(b.store.db, "projects");
      await a.store.db.update(projects).set({ name }).where(eq(projects.id, project.id));
      await waitFor(() => changeVersion(b.store.db, "projects") > seen || undefined, {
        what: "host B hearing the project renamed",
        timeoutMs: PROMPTLY,
        intervalMs: 20,
      });
    };
    await mark("Feed 1");
    const workersBefore = changeVersion(b.store.db, "workers");
    for (let i = 0; i < 3; i++) await recordMachine(a.store.db, worker.id, machine("10.9.9.9")); // telemetry changes, the address does not
    await mark("Feed 2"); // notifications arrive in commit order: the heartbeats' would be in by now
    expect(changeVersion(b.store.db, "workers")).toBe(workersBefore);
  });
});

describe("the triggers follow the code", () => {
  const count = async (db: SQL) =>
    (
      (await db`SELECT count(*)::int AS n FROM pg_trigger WHERE tgfoid = 'inferd_notify_change'::regproc`) as {
        n: number;
      }[]
    )[0].n;

  test("every start makes them from the change feed: two per watched table, once, and a dropped one comes back", async () => {
    const db = new SQL(url);
    try {
      expect(await count(db)).toBe(2 * CHANGE_FEED.length);
      const cols =
        (
          (await db`SELECT pg_get_triggerdef(oid) AS def FROM pg_trigger WHERE tgname = 'api_keys_updated'`) as {
            def: string;
          }[]
        )[0]?.def ?? "";
      expect(cols).toContain("priority");
      expect(cols).toContain("weight");
      const restarted = await openPgStore(url, 2);
      await restarted.close();
      expect(await count(db)).toBe(2 * CHANGE_FEED.length);
      await db`DROP TRIGGER api_keys_updated ON api_keys`;
      const again = await openPgStore(url, 2);
      await again.close();
      expect(await count(db)).toBe(2 * CHANGE_FEED.length);
    } finally {
      await db.close();
    }
  });
});
