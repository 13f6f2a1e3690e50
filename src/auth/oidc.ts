/**
 * Single sign-on with OpenID Connect: the provider's discovery document (kept once read, read again
 * after a failure), the authorization code flow with PKCE (S256), `state`, `nonce` and the PKCE
 * verifier kept in the browser that started the sign-in (a signed, HttpOnly, SameSite=Lax cookie
 * of ten minutes: nothing is stored per anonymous start, and a callback opened in another browser
 * finds no matching state), the ID token's checks (issuer, audience, expiry, nonce, and its
 * signature against the provider's JWKS) by `openid-client`, then the claims made a user of this
 * server with a role. The routes (src/auth/oidc-routes.ts) turn every failure into
 * `/signin?error=<plain words>`.
 */
import { createHmac } from "node:crypto";
import { and, eq } from "drizzle-orm";
import * as oidc from "openid-client";
import type { Config } from "../config";
import type { Db } from "../db";
import { first } from "../db/raw";
import { users } from "../db/schema";
import { AppError } from "../errors";
import { nowIso, safeEqual, sha256 } from "../ids";
import { log } from "../log";
import { audit } from "../audit/service";
import { createUser, recordSsoSignIn } from "../users/service";

/** The settings single sign-on reads (restart-needed: read once when the routes are built). */
export type OidcSettings = Pick<
  Config,
  "oidcIssuer" | "oidcClientId" | "oidcClientSecret" | "oidcDefaultRole" | "oidcRoleClaim" | "oidcRedirectUrl"
>;

/** A user's role. */
export type Role = "admin" | "operator" | "viewer";

/** A sign-in that cannot go on; `message` is plain words for the sign-in page, `detail` goes to the log only. */
export class SignInFailed extends Error {
  constructor(
    message: string,
    readonly detail?: unknown,
  ) {
    super(message);
  }
}

/** How long a started sign-in may take at the provider. */
export const LOGIN_MS = 10 * 60_000;
/** The cookie holding a started sign-in (state, nonce, PKCE verifier, return_to) in the browser that started it. */
export const PENDING_COOKIE = "inferd_oidc";

/** Highest first: the role a claim's values grant is the highest one named. */
const ROLE_ORDER: Role[] = ["admin", "operator", "viewer"];

/** The callback path the provider sends the browser back to. */
export const CALLBACK_PATH = "/auth/oidc/callback";

/** Whether single sign-on is set up (an issuer and a client id). */
export const oidcConfigured = (s: Pick<OidcSettings, "oidcIssuer" | "oidcClientId">) =>
  !!(s.oidcIssuer && s.oidcClientId);

/**
 * What `GET /admin/session/methods` says under `oidc`: the button's label and where it starts, or
 * null when single sign-on is not set up.
 * @example oidcMethod({ oidcIssuer: "https://sso.example.com/realms/acme", oidcClientId: "inferd" }) // → { label: "Sign in with sso.example.com", start: "/auth/oidc/start" }
 */
export function oidcMethod(
  s: Pick<OidcSettings, "oidcIssuer" | "oidcClientId">,
): { label: string; start: string } | null {
  if (!oidcConfigured(s)) return null;
  let host = s.oidcIssuer!;
  try {
    host = new URL(host).host;
  } catch {}
  return { label: `Sign in with ${host}`, start: "/auth/oidc/start" };
}

/** 404 `oidc_not_configured`, naming what is missing. */
export const notConfigured = (s: OidcSettings) =>
  new AppError(
    404,
    "oidc_not_configured",
    s.oidcIssuer
      ? "single sign-on needs --oidc-client-id as well as --oidc-issuer"
      : "single sign-on is not set up on this server (start it with --oidc-issuer and --oidc-client-id)",
  );

/**
 * A `return_to` that stays on this server: a path starting with one `/` (no `//`, no `\`, no
 * scheme, no control characters), percent-encoded as a Location header needs (so a non-ASCII path
 * works); anything else is `/`.
 * @example safeReturnTo("/workloads?x=1") // → "/workloads?x=1"; safeReturnTo("/ü") // → "/%C3%BC"; safeReturnTo("//evil.example") // → "/"
 */
