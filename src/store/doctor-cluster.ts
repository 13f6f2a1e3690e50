/**
 * The cluster's lines of `inferd doctor` in PostgreSQL mode: what the hosts sharing the database
 * say about each other (who leads, which hosts beat recently, versions that differ). They are
 * added here, one `Check` each, when cluster mode has them; `runDoctor` already calls this after
 * the connection, version and migrations checks pass, with the database open and migrated.
 */
import type { Store } from "../db";
import type { Check } from "./report";

/**
 * Checks of the cluster that shares this PostgreSQL store (leader, hosts and their heartbeats).
 * None yet: returns an empty list. Reads only; `store` is a PostgreSQL store, its migrations applied.
 */
export async function clusterChecks(_store: Store): Promise<Check[]> {
  return [];
}
