import type { Db } from "../db";
import { andThen, type Maybe } from "../db/memo";
import { callOf } from "../call";
import {
  addSessionRow,
  liveSessionRow,
  removeAllSessions,
  removeSession,
  SESSION_IDLE_MS,
  SESSION_MS,
  sessionIdOf,
  touchSession,
} from "../users/session-rows";
import { AppError, forbidden, notFound, unauthorized } from "../errors";
import { CLIENT_SECTIONS, wantsDashboardPage } from "../ui/routes";
import { newSecret, safeEqual, sha256 } from "../ids";
import { findKeyByHash, findKeyBySecret, KEY_PREFIX, type KeyRecord } from "../keys/service";
import type { UsageRecorder } from "../usage/recorder";
import type { Actor } from "../audit/service";
import { audit } from "../audit/service";
import { adminTokenPrincipal, authorize, userPrincipal, type Principal } from "../users/access";

/** What authentication needs: the store, the admin token and the usage counter. */
export interface AuthDeps {
  db: Db;
  adminToken: string;
  usage: UsageRecorder;
  /** A token that may read /metrics only (for a Prometheus scraper), when set. */
  metricsToken?: string;
}

/** Name of the dashboard's session cookie. */
export const SESSION_COOKIE = "inferd_session";
/** How often a session's last use is written (not on every request). */
const TOUCH_MS = 60_000;

/** The bearer token of a request, or the `x-api-key` header where the Anthropic SDK puts it. */
export function presentedToken(request: Request, allowApiKeyHeader = false): string | undefined {
  const h = request.headers.get("authorization");
  if (h) {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(h);
    if (m) return m[1];
  }
  if (allowApiKeyHeader) return request.headers.get("x-api-key")?.trim() || undefined;
  return undefined;
}

const adminHashes = new WeakMap<AuthDeps, string>();

/** The SHA-256 of the admin token in force (computed once). */
function adminHash(deps: AuthDeps): string {
  let h = adminHashes.get(deps);
  if (!h) adminHashes.set(deps, (h = sha256(deps.adminToken)));
  return h;
}

/** Whether `token` is the admin token (compared as hashes, in constant time); `hash`: its SHA-256 when already made. */
function isAdminToken(deps: AuthDeps, token: string, hash = sha256(token)): boolean {
  return safeEqual(hash, adminHash(deps));
}

/**
 * Resolves a token to a key, or throws 401. The admin token is reported so planes can say 403.
 * From memory while the store is unchanged (the value at once), else once the store is read.
 */
function resolveKey(deps: AuthDeps, token: string | undefined, plane: string): Maybe<KeyRecord | "admin"> {
  if (!token) throw unauthorized("missing_token", `this ${plane} route needs "Authorization: Bearer <token>"`);
  const hash = sha256(token);
  if (isAdminToken(deps, token, hash)) return "admin";
  return andThen(token.startsWith("ik_") ? findKeyByHash(deps.db, hash) : undefined, (key) => {
    if (!key) throw unauthorized("invalid_token", "the token is unknown or has been revoked");
    deps.usage.record(key.id, { requests: 1 });
    return key;
  });
}

/**
 * Control plane (`/api`): only an `ik_sdk_` key, of the project in the path when there is one.
 * An `endpoints`-scoped key may only touch its listed workloads (see `canTouchWorkload`).
 */
export function authControl(deps: AuthDeps, request: Request, projectSlug?: string): Maybe<KeyRecord> {
  return andThen(resolveKey(deps, presentedToken(request), "control-plane"), (key) => {
    if (key === "admin" || key.type !== "sdk") {
      throw forbidden(
        "wrong_credential_type",
        `the control plane (/api) takes an ${KEY_PREFIX.sdk} key; this is ${key === "admin" ? "the admin token" : `an ${KEY_PREFIX.live} data-plane key`}`,
      );
    }
    if (projectSlug !== undefined && projectSlug !== key.projectSlug) {
      throw forbidden(
        "project_scope_mismatch",
        `this key belongs to project "${key.projectSlug}", not "${projectSlug}"`,
      );
    }
    return key;
  });
}

