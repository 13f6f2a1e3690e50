/**
 * People who sign in to the dashboard and /admin: local users (a password, hashed with argon2id) and
 * single sign-on users (an issuer and subject), each with a role and the projects they belong to.
 * Every change is audited (never the password). Plain functions over the store; routes and the CLI
 * call them.
 */
import { and, asc, eq, gt, inArray, isNotNull, or } from "drizzle-orm";
import type { Db } from "../db";
import { batch, first } from "../db/raw";
import { projectMembers, projects, sessions, users } from "../db/schema";
import { conflict, notFound, validation } from "../errors";
import { newId, newSecret, nowIso } from "../ids";
import { audit, diffOf, fieldsOf, type Actor } from "../audit/service";
import { SESSION_IDLE_MS, sessionIdOf } from "./session-rows";
import type { Role, UserCreate, UserPatch } from "./schema";

/** A user as stored. */
export type UserRecord = typeof users.$inferSelect;

/** A user as the API shows it. */
export interface UserView {
  id: string;
  email: string;
  name: string;
  role: Role;
  /** Slugs of the projects they belong to. */
  projects: string[];
  source: "local" | "oidc";
  created_at: string;
  updated_at: string;
  last_sign_in_at: string | null;
  /** How many dashboard sessions of theirs are live. */
  sessions: number;
}

/** Whether a session row is live now: not expired and used within the idle limit. */
export const liveSession = (s: { expiresAt: string; lastSeenAt: string | null; createdAt: string }, now = Date.now()) =>
  Date.parse(s.expiresAt) > now && now - Date.parse(s.lastSeenAt ?? s.createdAt) <= SESSION_IDLE_MS;

/** The views of some users (all when `ids` is not given), with their projects and live sessions. */
async function views(db: Db, ids?: string[]): Promise<UserView[]> {
  const rows = await db
    .select()
    .from(users)
    .where(ids ? inArray(users.id, ids) : undefined)
    .orderBy(asc(users.email));
  if (!rows.length) return [];
  const only = ids ? inArray(projectMembers.userId, ids) : undefined;
  const members = await db
    .select({ userId: projectMembers.userId, slug: projects.slug })
    .from(projectMembers)
    .innerJoin(projects, eq(projects.id, projectMembers.projectId))
    .where(only)
    .orderBy(asc(projects.slug));
  const live = await db
    .select({
      userId: sessions.userId,
      expiresAt: sessions.expiresAt,
      lastSeenAt: sessions.lastSeenAt,
      createdAt: sessions.createdAt,
    })
    .from(sessions)
    .where(and(ids ? inArray(sessions.userId, ids) : isNotNull(sessions.userId), gt(sessions.expiresAt, nowIso())));
  const now = Date.now();
  return rows.map((u) => ({
    id: u.id,
    email: u.email,
    name: u.name,
    role: u.role,
    projects: members.filter((m) => m.userId === u.id).map((m) => m.slug),
    source: u.oidcIssuer ? "oidc" : "local",
    created_at: u.createdAt,
    updated_at: u.updatedAt,
    last_sign_in_at: u.lastSignInAt,
    sessions: live.filter((s) => s.userId === u.id && liveSession(s, now)).length,
  }));
}

/** Every user, by e-mail. */
export const listUsers = (db: Db): Promise<UserView[]> => views(db);

/** One user's view, or 404. */
export async function getUser(db: Db, id: string): Promise<UserView> {
  const [v] = await views(db, [id]);
  if (!v) throw notFound(`user "${id}"`);
  return v;
}

/** A user by e-mail (any case), or undefined. */
export async function findUserByEmail(db: Db, email: string): Promise<UserRecord | undefined> {
  return first(db.select().from(users).where(eq(users.email, email.trim().toLowerCase())));
}

/** A user by id or e-mail, or 404 (the CLI names users by e-mail). */
export async function resolveUser(db: Db, idOrEmail: string): Promise<UserRecord> {
  const u = await first(
    db
      .select()
      .from(users)
      .where(or(eq(users.id, idOrEmail), eq(users.email, idOrEmail.trim().toLowerCase()))),
  );
  if (!u) throw notFound(`user "${idOrEmail}"`);
  return u;
}

/** Project ids of slugs (or ids); 400 at `projects` naming the first unknown one. */
async function projectIdsOf(db: Db, refs: string[]): Promise<string[]> {
  if (!refs.length) return [];
  const found = await db
    .select({ id: projects.id, slug: projects.slug })
    .from(projects)
    .where(or(inArray(projects.slug, refs), inArray(projects.id, refs)));
  const ids = refs.map((r) => found.find((p) => p.slug === r || p.id === r)?.id);
  const unknown = refs.find((_, i) => !ids[i]);
  if (unknown !== undefined) throw validation("projects", `there is no project "${unknown}"`);
  return [...new Set(ids as string[])];
}

/** Hashes a password with argon2id (Bun's built-in). */
export const hashPassword = (password: string) => Bun.password.hash(password, { algorithm: "argon2id" });

/** A password for a user made without one (shown once by the CLI). */
export const generatePassword = () => newSecret("").slice(0, 20);

/** The audited fields of a user. */
const AUDITED = ["email", "name", "role", "projects", "source", "password"];

/**
 * Records a single sign-on sign-in of user `id` at `now`; with `link`, also the provider identity it
 * is known by from now on and its role (the provider's claim, or the role it had), and `updatedAt`
 * when `link.changed` (a new link or role).
 */