export function safeReturnTo(raw: unknown): string {
  if (typeof raw !== "string" || raw.length > 2000) return "/";
  if (!raw.startsWith("/") || raw.startsWith("//") || /[\\\u0000-\u001f\u007f]/.test(raw)) return "/";
  try {
    const u = new URL(raw, "http://here.invalid");
    const path = u.pathname + u.search + u.hash;
    return u.host === "here.invalid" && path.startsWith("/") && !path.startsWith("//") && path.length <= 6000
      ? path
      : "/";
  } catch {
    return "/";
  }
}

/**
 * The claim's value by name: the whole name first (Auth0-style names hold dots), else a dotted
 * path (`realm_access.roles`).
 */
function claimValue(claims: Record<string, unknown>, name: string): unknown {
  if (name in claims) return claims[name];
  let v: unknown = claims;
  for (const part of name.split(".")) v = v && typeof v === "object" ? (v as Record<string, unknown>)[part] : undefined;
  return v;
}

/**
 * The role a claim names: among its values (a string or a list), `inferd-admin`, `inferd-operator`
 * or `inferd-viewer` (any case; a leading `/`, as Keycloak's full group paths have, is ignored);
 * the highest wins; none → undefined.
 * @example roleFromClaim({ groups: ["/staff", "inferd-operator"] }, "groups") // → "operator"
 */
export function roleFromClaim(claims: Record<string, unknown>, claim: string): Role | undefined {
  const raw = claimValue(claims, claim);
  const values = (Array.isArray(raw) ? raw : [raw])
    .filter((v): v is string => typeof v === "string")
    .map((v) => v.trim().replace(/^\/+/, "").toLowerCase());
  return ROLE_ORDER.find((r) => values.includes(`inferd-${r}`));
}

/** The user a sign-in resolves to. */
export interface SignedInUser {
  id: string;
  email: string;
  role: Role;
  created: boolean;
}

/** Who the provider says signed in. */
export interface OidcIdentity {
  issuer: string;
  subject: string;
  email: string;
  emailVerified?: boolean;
  name: string;
  /** Set when --oidc-role-claim is configured (then it is applied at every sign-in). */
  claimedRole?: Role;
}

/**
 * Finds the user of an identity (by issuer and subject, else by email) or creates it; notes the
 * sign-in. A role claim, when configured, sets the role at every sign-in; otherwise a new user gets
 * `defaultRole` and an existing one keeps theirs. An existing user is linked by email only when the
 * provider says the email is verified (`email_verified: true`; a provider that says nothing, as
 * Entra ID, does not link); an email already linked to another provider account is refused.
 */
export async function findOrCreateOidcUser(db: Db, who: OidcIdentity, defaultRole: Role): Promise<SignedInUser> {
  const now = nowIso();
  const byOidc = await first(
    db
      .select()
      .from(users)
      .where(and(eq(users.oidcIssuer, who.issuer), eq(users.oidcSubject, who.subject))),
  );
  const row = byOidc ?? (await first(db.select().from(users).where(eq(users.email, who.email))));
  if (!row) {
    const role = who.claimedRole ?? defaultRole;
    const made = await createUser(
      db,
      { email: who.email, name: who.name, role },
      { issuer: who.issuer, subject: who.subject },
      (id) => ({ type: "user", id, label: who.email }),
    );
    await recordSsoSignIn(db, made.id, now);
    return { id: made.id, email: made.email, role, created: true };
  }
  if (!byOidc) {
    if (row.oidcSubject && (row.oidcIssuer !== who.issuer || row.oidcSubject !== who.subject))
      throw new SignInFailed(`the email ${who.email} belongs to another single sign-on account; ask an admin`);
    if (who.emailVerified !== true)
      throw new SignInFailed(
        `the provider does not say the email ${who.email} is verified, so it cannot be linked to the existing user; verify it at the provider, or ask an admin to remove that user so single sign-on can create it`,
      );
  }
  const role = who.claimedRole ?? row.role;
  await recordSsoSignIn(db, row.id, now, {
    issuer: who.issuer,
    subject: who.subject,
    role,
    changed: role !== row.role || !byOidc,
  });
  if (role !== row.role)
    await audit(
      db,
      "user.update",
      { type: "user", id: row.id, label: row.email },
      { role: { from: row.role, to: role }, by: "role claim" },
      { type: "user", id: row.id, label: row.email },
    );
  return { id: row.id, email: row.email, role, created: false };
}

/**
 * The origin the browser used: the request's own Host (never X-Forwarded-Host, which any client can
 * send; behind a proxy that rewrites the host, --oidc-redirect-url says the URL), https over TLS or
 * when a proxy says so.
 */
