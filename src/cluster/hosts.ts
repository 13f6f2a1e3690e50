/**
 * The hosts of a cluster as the store records them: who they are, where clients and agents reach
 * them, their certificate (agents pin it) and their heartbeat. The embedded store has one row, this
 * host's, so the same views work in both modes.
 */
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import { asc, eq, lt } from "drizzle-orm";
import type { Db } from "../db";
import { hosts } from "../db/schema";
import { newId, nowIso } from "../ids";

/** A host not heard from for this long is gone: another takes its duties and re-runs its jobs. */
export const HOST_TIMEOUT_MS = 10_000;
/** How often a host records that it is alive. */
export const HOST_HEARTBEAT_MS = 2_000;

type Row = typeof hosts.$inferSelect;

/** A host as `/admin/info` lists it. */
export interface HostView {
  id: string;
  name: string;
  url: string;
  agent_url: string;
  fingerprint: string;
  version: string;
  started_at: string;
  last_seen_at: string;
  alive: boolean;
}

/** This host's id: made once per data dir and kept in `<data-dir>/host-id` (a restart is the same host). */
export function hostIdOf(dataDir: string): string {
  const file = join(dataDir, "host-id");
  if (existsSync(file)) {
    const id = readFileSync(file, "utf8").trim();
    if (/^hst_[a-z0-9]+$/.test(id)) return id;
  }
  const id = newId("hst");
  writeFileSync(file, `${id}\n`, { mode: 0o600 });
  return id;
}

/** The name a host shows as: its machine's name. */
export const hostName = () => hostname();

/** Records this host (again, after a restart) with where it is reached; it counts as seen now. */
export async function upsertHost(db: Db, h: Omit<Row, "startedAt" | "lastSeenAt">): Promise<void> {
  const now = nowIso();
  const set = {
    name: h.name,
    url: h.url,
    agentUrl: h.agentUrl,
    fingerprint: h.fingerprint,
    version: h.version,
    startedAt: now,
    lastSeenAt: now,
  };
  await db
    .insert(hosts)
    .values({ id: h.id, ...set })
    .onConflictDoUpdate({ target: hosts.id, set });
}

/** Notes that a host is alive. */
export async function touchHost(db: Db, id: string): Promise<void> {
  await db.update(hosts).set({ lastSeenAt: nowIso() }).where(eq(hosts.id, id));
}

/** Forgets a host (it stopped cleanly, or has been gone for a day). */
export async function removeHost(db: Db, id: string): Promise<void> {
  await db.delete(hosts).where(eq(hosts.id, id));
}

/** Every host, oldest first, each marked alive or not as of `now`. */
export async function listHosts(db: Db, now = Date.now()): Promise<HostView[]> {
  const rows = await db.select().from(hosts).orderBy(asc(hosts.startedAt));
  return rows.map((r) => ({
    id: r.id,
    name: r.name,
    url: r.url,
    agent_url: r.agentUrl,
    fingerprint: r.fingerprint,
    version: r.version,
    started_at: r.startedAt,
    last_seen_at: r.lastSeenAt,
    alive: now - Date.parse(r.lastSeenAt) < HOST_TIMEOUT_MS,
  }));
}

/** Removes hosts gone for more than a day (their rows only clutter the list). */
export async function pruneHosts(db: Db, now = Date.now()): Promise<void> {
  await db.delete(hosts).where(lt(hosts.lastSeenAt, new Date(now - 86_400_000).toISOString()));
}