export async function recordSsoSignIn(
  db: Db,
  id: string,
  now: string,
  link?: { issuer: string; subject: string; role: Role; changed: boolean },
): Promise<void> {
  const linked = link
    ? {
        oidcIssuer: link.issuer,
        oidcSubject: link.subject,
        role: link.role,
        ...(link.changed ? { updatedAt: now } : {}),
      }
    : {};
  await db
    .update(users)
    .set({ ...linked, lastSignInAt: now })
    .where(eq(users.id, id));
}

/**
 * Creates a user; 409 `email_taken` when the e-mail has a user, 400 at `projects` for an unknown
 * project. `actor` may be given the new id (a user made by signing in is the one acting).
 */
export async function createUser(
  db: Db,
  input: UserCreate,
  oidc?: { issuer: string; subject: string },
  actor?: Actor | ((id: string) => Actor),
): Promise<UserView> {
  const email = input.email.trim().toLowerCase();
  if (await findUserByEmail(db, email))
    throw conflict(`a user with the e-mail "${email}" exists`, "email_taken", "email");
  const projectIds = await projectIdsOf(db, input.projects ?? []);
  const now = nowIso();
  const id = newId("usr");
  const passwordHash = input.password ? await hashPassword(input.password) : null;
  await batch(db, [
    db.insert(users).values({
      id,
      email,
      name: input.name ?? "",
      role: input.role,
      passwordHash,
      oidcIssuer: oidc?.issuer ?? null,
      oidcSubject: oidc?.subject ?? null,
      createdAt: now,
      updatedAt: now,
    }),
    ...projectIds.map((projectId) => db.insert(projectMembers).values({ userId: id, projectId, createdAt: now })),
  ]);
  const shown = {
    email,
    name: input.name ?? "",
    role: input.role,
    projects: input.projects ?? [],
    source: oidc ? "oidc" : "local",
  };
  await audit(
    db,
    "user.create",
    { type: "user", id, label: email, projectId: null },
    fieldsOf(shown, AUDITED.slice(0, 5)),
    typeof actor === "function" ? actor(id) : actor,
  );
  return getUser(db, id);
}

/**
 * Changes a user's name, role, password or projects; audited as a diff (a new password shows only as
 * changed). A new password ends the user's other sessions (all but `keepSession`, the public id of
 * the session making the change, when it is theirs).
 */
export async function updateUser(
  db: Db,
  id: string,
  patch: UserPatch,
  keepSession: string | null = null,
): Promise<UserView> {
  const current = await resolveUser(db, id);
  const before = await getUser(db, current.id);
  const projectIds = patch.projects ? await projectIdsOf(db, patch.projects) : undefined;
  const passwordHash = patch.password ? await hashPassword(patch.password) : undefined;
  const now = nowIso();
  await batch(db, [
    db
      .update(users)
      .set({
        name: patch.name ?? current.name,
        role: patch.role ?? current.role,
        passwordHash: passwordHash ?? current.passwordHash,
        updatedAt: now,
      })
      .where(eq(users.id, current.id)),
    ...(projectIds
      ? [
          db.delete(projectMembers).where(eq(projectMembers.userId, current.id)),
          ...projectIds.map((projectId) =>
            db.insert(projectMembers).values({ userId: current.id, projectId, createdAt: now }),
          ),
        ]
      : []),
  ]);
  if (passwordHash) {
    const held = await db.select({ hash: sessions.hash }).from(sessions).where(eq(sessions.userId, current.id));
    const ended = held.map((h) => h.hash).filter((h) => sessionIdOf(h) !== keepSession);
    if (ended.length) await db.delete(sessions).where(inArray(sessions.hash, ended));
  }
  const after = await getUser(db, current.id);
  const diff = diffOf(
    { ...before, password: current.passwordHash },
    { ...after, password: passwordHash ?? current.passwordHash },
    AUDITED,
  );
  if (Object.keys(diff).length)
    await audit(db, "user.update", { type: "user", id: current.id, label: current.email, projectId: null }, diff);
  return after;
}

/** Removes a user; their sessions end at once. */
export async function deleteUser(db: Db, id: string): Promise<void> {
  const u = await resolveUser(db, id);
  await batch(db, [
    db.delete(sessions).where(eq(sessions.userId, u.id)),
    db.delete(projectMembers).where(eq(projectMembers.userId, u.id)),
    db.delete(users).where(eq(users.id, u.id)),
  ]);
  await audit(
    db,
    "user.delete",
    { type: "user", id: u.id, label: u.email, projectId: null },
    { email: u.email, role: u.role },
  );
}

/** A hash to verify against when the e-mail is unknown, so a wrong e-mail takes as long as a wrong password. */
let decoy: Promise<string> | undefined;

/** The local user with this e-mail and password (noting the sign-in), or undefined for a wrong e-mail or password alike. */
export async function checkPassword(db: Db, email: string, password: string): Promise<UserRecord | undefined> {
  const u = await findUserByEmail(db, email);
  if (!u?.passwordHash) {
    await Bun.password.verify(password, await (decoy ??= hashPassword(newSecret(""))));
    return undefined;
  }
  if (!(await Bun.password.verify(password, u.passwordHash))) return undefined;
  const lastSignInAt = nowIso();
  await db.update(users).set({ lastSignInAt }).where(eq(users.id, u.id));
  return { ...u, lastSignInAt };
}