/** True when the key's scope covers the workload `<project_slug>/<workload_slug>`. */
export function canTouchWorkload(key: KeyRecord, projectSlug: string, workloadSlug: string): boolean {
  if (key.scope === "project") return key.projectSlug === projectSlug;
  return (JSON.parse(key.endpoints) as string[]).includes(`${projectSlug}/${workloadSlug}`);
}

/** Throws scope_insufficient unless the key covers the workload. */
export function requireWorkloadScope(key: KeyRecord, projectSlug: string, workloadSlug: string): void {
  if (!canTouchWorkload(key, projectSlug, workloadSlug)) {
    throw forbidden(
      "scope_insufficient",
      `this key is limited to specific endpoints and "${projectSlug}/${workloadSlug}" is not one of them`,
    );
  }
}

/**
 * Data plane (`/endpoint/<project>/<workload>/...`): only an `ik_live_` key of that project whose
 * scope covers the workload (on the project's base, `workloadSlug` null, routing checks the scope
 * of the workload a request's model reaches). The Messages-style routes also accept `x-api-key`.
 */
export function authData(
  deps: AuthDeps,
  request: Request,
  projectSlug: string,
  workloadSlug: string | null,
  allowApiKeyHeader = false,
): Maybe<KeyRecord> {
  return andThen(resolveKey(deps, presentedToken(request, allowApiKeyHeader), "data-plane"), (key) => {
    if (key === "admin" || key.type !== "live") {
      throw forbidden(
        "wrong_credential_type",
        `the data plane (/endpoint) takes an ${KEY_PREFIX.live} key; this is ${key === "admin" ? "the admin token" : `an ${KEY_PREFIX.sdk} control-plane key`}`,
      );
    }
    if (key.projectSlug !== projectSlug) {
      throw forbidden(
        "project_scope_mismatch",
        `this key belongs to project "${key.projectSlug}", not "${projectSlug}"`,
      );
    }
    if (workloadSlug !== null) requireWorkloadScope(key, projectSlug, workloadSlug);
    return key;
  });
}

/** The host of an Origin header, or null when it is not a URL (a malformed Origin is refused, not a 500). */
function originHost(origin: string): string | null {
  try {
    return new URL(origin).host;
  } catch {
    return null;
  }
}

/**
 * Accepts a dashboard session that exists, has not expired and was used within SESSION_IDLE_MS, and
 * says whose it is: a user's (read from the store now, so a removed user's session is gone and a
 * demoted user's role applies at once) or the admin token's (ended when the token has changed).
 * Notes its use.
 */
async function checkSession(deps: AuthDeps, sid: string): Promise<Principal> {
  const now = Date.now();
  const hash = sha256(sid);
  const row = await liveSessionRow(deps.db, hash, now);
  if (!row) throw unauthorized("invalid_session", "the session has expired; sign in again");
  const end = async (why: string) => {
    await removeSession(deps.db, hash);
    return unauthorized("invalid_session", why);
  };
  const principal = row.userId
    ? await userPrincipal(deps.db, row.userId, sessionIdOf(hash))
    : adminTokenPrincipal(sessionIdOf(hash));
  if (!principal) throw await end("your account has been removed; ask an admin");
  if (!row.userId && row.tokenHash !== adminHash(deps))
    throw await end("the admin token has changed since this session began; sign in again");
  const seen = Date.parse(row.lastSeenAt ?? row.createdAt);
  if (now - seen > SESSION_IDLE_MS) throw await end("the session ended after a time without use; sign in again");
  if (now - seen > TOUCH_MS) await touchSession(deps.db, hash, new Date(now).toISOString());
  return principal;
}

/** Ends every dashboard session and unused sign-in link (sign out everywhere); returns how many there were. */
export async function endAllSessions(deps: AuthDeps): Promise<number> {
  const ended = await removeAllSessions(deps.db);
  await audit(deps.db, "session.end_all", { type: "session" }, { ended });
  return ended;
}

/** The Set-Cookie value of a session (`Secure` when the request came over HTTPS). */
export function sessionCookie(value: string, maxAgeSeconds: number, secure: boolean): string {
  return `${SESSION_COOKIE}=${value}; Path=/; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}${secure ? "; Secure" : ""}`;
}

