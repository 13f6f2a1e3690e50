// The embedded store's memos (src/db/memo.ts) against writes from other connections: the store's
// change triggers (src/db/notify.ts sqliteChangeStatements) tell them apart, so the inspector's
// worker thread, another process's job rows or usage counters never empty a memo, while a change to
// what it holds, from any connection, is read back at once.
import { Database } from "bun:sqlite";
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { eq } from "drizzle-orm";
import { openStore } from "../src/db";
import { memoize } from "../src/db/memo";
import { first } from "../src/db/raw";
import { projects } from "../src/db/schema";

describe("a memo on the embedded SQLite store, against other connections", () => {
  test("writes elsewhere leave it alone; a change to what it holds is read back at once", async () => {
    const dir = mkdtempSync(join(tmpdir(), "inferd-memo-"));
    const file = join(dir, "inferd.db");
    const store = openStore(file);
    try {
      const at = new Date().toISOString();
      await store.db.insert(projects).values({ id: "p1", name: "one", slug: "one", createdAt: at });
      let loads = 0;
      const nameOf = memoize(
        store.db,
        async (id) => (
          loads++, (await first(store.db.select().from(projects).where(eq(projects.id, id))))?.name ?? null
        ),
      );
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
      expect(loads).toBe(1);
      // A change to a memoised table from that connection (the CLI's): the next lookup reads it.
      other.run("UPDATE projects SET name = 'two' WHERE id = 'p1'");
      expect(await nameOf("p1")).toBe("two");
      other.run("DELETE FROM projects WHERE id = 'p1'");
      expect(await nameOf("p1")).toBe(null);
      other.close();
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
