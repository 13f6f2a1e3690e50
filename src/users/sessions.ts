/**
 * A user's dashboard sessions: list them (which browser, since when, last used) and end one or all.
 * Written with drizzle's query builders only, so it runs the same on SQLite and PostgreSQL; a
 * session's public id (`ses_…`) is matched in code against the user's few rows.
 */
import { and, desc, eq, gt } from "drizzle-orm";
import type { Db } from "../db";
import { sessions } from "../db/schema";
import { notFound } from "../errors";
import { nowIso } from "../ids";
import { audit } from "../audit/service";
import { sessionIdOf } from "./session-rows";
import { liveSession, resolveUser } from "./service";

/** A session as `GET /admin/users/:id/sessions` shows it. */
export interface SessionView {
  id: string;
  method: string | null;
  user_agent: string | null;
  created_at: string;
  last_seen_at: string | null;
  expires_at: string;
  /** Whether it is the session of the request asking. */
  current: boolean;
}

/** The user's live sessions, newest first; `current` marks the one asking (its `ses_` id). */
export async function userSessions(db: Db, userId: string, currentId: string | null): Promise<SessionView[]> {
  const u = await resolveUser(db, userId);
  const rows = await db
    .select()
    .from(sessions)
    .where(and(eq(sessions.userId, u.id), gt(sessions.expiresAt, nowIso())))
    .orderBy(desc(sessions.createdAt));
  const now = Date.now();
  return rows
    .filter((r) => liveSession(r, now))
    .map((r) => ({
      id: sessionIdOf(r.hash),
      method: r.method,
      user_agent: r.userAgent,
      created_at: r.createdAt,
      last_seen_at: r.lastSeenAt,
      expires_at: r.expiresAt,
      current: sessionIdOf(r.hash) === currentId,
    }));
}

/** Ends one session of the user (by its `ses_` id); 404 when the user has no such session. */
export async function endUserSession(db: Db, userId: string, sessionId: string): Promise<void> {
  const u = await resolveUser(db, userId);
  const mine = await db.select({ hash: sessions.hash }).from(sessions).where(eq(sessions.userId, u.id));
  const hit = mine.find((r) => sessionIdOf(r.hash) === sessionId);
  if (!hit) throw notFound(`session "${sessionId}"`);
  await db.delete(sessions).where(eq(sessions.hash, hit.hash));
  await audit(db, "session.end", { type: "session", id: sessionId, label: u.email, projectId: null });
}

/** Ends every session of the user; returns how many there were. */
export async function endUserSessions(db: Db, userId: string): Promise<number> {
  const u = await resolveUser(db, userId);
  const ended = (await db.delete(sessions).where(eq(sessions.userId, u.id)).returning({ hash: sessions.hash })).length;
  await audit(db, "session.end_all", { type: "user", id: u.id, label: u.email, projectId: null }, { ended });
  return ended;
}
