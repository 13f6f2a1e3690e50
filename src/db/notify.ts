/**
 * Changes made by any host of a cluster, heard by every host: the PostgreSQL store's triggers send
 * `NOTIFY inferd_changes, '<table>'` when a row the request path memoises changes (projects, keys'
 * settings, workloads, workers), and each host LISTENs. Each notification bumps a version that
 * the memos (./memo.ts) and other in-memory views compare against; listeners may also react.
 * The embedded SQLite store needs none of this (one process writes; see ./memo.ts for its stamp).
 */
import type { SQL } from "bun";
import type { Db } from "./index";
import { log } from "../log";

/** The channel the store's triggers notify on. */
export const CHANGES_CHANNEL = "inferd_changes";

interface Feed {
  version: number;
  listeners: Set<(table: string) => void>;
}

const feeds = new WeakMap<Db, Feed>();

function feedOf(db: Db): Feed {
  let f = feeds.get(db);
  if (!f) feeds.set(db, (f = { version: 0, listeners: new Set() }));
  return f;
}

/** How many changes this host has heard of (0 on SQLite): a memo compares it to know when to reload. */
export function changeVersion(db: Db): number {
  return feedOf(db).version;
}

/** Calls `fn` with the table's name on every change heard; returns an unsubscribe. */
export function onChange(db: Db, fn: (table: string) => void): () => void {
  const f = feedOf(db);
  f.listeners.add(fn);
  return () => f.listeners.delete(fn);
}

/** Records a change (heard from the database, or made here and known at once). */
export function noteChange(db: Db, table: string): void {
  const f = feedOf(db);
  f.version++;
  for (const l of f.listeners) {
    try {
      l(table);
    } catch (e) {
      log.warn("a change listener failed", e);
    }
  }
}

/**
 * LISTENs on the PostgreSQL store's change channel for the life of the process; returns a stop.
 * A lost connection is re-established by Bun's SQL client; every (re)subscription counts as a change
 * of everything (`*`), since notifications sent while it was down are lost.
 */
export async function listenForChanges(db: Db, pg: SQL): Promise<() => Promise<void>> {
  const sub = await pg.listen(CHANGES_CHANNEL, (payload) => noteChange(db, payload), () => noteChange(db, "*"));
  return () => sub.unlisten();
}

/** Channels hosts signal each other on (besides the change triggers' channel). */
export const SIGNALS = { jobs: "inferd_jobs", deliveries: "inferd_deliveries" } as const;

/**
 * Tells every host of the cluster something happened (`payload`, e.g. the workload that got a job).
 * A no-op on the embedded store, whose one host calls its parts directly.
 */
export async function signal(db: Db, pg: SQL | undefined, channel: string, payload = ""): Promise<void> {
  if (db.engine !== "postgres" || !pg) return;
  await pg.notify(channel, payload).catch((e) => log.debug(`could not signal ${channel}: ${(e as Error).message}`));
}

/** Calls `fn` with each payload signalled on `channel` by any host (this one included); returns a stop. */
export async function onSignal(pg: SQL, channel: string, fn: (payload: string) => void): Promise<() => Promise<void>> {
  const sub = await pg.listen(channel, fn);
  return () => sub.unlisten();
}