/** A cookie's decoded value; a malformed percent-escape in it is a 401 `invalid_session`, not a 500. */
function cookieValue(request: Request, name: string): string | undefined {
  const header = request.headers.get("cookie");
  if (!header) return undefined;
  for (const part of header.split(";")) {
    const i = part.indexOf("=");
    if (i <= 0 || part.slice(0, i).trim() !== name) continue;
    try {
      return decodeURIComponent(part.slice(i + 1).trim());
    } catch {
      throw unauthorized("invalid_session", "the session cookie is not valid");
    }
  }
  return undefined;
}

/**
 * Admin API (`/admin`): the admin token as Bearer, or the dashboard's session cookie (the admin
 * token's or a user's). A request riding on the cookie that changes state must come from our own
 * origin (CSRF guard on top of SameSite=Strict). Then the access table (src/users/access.ts) decides
 * what the principal may do on `path` (the normalised path; the request's own by default).
 */
export async function authAdmin(
  deps: AuthDeps,
  request: Request,
  path = normalisePath(new URL(request.url).pathname),
): Promise<{ via: "token" | "session" }> {
  const token = presentedToken(request);
  if (token) {
    if (isAdminToken(deps, token)) {
      const call = callOf(request);
      call.actor = { type: "admin", label: "admin token" };
      call.principal = adminTokenPrincipal(null);
      return { via: "token" };
    }
    if (token.startsWith(KEY_PREFIX.sdk) || token.startsWith(KEY_PREFIX.live)) {
      if (await findKeyBySecret(deps.db, token))
        throw forbidden("wrong_credential_type", "the admin API takes the admin token, not a project key");
    }
    throw unauthorized("invalid_token", "the admin token is wrong");
  }
  const sid = cookieValue(request, SESSION_COOKIE);
  if (sid) {
    const principal = await checkSession(deps, sid);
    const call = callOf(request);
    call.principal = principal;
    call.actor = principal.userId
      ? { type: "user", id: principal.userId, label: principal.email ?? principal.userId }
      : { type: "session", id: principal.sessionId ?? undefined, label: "dashboard session" };
    if (!["GET", "HEAD", "OPTIONS"].includes(request.method)) {
      const origin = request.headers.get("origin");
      const host = request.headers.get("host");
      if (origin && host && originHost(origin) !== host) throw forbidden("csrf_rejected", "cross-site request refused");
    }
    await authorize(deps.db, principal, request.method, path);
    return { via: "session" };
  }
  throw unauthorized(
    "missing_token",
    "the admin API needs the admin token (Authorization: Bearer …) or a dashboard session",
  );
}

/** Starts a dashboard session for the admin token; returns the cookie value. */
export async function createSession(deps: AuthDeps, token: string): Promise<{ id: string; maxAgeSeconds: number }> {
  if (!isAdminToken(deps, token)) {
    await audit(
      deps.db,
      "session.denied",
      { type: "session" },
      {},
      { type: "anonymous", label: "a sign-in with a wrong admin token" },
    );
    throw unauthorized("invalid_token", "the admin token is wrong");
  }
  return openSession(deps, { method: "admin_token" });
}

/** How a dashboard session began. */
export type SessionMethod = "admin_token" | "login_link" | "password" | "oidc";

/**
 * Opens a dashboard session: for the admin token (no user; a changed token ends it) or for a
 * signed-in user (`user`: ends when the user is removed). Returns the cookie value and its life.
 */
export async function openSession(
  deps: AuthDeps,
  how: { method: SessionMethod; user?: { id: string; email: string }; userAgent?: string | null },
): Promise<{ id: string; maxAgeSeconds: number }> {
  const id = newSecret("");
  const hash = sha256(id);
  const sessionId = sessionIdOf(hash);
  const actor: Actor = how.user
    ? { type: "user", id: how.user.id, label: how.user.email }
    : { type: "session", id: sessionId, label: "dashboard session" };
  await audit(deps.db, "session.create", { type: "session", id: sessionId }, { method: how.method }, actor);
  const now = Date.now();
  await addSessionRow(
    deps.db,
    {
      hash,
      createdAt: new Date(now).toISOString(),
      expiresAt: new Date(now + SESSION_MS).toISOString(),
      tokenHash: how.user ? null : adminHash(deps),
      lastSeenAt: new Date(now).toISOString(),
      userId: how.user?.id ?? null,
      method: how.method,
      userAgent: how.userAgent?.slice(0, 300) ?? null,
    },
    true,
  );
  return { id, maxAgeSeconds: SESSION_MS / 1000 };
}

