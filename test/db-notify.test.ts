/**
 * Memos on the request path read a host's own writes back at once on PostgreSQL too (as on SQLite):
 * which statements count as changes (`changedTables`, mirroring the store's triggers), and a real
 * PostgreSQL store whose memo forgets on a write made through a query builder, raw SQL or `batch`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq, sql } from "drizzle-orm";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { openPgStore, openStore, sqliteOf, type Store } from "../src/db";
import { memoize, READING_MS } from "../src/db/memo";
import { changedTables, coalesce } from "../src/db/notify";
import { batch, exec, first } from "../src/db/raw";
import { auditLog, projects } from "../src/db/schema";
import { storeEnv } from "./helpers/postgres";
import { tempDir } from "./helpers/proc";

/**
 * Resolves once a reading's time has passed since it was called: another connection's change is read
 * by every lookup at least READING_MS after it committed (requests arriving together share one
 * reading of the change counter; src/db/memo.ts).
 */
async function pastReading(): Promise<void> {
  const from = performance.now();
  while (performance.now() - from <= READING_MS) await new Promise((r) => setImmediate(r));
}

describe("changedTables: the memoised tables a statement changes", () => {
  test.each([
    ['insert into "projects" ("id", "name") values ($1, $2)', ["projects"]],
    [
      'update "api_keys" set "revoked_at" = coalesce("api_keys"."revoked_at", $1) where "api_keys"."id" = $2',
      ["api_keys"],
    ],
    ["DELETE FROM workloads WHERE id = $1", ["workloads"]],
    ["UPDATE workers SET open_to = $1 WHERE id = $2", ["workers"]],
    // Usage counters and heartbeats are no change to what is memoised (the triggers leave them out too).
    [
      'update "api_keys" set "requests" = "api_keys"."requests" + $1, "last_used_at" = $2 where "api_keys"."id" = $3',
      [],
    ],
    ["UPDATE workers SET last_seen_at = $1, telemetry = $2 WHERE id = $3", []],
    // Tables no memo reads, and reads.
    [
      "INSERT INTO usage_daily (day) VALUES ($1) ON CONFLICT (day) DO UPDATE SET requests = usage_daily.requests + 1",
      [],
    ],
    ['select "id" from "projects" where "slug" = $1', []],
    ["SELECT id FROM jobs ORDER BY created_at FOR UPDATE SKIP LOCKED", []],
  ])("%s → %j", (statement, tables) => {
    expect(changedTables(statement)).toEqual(tables);
  });
});

describe("coalesce: signals to the other hosts in rounds", () => {
  test("the first goes at once; those asked for meanwhile go together in one round; many or an empty one mean all", async () => {
    const sent: string[] = [];
    let release!: () => void;
    const send = (p: string) => {
      sent.push(p);
      return new Promise<void>((r) => (release = r));
    };
    const wake = coalesce(send, 3);
    wake("wl_a");
    expect(sent).toEqual(["wl_a"]);
    wake("wl_b");
    wake("wl_c");
    wake("wl_b");
    expect(sent).toHaveLength(1); // still in flight
    release();
    await waitForRound(sent, 2);
    expect(sent[1].split(",").sort()).toEqual(["wl_b", "wl_c"]);
    for (const w of ["1", "2", "3", "4"]) wake(w);
    release();
    await waitForRound(sent, 3);
    expect(sent[2]).toBe(""); // more than 3: all
    wake("x");
    wake("");
    release();
    await waitForRound(sent, 4);
    expect(sent[3]).toBe("");
    release();
  });
});

/** Resolves once `sent` has `n` rounds (the next round starts when the previous send settles). */
async function waitForRound(sent: string[], n: number): Promise<void> {
  for (let i = 0; i < 100 && sent.length < n; i++) await new Promise((r) => setImmediate(r));
  expect(sent).toHaveLength(n);
}

/** A store file holding project p1 ("one"), and a memo of project names over it that counts its loads. */
async function projectMemo() {
  const file = join(tempDir("memo-sqlite"), "inferd.db");
  const store = openStore(file);
  const at = new Date().toISOString();
  await store.db.insert(projects).values({ id: "p1", name: "one", slug: "one", createdAt: at });
  const counted = { loads: 0 };
  const nameOf = memoize(store.db, async (id) => {
    counted.loads++;
    return (await first(store.db.select().from(projects).where(eq(projects.id, id))))?.name ?? null;
  });
  return Object.assign(counted, { file, store, at, nameOf });
}

