/**
 * The `sessions` table's rows: dashboard sessions and one-time sign-in codes. Sessions are users'
 * (DESIGN), so they are written here only; the gate (../auth/service.ts) opens, checks and ends
 * them through these functions, and ./sessions.ts lists and ends a user's. A session's public id is
 * the start of its secret's hash, so it can be shown without the secret.
 */
import { and, eq, gt, lt } from "drizzle-orm";
import type { Db } from "../db";
import { first } from "../db/raw";
import { sessions } from "../db/schema";

/** A session's life at most. */
export const SESSION_MS = 7 * 24 * 3600 * 1000;
/** A session not used for this long is over (the dashboard's idle timeout). */
export const SESSION_IDLE_MS = 12 * 3600 * 1000;

/** One row of `sessions`. */
export type SessionRow = typeof sessions.$inferSelect;

/** The public id of a session (never its secret): `ses_` and the start of its hash. */
export const sessionIdOf = (hash: string) => `ses_${hash.slice(0, 12)}`;

/** The row of the session or sign-in code whose secret hashes to `hash`, unless it expired by `now` (ms). */
export function liveSessionRow(db: Db, hash: string, now: number): Promise<SessionRow | undefined> {
  return first(
    db
      .select()
      .from(sessions)
      .where(and(eq(sessions.hash, hash), gt(sessions.expiresAt, new Date(now).toISOString()))),
  );
}

/** Adds a session (or a sign-in code); with `sweep`, the expired rows go first. */
export async function addSessionRow(db: Db, row: typeof sessions.$inferInsert, sweep = false): Promise<void> {
  if (sweep) await db.delete(sessions).where(lt(sessions.expiresAt, new Date().toISOString()));
  await db.insert(sessions).values(row);
}

/** Notes that a session was used at `at` (ISO). */
export async function touchSession(db: Db, hash: string, at: string): Promise<void> {
  await db.update(sessions).set({ lastSeenAt: at }).where(eq(sessions.hash, hash));
}

/** Removes the session (or sign-in code) whose secret hashes to `hash`; its user's id, null for the admin token's, undefined when there was none. */
export async function removeSession(db: Db, hash: string): Promise<string | null | undefined> {
  const [ended] = await db.delete(sessions).where(eq(sessions.hash, hash)).returning({ userId: sessions.userId });
  return ended ? ended.userId : undefined;
}

/** Removes every session and sign-in code (sign out everywhere); returns how many there were. */
export async function removeAllSessions(db: Db): Promise<number> {
  return (await db.delete(sessions).returning({ hash: sessions.hash })).length;
}