function requestOrigin(request: Request, https: boolean): string {
  const host = request.headers.get("host") || new URL(request.url).host;
  return `${https ? "https" : "http"}://${host}`;
}

/** The redirect URI the provider must allow: `--oidc-redirect-url`, else this request's origin + `/auth/oidc/callback`. */
export const redirectUri = (s: OidcSettings, request: Request, https: boolean) =>
  s.oidcRedirectUrl || requestOrigin(request, https) + CALLBACK_PATH;

/** A started sign-in, as its cookie holds it. */
interface Pending {
  state: string;
  nonce: string;
  verifier: string;
  returnTo: string;
  /** When it expires (ms since the epoch). */
  expires: number;
}

/**
 * The cookie value of a started sign-in: its JSON (base64url) and an HMAC-SHA256 of it under `key`,
 * so the browser carries it unchanged or not at all.
 */
export function sealPending(key: string, p: Pending): string {
  const body = Buffer.from(JSON.stringify(p)).toString("base64url");
  return `${body}.${createHmac("sha256", key).update(body).digest("base64url")}`;
}

/** The started sign-in a cookie value holds, or undefined when it is missing, altered, malformed or expired. */
export function openPending(key: string, value: string | undefined, now = Date.now()): Pending | undefined {
  const [body, mac, extra] = (value ?? "").split(".");
  if (
    !body ||
    !mac ||
    extra !== undefined ||
    !safeEqual(mac, createHmac("sha256", key).update(body).digest("base64url"))
  )
    return undefined;
  try {
    const p = JSON.parse(Buffer.from(body, "base64url").toString()) as Pending;
    return typeof p.state === "string" &&
      typeof p.nonce === "string" &&
      typeof p.verifier === "string" &&
      typeof p.returnTo === "string" &&
      p.expires > now
      ? p
      : undefined;
  } catch {
    return undefined;
  }
}

/** A cookie's raw value in a request, or undefined. */
function cookieOf(request: Request, name: string): string | undefined {
  for (const part of (request.headers.get("cookie") ?? "").split(";")) {
    const i = part.indexOf("=");
    if (i > 0 && part.slice(0, i).trim() === name) return part.slice(i + 1).trim();
  }
  return undefined;
}

/** What a failed check of the provider's answer means, in plain words (the cause goes to the log). */
function plainFailure(e: unknown): SignInFailed {
  if (e instanceof SignInFailed) return e;
  if (e instanceof oidc.AuthorizationResponseError)
    return new SignInFailed(`the provider refused the sign-in: ${e.error_description || e.error}`, e);
  if (e instanceof oidc.ResponseBodyError)
    return new SignInFailed(`the provider refused the sign-in code (${e.error}); start again`, e);
  const code = (e as { code?: string }).code ?? "";
  if (/JWT|JWS|CLAIM|SIGNATURE|NONCE|STATE/i.test(code))
    return new SignInFailed(
      "the provider's answer failed a security check (its ID token was not for this sign-in); start again",
      e,
    );
  return new SignInFailed(
    "the single sign-on provider cannot be reached or answered in a way inferd does not understand; try again later",
    e,
  );
}

/** What single sign-on needs: the store, its settings and a secret to sign the sign-in cookie with (the same on every host). */
export interface OidcDeps {
  db: Db;
  settings: OidcSettings;
  /** Keys the HMAC of the sign-in cookie (derived from the admin token, which a cluster's hosts share). */
  cookieKey: string;
}

/** Single sign-on for one configured provider: `begin` makes the provider URL, `complete` the user. */
export interface OidcFlow {
  /** Starts a sign-in: returns the provider's authorization URL and the cookie value (state, nonce, PKCE verifier) for the browser. */
  begin(request: Request, returnTo: string, https: boolean): Promise<{ url: URL; cookie: string }>;
  /** Completes a sign-in from the provider's callback and the browser's cookie: checks everything and returns the user and where to go. */
  complete(request: Request, https: boolean): Promise<{ user: SignedInUser; returnTo: string }>;
}