/** How long a one-time sign-in code stays valid. */
const LOGIN_CODE_MS = 120_000;

/** Keeps a one-time sign-in code (made by `inferd desktop`), valid LOGIN_CODE_MS, for `redeemLoginCode`. */
export async function storeLoginCode(db: Db, code: string, now = Date.now()): Promise<void> {
  await addSessionRow(db, {
    hash: sha256(`login:${code}`),
    createdAt: new Date(now).toISOString(),
    expiresAt: new Date(now + LOGIN_CODE_MS).toISOString(),
  });
}

/** Trades a one-time sign-in code (made by `inferd desktop`) for a session; 401 when unknown or expired. */
export async function redeemLoginCode(deps: AuthDeps, code: string): Promise<{ id: string; maxAgeSeconds: number }> {
  const hash = sha256(`login:${code}`);
  const row = await liveSessionRow(deps.db, hash, Date.now());
  await removeSession(deps.db, hash);
  if (!row)
    throw unauthorized("invalid_login_code", "this sign-in link has expired or was used; sign in with the admin token");
  return openSession(deps, { method: "login_link" });
}

/** Ends the session the request carries, if any (a user's sign-out is recorded as theirs). */
export async function endSession(deps: AuthDeps, request: Request): Promise<void> {
  const sid = cookieValue(request, SESSION_COOKIE);
  if (!sid) return;
  const userId = await removeSession(deps.db, sha256(sid));
  const user = userId ? await userPrincipal(deps.db, userId, null) : undefined;
  const actor: Actor | undefined = user?.userId
    ? { type: "user", id: user.userId, label: user.email ?? user.userId }
    : undefined;
  await audit(deps.db, "session.end", { type: "session", id: sessionIdOf(sha256(sid)) }, {}, actor);
}

declare module "../call" {
  interface Call {
    /** The key that authenticated it (set by `authenticateRequest`). */
    key?: KeyRecord;
    /** Who an /admin request is (set by `authAdmin`). */
    principal?: Principal;
    /** Who it acts as for the audit log, when not its key (set by `authAdmin`). */
    actor?: Actor;
  }
}

/** Who an /admin request is (set by `authAdmin`): its role and the projects it may see; 401 when it was not authenticated so. */
export function principalOf(request: Request): Principal {
  const p = callOf(request).principal;
  if (!p)
    throw unauthorized(
      "missing_token",
      "the admin API needs the admin token (Authorization: Bearer …) or a dashboard session",
    );
  return p;
}

/** Who a request acts as, for the audit log (set by `authenticateRequest`); anonymous when none. */
export function actorOf(request: Request): Actor {
  const { actor, key: k } = callOf(request);
  if (actor) return actor;
  return k ? { type: "key", id: k.id, label: `${k.name} (${k.prefix}…)` } : { type: "anonymous", label: "anonymous" };
}

/** The key that authenticated this request (set by `authenticateRequest`). */
export function keyOf(request: Request): KeyRecord {
  const k = callOf(request).key;
  if (!k) throw new Error("keyOf() on a request that was not authenticated with a key");
  return k;
}

/** Decodes a path segment; a malformed escape is the client's error, not ours. */
function segment(raw: string): string {
  if (!raw.includes("%")) return raw;
  try {
    return decodeURIComponent(raw);
  } catch {
    throw new AppError(400, "invalid_path", "the URL path has a malformed percent-escape");
  }
}

/**
 * A request path as routing sees it, for deciding access: empty and `.` segments dropped, `..`
 * resolved, no trailing slash (so `/metrics/`, `/metrics/.` and `//metrics` are all `/metrics`).
 * @example normalisePath("//admin/./projects/") // → "/admin/projects"
 */
