/**
 * Memos on the request path read a host's own writes back at once on PostgreSQL too (as on SQLite):
 * which statements count as changes (`changedTables`, mirroring the store's triggers), and a real
 * PostgreSQL store whose memo forgets on a write made through a query builder, raw SQL or `batch`.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq, sql } from "drizzle-orm";
import { openPgStore, type Store } from "../src/db";
import { memoize } from "../src/db/memo";
import { changedTables } from "../src/db/notify";
import { batch, exec, first } from "../src/db/raw";
import { projects } from "../src/db/schema";
import { storeEnv } from "./helpers/postgres";

describe("changedTables: the memoised tables a statement changes", () => {
  test.each([
    ['insert into "projects" ("id", "name") values ($1, $2)', ["projects"]],
    ['update "api_keys" set "revoked_at" = coalesce("api_keys"."revoked_at", $1) where "api_keys"."id" = $2', ["api_keys"]],
    ["DELETE FROM workloads WHERE id = $1", ["workloads"]],
    ["UPDATE workers SET open_to = $1 WHERE id = $2", ["workers"]],
    // Usage counters and heartbeats are no change to what is memoised (the triggers leave them out too).
    ['update "api_keys" set "requests" = "api_keys"."requests" + $1, "last_used_at" = $2 where "api_keys"."id" = $3', []],
    ["UPDATE workers SET last_seen_at = $1, telemetry = $2 WHERE id = $3", []],
    // Tables no memo reads, and reads.
    ["INSERT INTO usage_daily (day) VALUES ($1) ON CONFLICT (day) DO UPDATE SET requests = usage_daily.requests + 1", []],
    ['select "id" from "projects" where "slug" = $1', []],
    ["SELECT id FROM jobs ORDER BY created_at FOR UPDATE SKIP LOCKED", []],
  ])("%s → %j", (statement, tables) => {
    expect(changedTables(statement)).toEqual(tables);
  });
});

describe("a memo on a PostgreSQL store", () => {
  let store: Store;
  const now = new Date().toISOString();
  const nameOf = () => memoize(store.db, async (id) => (await first(store.db.select().from(projects).where(eq(projects.id, id))))?.name ?? null);
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
