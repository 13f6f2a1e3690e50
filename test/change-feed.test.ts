/**
 * Issue 33, "one change feed": the tables and columns other hosts must hear about are declared once
 * (src/db/notify.ts's `CHANGE_FEED`); the PostgreSQL triggers and a host's reading of its own writes
 * (`changedTables`) are both derived from it, every schema column watched unless declared quiet,
 * and the feed counts changes per table.
 */
import { describe, expect, test } from "bun:test";
import { getTableColumns, getTableName } from "drizzle-orm";
import { bigint, pgTable, text } from "drizzle-orm/pg-core";
import * as pgSchema from "../src/db/schema-pg";
import {
  CHANGE_FEED,
  changeCounter,
  changedTables,
  changeTriggerStatements,
  changeVersion,
  feedTable,
  localChanges,
  noteChange,
  type StoreRef,
} from "../src/db/notify";

/** The columns a generated update trigger fires on (its `UPDATE OF` list), by table. */
function updateColumns(statements: string[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const s of statements) {
    const m =
      /^CREATE TRIGGER \w+ AFTER UPDATE OF (.+?) ON "(\w+)" FOR EACH ROW WHEN \(ROW\((.+?)\) IS DISTINCT FROM ROW\((.+?)\)\)/.exec(
        s,
      );
    if (!m) continue;
    const cols = m[1].split(", ").map((c) => c.replaceAll('"', ""));
    // The row compared is the same column list, old against new.
    expect(m[3]).toBe(
      m[1]
        .split(", ")
        .map((c) => `OLD.${c}`)
        .join(", "),
    );
    expect(m[4]).toBe(
      m[1]
        .split(", ")
        .map((c) => `NEW.${c}`)
        .join(", "),
    );
    out.set(m[2], cols);
  }
  return out;
}

const QUIET: Record<string, string[]> = {
  api_keys: ["requests", "input_tokens", "output_tokens", "last_used_at"],
  workers: [
    "hostname",
    "version",
    "cpu_cores",
    "ram_bytes",
    "gpus",
    "telemetry",
    "last_seen_at",
    "created_at",
    "host_id",
  ],
};

describe("the change triggers are generated from the one declaration", () => {
  const statements = changeTriggerStatements();
  const updates = updateColumns(statements);
  const tables = [
    pgSchema.projects,
    pgSchema.apiKeys,
    pgSchema.workloads,
    pgSchema.workers,
    pgSchema.assignments,
    pgSchema.adapters,
  ];

  test("the feed watches projects, api_keys, workloads, workers, assignments and adapters", () => {
    expect(CHANGE_FEED.map((t) => t.table).sort()).toEqual(tables.map((t) => getTableName(t)).sort());
  });

  test.each(tables.map((t) => [getTableName(t), t] as const))(
    "%s: every schema column but the quiet ones fires the update trigger; inserts and deletes fire too",
    (name, table) => {
      const all = Object.values(getTableColumns(table)).map((c) => c.name);
      const quiet = QUIET[name] ?? [];
      expect(updates.get(name)?.sort()).toEqual(all.filter((c) => !quiet.includes(c)).sort());
      expect(statements).toContain(
        `CREATE TRIGGER ${name}_changed AFTER INSERT OR DELETE ON "${name}" FOR EACH STATEMENT EXECUTE FUNCTION inferd_notify_change()`,
      );
      // Idempotent: every trigger is dropped before it is made again.
      expect(statements).toContain(`DROP TRIGGER IF EXISTS ${name}_changed ON "${name}"`);
      expect(statements).toContain(`DROP TRIGGER IF EXISTS ${name}_updated ON "${name}"`);
    },
  );

  test("a key's priority and weight and a worker's cluster address are watched (issue 33's forgotten columns)", () => {
    expect(updates.get("api_keys")).toEqual(expect.arrayContaining(["priority", "weight", "rpm", "revoked_at"]));
    expect(updates.get("workers")).toEqual(expect.arrayContaining(["cluster_address", "open_to", "credential_hash"]));
    expect(updates.get("api_keys")).not.toContain("requests");
    expect(updates.get("workers")).not.toContain("last_seen_at");
  });

  test("a column added to a watched table's schema is watched without naming it anywhere", () => {
    const grown = pgTable("api_keys", {
      id: text("id").primaryKey(),
      requests: bigint("requests", { mode: "number" }).notNull().default(0),
      brandNew: text("brand_new"),
    });
    const feed = [feedTable(grown, ["requests"])];
    expect(updateColumns(changeTriggerStatements(feed)).get("api_keys")).toEqual(["id", "brand_new"]);
    expect(feed[0].quiet).toEqual(new Set(["requests"]));
  });

  test("the function notifies on the channel hosts listen to", () => {
    expect(statements[0]).toContain("CREATE OR REPLACE FUNCTION inferd_notify_change()");
    expect(statements[0]).toContain("pg_notify('inferd_changes', TG_TABLE_NAME)");
  });
});

describe("a host's own writes are read with the same declaration", () => {
  test.each([
    ['update "api_keys" set "priority" = $1 where "api_keys"."id" = $2', ["api_keys"]],
    ['update "api_keys" set "weight" = $1 where "api_keys"."id" = $2', ["api_keys"]],
    // A heartbeat carrying the address: a change of workers (the trigger then fires only when the address changed).
    ['update "workers" set "last_seen_at" = $1, "cluster_address" = $2 where "workers"."id" = $3', ["workers"]],
    ['update "workers" set "last_seen_at" = $1, "telemetry" = $2, "host_id" = $3 where "workers"."id" = $4', []],
    [
      'update "api_keys" set "requests" = "api_keys"."requests" + $1, "input_tokens" = $2 where "api_keys"."id" = $3',
      [],
    ],
  ])("%s → %j", (statement, tables) => {
    expect(changedTables(statement)).toEqual(tables);
  });
});

describe("the feed counts changes per table", () => {
  test("a change of one table moves that table's version (and the total), not the others'; `*` moves every table's", () => {
    const db: StoreRef = { engine: "postgres" };
    const keys = changeCounter(db, ["api_keys", "projects"]);
    const agents = changeCounter(db, ["workers"]);
    noteChange(db, "workers");
    expect([changeVersion(db), changeVersion(db, "workers"), changeVersion(db, "api_keys")]).toEqual([1, 1, 0]);
    expect([keys.heard(), agents.heard()]).toEqual([0, 1]);
    noteChange(db, "projects", true);
    expect([keys.heard(), keys.own(), agents.heard(), agents.own()]).toEqual([1, 1, 1, 0]);
    expect([localChanges(db), localChanges(db, "projects"), localChanges(db, "workers")]).toEqual([1, 1, 0]);
    noteChange(db, "*");
    expect([keys.heard(), agents.heard(), changeVersion(db, "assignments"), changeVersion(db)]).toEqual([3, 2, 1, 3]);
  });
});