/** Builds the single sign-on flow for the configured provider (discovery is read on first use). */
export function createOidcFlow(deps: OidcDeps): OidcFlow {
  const s = deps.settings;
  const issuer = new URL(s.oidcIssuer!);
  let discovered: Promise<oidc.Configuration> | undefined;
  /** The provider's configuration: read once, read again after a failure. */
  const discover = () => {
    discovered ??= oidc
      .discovery(
        issuer,
        s.oidcClientId!,
        undefined,
        s.oidcClientSecret ? oidc.ClientSecretBasic(s.oidcClientSecret) : oidc.None(),
        {
          execute: [
            oidc.enableNonRepudiationChecks,
            ...(issuer.protocol === "http:" ? [oidc.allowInsecureRequests] : []),
          ],
          timeout: 10,
        },
      )
      .catch((e) => {
        discovered = undefined;
        throw new SignInFailed(`the single sign-on provider (${issuer.host}) cannot be reached; try again later`, e);
      });
    return discovered;
  };
  if (issuer.protocol === "http:")
    log.warn(`single sign-on: the issuer ${s.oidcIssuer} is plain http; use https outside a private network`);

  return {
    async begin(request, returnTo, https) {
      const config = await discover();
      const pending: Pending = {
        state: oidc.randomState(),
        nonce: oidc.randomNonce(),
        verifier: oidc.randomPKCECodeVerifier(),
        returnTo,
        expires: Date.now() + LOGIN_MS,
      };
      const url = oidc.buildAuthorizationUrl(config, {
        redirect_uri: redirectUri(s, request, https),
        scope: "openid email profile",
        code_challenge: await oidc.calculatePKCECodeChallenge(pending.verifier),
        code_challenge_method: "S256",
        state: pending.state,
        nonce: pending.nonce,
      });
      return { url, cookie: sealPending(deps.cookieKey, pending) };
    },

    async complete(request, https) {
      const params = new URL(request.url).searchParams;
      const state = params.get("state");
      if (params.get("error") && !state)
        throw new SignInFailed(
          `the provider refused the sign-in: ${params.get("error_description") || params.get("error")}`,
        );
      if (!state) throw new SignInFailed("the provider's answer has no state; start the sign-in again");
      // The state must be the one this browser started (its cookie): a callback URL opened
      // elsewhere (login CSRF) finds none; the cookie is cleared by the answer (one use).
      const login = openPending(deps.cookieKey, cookieOf(request, PENDING_COOKIE));
      if (!login || !safeEqual(login.state, state))
        throw new SignInFailed(
          "this sign-in was not started in this browser, or has expired or was already used; start again",
        );
      try {
        const config = await discover();
        const current = new URL(redirectUri(s, request, https));
        current.search = params.toString();
        const tokens = await oidc.authorizationCodeGrant(config, current, {
          pkceCodeVerifier: login.verifier,
          expectedState: state,
          expectedNonce: login.nonce,
          idTokenExpected: true,
        });
        const idClaims = tokens.claims()!;
        let claims: Record<string, unknown> = idClaims;
        const needInfo = !idClaims.email || (s.oidcRoleClaim && claimValue(idClaims, s.oidcRoleClaim) === undefined);
        if (needInfo && config.serverMetadata().userinfo_endpoint)
          claims = { ...(await oidc.fetchUserInfo(config, tokens.access_token, idClaims.sub)), ...idClaims };
        const email = typeof claims.email === "string" ? claims.email.trim().toLowerCase() : "";
        if (!email)
          throw new SignInFailed(
            "the provider did not give an email address for this account (inferd needs the email claim: allow the email scope)",
          );
        const name = [claims.name, claims.preferred_username, email].find(
          (v): v is string => typeof v === "string" && v.trim() !== "",
        )!;
        const who: OidcIdentity = {
          issuer: idClaims.iss,
          subject: idClaims.sub,
          email,
          emailVerified: typeof claims.email_verified === "boolean" ? claims.email_verified : undefined,
          name: name.slice(0, 200),
          claimedRole: s.oidcRoleClaim
            ? (roleFromClaim(claims, s.oidcRoleClaim) ?? (s.oidcDefaultRole as Role))
            : undefined,
        };
        return {
          user: await findOrCreateOidcUser(deps.db, who, s.oidcDefaultRole as Role),
          returnTo: safeReturnTo(login.returnTo),
        };
      } catch (e) {
        throw plainFailure(e);
      }
    },
  };
}

/** The key of the sign-in cookie's HMAC, derived from the admin token (never the token itself). */
export const pendingCookieKey = (adminToken: string) => sha256(`inferd single sign-on cookie:${adminToken}`);