describe("a memo on the embedded SQLite store", () => {
  test("forgets on writes to the tables it reads (whichever way they are made, and from another connection), not on other writes", async () => {
    const memo = await projectMemo();
    const { file, store, at, nameOf } = memo;
    try {
      expect(await nameOf("p1")).toBe("one");
      // Writes to other tables, and usage counters of keys: what a job intake or a usage flush does.
      await exec(
        store.db,
        sql`INSERT INTO audit_log (at, actor_type, actor_label, action, target_type) VALUES (${at}, 'system', 'test', 'x.y', 'thing')`,
      );
      await store.db
        .insert(auditLog)
        .values({ at, actorType: "system", actorLabel: "test", action: "x.z", targetType: "thing" });
      sqliteOf(store.db).prepare("UPDATE api_keys SET requests = requests + 1").run();
      expect(await nameOf("p1")).toBe("one");
      expect(memo.loads).toBe(1);
      // A change through the query builder, a raw statement, a prepared statement, a batch: read back at once.
      const changes: (() => Promise<unknown> | unknown)[] = [
        () => store.db.update(projects).set({ name: "two" }).where(eq(projects.id, "p1")),
        () => exec(store.db, sql`UPDATE projects SET name = 'three' WHERE id = 'p1'`),
        () => sqliteOf(store.db).prepare("UPDATE projects SET name = 'four' WHERE id = 'p1'").run(),
        () => batch(store.db, [store.db.update(projects).set({ name: "five" }).where(eq(projects.id, "p1"))]),
      ];
      for (const [i, change] of changes.entries()) {
        await change();
        expect(await nameOf("p1")).toBe(["two", "three", "four", "five"][i]);
      }
      // Another connection (the CLI) changes it: the store's change triggers tell.
      const other = new Database(file);
      other.run("UPDATE projects SET name = 'six' WHERE id = 'p1'");
      other.close();
      await pastReading();
      expect(await nameOf("p1")).toBe("six");
    } finally {
      await store.close();
    }
  });

  test("other connections' writes elsewhere leave it alone (the inspector's writer thread, usage counters); a change to what it holds is read back by the next lookup a reading later", async () => {
    const memo = await projectMemo();
    const { file, store, at, nameOf } = memo;
    try {
      expect(await nameOf("p1")).toBe("one");
      const other = new Database(file);
      other.exec("PRAGMA busy_timeout = 5000");
      // What the inspector's writer thread and a usage flush do: other tables, a key's counters, an unchanged value.
      other.run(
        "INSERT INTO audit_log (at, actor_type, actor_label, action, target_type) VALUES (?, 'system', 'test', 'x.y', 'thing')",
        [at],
      );
      other.run("UPDATE api_keys SET requests = requests + 1");
      other.run("UPDATE projects SET name = 'one' WHERE id = 'p1'");
      for (let i = 0; i < 3; i++) expect(await nameOf("p1")).toBe("one");
      expect(memo.loads).toBe(1);
      // A change to a memoised table from that connection (the CLI's): the next lookup reads it.
      other.run("UPDATE projects SET name = 'two' WHERE id = 'p1'");
      await pastReading();
      expect(await nameOf("p1")).toBe("two");
      other.run("DELETE FROM projects WHERE id = 'p1'");
      await pastReading();
      expect(await nameOf("p1")).toBe(null);
      other.close();
    } finally {
      await store.close();
    }
  });
});

describe("a memo on a PostgreSQL store", () => {
  let store: Store;
  const now = new Date().toISOString();
  const nameOf = () =>
    memoize(
      store.db,
      async (id) => (await first(store.db.select().from(projects).where(eq(projects.id, id))))?.name ?? null,
    );
  beforeAll(async () => {
    store = await openPgStore((await storeEnv("postgres")).INFERD_DATABASE_URL);
    await store.db.insert(projects).values({ id: "p1", name: "one", slug: "one", createdAt: now });
  });
  afterAll(() => store.close());

  test("answers from memory while nothing changes", async () => {
    const find = nameOf();
    expect(await find("p1")).toBe("one");
    expect(find("p1")).toBe("one"); // held: no promise
  });

  test("reads this host's own write back on the next lookup, however it was written", async () => {
    const find = nameOf();
    const writes = [
      () => store.db.update(projects).set({ name: "two" }).where(eq(projects.id, "p1")),
      () => exec(store.db, sql`UPDATE projects SET name = 'three' WHERE id = 'p1'`),
      () => batch(store.db, [store.db.update(projects).set({ name: "four" }).where(eq(projects.id, "p1"))]),
    ];
    for (const [i, write] of writes.entries()) {
      expect(await find("p1")).not.toBeNull();
      await write();
      expect(await find("p1")).toBe(["two", "three", "four"][i]);
    }
  });
});