export function normalisePath(path: string): string {
  // Already normal (the usual case): no empty, "." or ".." segment and no trailing slash.
  if (path.length > 1 && path[0] === "/" && !path.endsWith("/") && !path.includes("//") && !path.includes("/."))
    return path;
  const out: string[] = [];
  for (const seg of path.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") out.pop();
    else out.push(seg);
  }
  return `/${out.join("/")}`;
}

/** Paths that need no credential: health, API docs, sign-in (token, password, single sign-on), and the dashboard's own page and files. */
const OPEN = [
  /^\/healthz$/,
  /^\/docs(\/|$)/,
  /^\/admin\/session$/,
  /^\/admin\/session\/methods$/,
  /^\/auth\/oidc\/(start|callback)$/,
  /^\/login$/,
];
/** How long a request to an open path (sign-in: no credential yet) may take to send its whole body. */
export const OPEN_BODY_MS = 10_000;

/**
 * The time a request's body must arrive within: OPEN_BODY_MS on the open paths (anyone can reach
 * sign-in, so a trickled body must not hold a connection), none elsewhere (a credential was checked).
 * @example bodyDeadline("/admin/session") // → 10000
 */
export const bodyDeadline = (rawPath: string): number | undefined =>
  OPEN.some((re) => re.test(normalisePath(rawPath))) ? OPEN_BODY_MS : undefined;

/** The dashboard's page and assets (GET only): public, they hold no data. */
const UI_PATHS = [/^\/$/, /^\/assets\//, new RegExp(`^/(${CLIENT_SECTIONS.join("|")})(/|$)`)];

/**
 * The one authentication gate, run before any body is read: picks the plane from the normalised
 * path and applies its rule, so a request without the right credential is refused before anything
 * else. Deny by default: a path that is neither public nor of a known plane needs the admin token.
 */
export function authenticateRequest(deps: AuthDeps, request: Request, rawPath: string): Maybe<void> {
  const path = normalisePath(rawPath);
  // The data plane (most requests) is none of the open paths and no dashboard page.
  if (!path.startsWith("/endpoint/")) {
    if (OPEN.some((re) => re.test(path))) return;
    if ((request.method === "GET" || request.method === "HEAD") && UI_PATHS.some((re) => re.test(path))) return;
    // A browser asking for another page gets the dashboard (it shows "not found"); it holds no data.
    if (wantsDashboardPage(request, path)) return;
  }
  const keep = (key: KeyRecord) => void (callOf(request).key = key);
  if (path === "/metrics") {
    const token = presentedToken(request);
    if (deps.metricsToken && token && safeEqual(sha256(token), sha256(deps.metricsToken))) return;
    return andThen(authAdmin(deps, request, path), () => undefined);
  } else if (path === "/api" || path.startsWith("/api/")) {
    const m = /^\/api\/projects\/([^/]+)/.exec(path);
    return andThen(authControl(deps, request, m ? segment(m[1]) : undefined), keep);
  } else if (path.startsWith("/endpoint/")) {
    const m = /^\/endpoint\/([^/]+)\/([^/]+)(\/.*)?$/.exec(path);
    if (!m) throw notFound(`no route for ${request.method} ${path}`);
    // The project's base URL (`/endpoint/<project>/v1/…`, `/api/…`): routing checks the key's scope
    // per model. A workload slugged `v1` or `api` before those were reserved keeps its own paths
    // (`…/v1/v1/…`, `…/api/jobs`), checked as any workload's.
    if ((m[2] === "v1" || m[2] === "api") && !/^\/(v1|api|jobs)(\/|:|$)/.test(m[3] ?? ""))
      return andThen(
        authData(deps, request, segment(m[1]), null, m[2] === "v1" && /^\/messages(\/|$)/.test(m[3] ?? "")),
        keep,
      );
    const allowApiKey = /^\/v1\/messages(\/|$)/.test(m[3] ?? "");
    return andThen(authData(deps, request, segment(m[1]), segment(m[2]), allowApiKey), keep);
  } else if (path.startsWith("/agent/")) {
    // Agents authenticate with their own credential over the pinned HTTPS link (agents/routes.ts).
    return;
  }
  return andThen(authAdmin(deps, request, path), () => undefined);
}
