// Single sign-on with OpenID Connect, end to end: real inferd servers signing people in through a
// real OpenID provider (test/fixtures/oidc-provider.ts, standing for Keycloak, Authentik, Okta…).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { join } from "node:path";
import { startOidcProvider, type OidcProvider } from "./fixtures/oidc-provider";
import { startServing, type Serving } from "./helpers/serving";
import { cleanup, runInferd, tempDir } from "./helpers/proc";
import { sha256 } from "../src/ids";

const SECRET = "s3cret-of-the-inferd-client";
const USERS = [
  { sub: "alice", email: "Alice@Example.com", email_verified: true, name: "Alice Liddell" },
  {
    sub: "root",
    email: "root@example.com",
    email_verified: true,
    name: "Root",
    groups: ["/staff", "inferd-operator", "/inferd-admin"],
  },
  { sub: "op", email: "op@example.com", email_verified: true, name: "Opal", groups: ["inferd-operator"] },
  { sub: "noemail", name: "No Mail" },
];

let idp: OidcProvider;
/** Default role (viewer), no role claim. */
let plain: Serving;
/** `--oidc-role-claim groups`. */
let grouped: Serving;
/** No single sign-on. */
let none: Serving;

/** The settings of a server signing in through `issuer` as client `inferd`. */
const oidcEnv = (issuer: string, extra: Record<string, string> = {}) => ({
  INFERD_LOCAL_AGENT: "0",
  INFERD_OIDC_ISSUER: issuer,
  INFERD_OIDC_CLIENT_ID: "inferd",
  INFERD_OIDC_CLIENT_SECRET: SECRET,
  ...extra,
});

/** Registers `srv`'s callback at the provider for client `inferd` (and `other`, another app of the same provider). */
function register(p: OidcProvider, ...servers: Serving[]) {
  const redirect_uris = servers.map((s) => `${s.url}/auth/oidc/callback`);
  p.setClient({ client_id: "inferd", client_secret: SECRET, redirect_uris });
  p.setClient({ client_id: "other", client_secret: "another-apps-secret", redirect_uris });
}

beforeAll(async () => {
  idp = await startOidcProvider({ users: USERS });
  [plain, grouped, none] = await Promise.all([
    startServing(oidcEnv(idp.issuer)),
    startServing(oidcEnv(idp.issuer, { INFERD_OIDC_ROLE_CLAIM: "groups" })),
    startServing({ INFERD_LOCAL_AGENT: "0" }),
  ]);
  register(idp, plain, grouped);
});

afterAll(async () => {
  await Promise.all([plain, grouped, none].map((s) => s?.stop().catch(() => 0)));
  await idp?.stop();
  await cleanup();
});

/** GET without following redirects. */
const get = (url: string | URL, headers: Record<string, string> = {}) => fetch(url, { redirect: "manual", headers });

/**
 * The browser's sign-in cookie of each started sign-in, by its state: the callback carries it back
 * as the browser that started the sign-in would (and forgets it once used, as inferd clears it).
 */
const browser = new Map<string, string>();

/** Starts a sign-in at inferd: the provider URL it sends the browser to (its cookie is kept for the callback). */
async function start(srv: Serving, returnTo?: string): Promise<URL> {
  const r = await get(
    `${srv.url}/auth/oidc/start${returnTo === undefined ? "" : `?return_to=${encodeURIComponent(returnTo)}`}`,
  );
  expect(r.status).toBe(302);
  const url = new URL(r.headers.get("location")!);
  const cookie = r.headers.getSetCookie().find((c) => c.startsWith("inferd_oidc="));
  if (cookie) browser.set(url.searchParams.get("state") ?? "", cookie.split(";")[0]);
  return url;
}

/** Where inferd sent the browser after the callback, and the session cookie it set (if any). */
async function callback(
  url: URL | string,
): Promise<{ location: string; cookie: string | undefined; error: string | null }> {
  const state = new URL(url).searchParams.get("state") ?? "";
  const held = browser.get(state);
  browser.delete(state);
  const r = await get(url, held ? { cookie: held } : {});
  expect(r.status).toBe(302);
  const location = r.headers.get("location")!;
  const cookie = r.headers.getSetCookie().find((c) => c.startsWith("inferd_session="));
  return {
    location,
    cookie: cookie?.split(";")[0].slice("inferd_session=".length),
    error: new URL(location, "http://x").searchParams.get("error"),
  };
}

/** A whole sign-in of `login` through the provider. */
async function signIn(srv: Serving, login: string, returnTo?: string) {
  return callback(await idp.signIn((await start(srv, returnTo)).href, login));
}

/** Reads the server's store (SQLite) while it runs. */
function store<T>(srv: Serving, sql: string, ...params: string[]): T[] {
  const db = new Database(join(srv.dataDir, "inferd.db"), { readonly: true });
  try {
    return db.query(sql).all(...params) as T[];
  } finally {
    db.close();
  }
}

type UserRow = {
  id: string;
  email: string;
  name: string;
  role: string;
  oidc_issuer: string;
  oidc_subject: string;
  last_sign_in_at: string | null;
};
const userRows = (srv: Serving, email: string) => store<UserRow>(srv, "select * from users where email = ?", email);
/** The user a session cookie belongs to, and how the session began. */
const sessionOf = (srv: Serving, cookie: string) =>
  store<{ user_id: string; method: string }>(
    srv,
    "select user_id, method from sessions where hash = ?",
    sha256(cookie),
  )[0];

describe("single sign-on (OpenID Connect)", () => {
  test("the start sends the browser to the provider with the code flow, PKCE S256, state and nonce", async () => {
    const url = await start(plain, "/workloads");
    expect(url.origin).toBe(idp.issuer);
    const q = url.searchParams;
    expect(q.get("response_type")).toBe("code");
    expect(q.get("client_id")).toBe("inferd");
    expect(q.get("redirect_uri")).toBe(`${plain.url}/auth/oidc/callback`);
    expect(q.get("code_challenge_method")).toBe("S256");
    expect(q.get("code_challenge")).toMatch(/^[\w-]{43}$/);
    expect(q.get("state")).toBeTruthy();
    expect(q.get("nonce")).toBeTruthy();
    expect(q.get("scope")).toContain("openid");
  });

  test("a first sign-in creates a viewer (the default role) and opens a session; a second one reuses the user", async () => {
    const first = await signIn(plain, "alice", "/workloads?tab=mine");
    expect(first.error).toBeNull();
    expect(first.location).toBe("/workloads?tab=mine");
    expect(first.cookie).toBeTruthy();
    const [user] = userRows(plain, "alice@example.com");
    expect(user).toMatchObject({
      email: "alice@example.com",
      name: "Alice Liddell",
      role: "viewer",
      oidc_issuer: idp.issuer,
      oidc_subject: "alice",
    });
    expect(user.id).toMatch(/^usr_/);
    expect(sessionOf(plain, first.cookie!)).toEqual({ user_id: user.id, method: "oidc" });
    // The code was traded at the token endpoint, and the ID token's signature checked against the provider's keys.
    expect(idp.requests.some((r) => r.startsWith("POST /token"))).toBe(true);
    expect(idp.requests.some((r) => r.startsWith("GET /jwks"))).toBe(true);

    const again = await signIn(plain, "alice");
    expect(again.location).toBe("/");
    expect(again.cookie).not.toBe(first.cookie);
    expect(userRows(plain, "alice@example.com").map((u) => u.id)).toEqual([user.id]);
    expect(sessionOf(plain, again.cookie!).user_id).toBe(user.id);
    // The audit log says who signed in.
    const audit = store<{ action: string; actor_type: string; actor_id: string }>(
      plain,
      "select action, actor_type, actor_id from audit_log where actor_id = ? order by id",
      user.id,
    );
    expect(audit.map((a) => a.action)).toEqual(["user.create", "session.create", "session.create"]);
  });

  test("with --oidc-role-claim groups, inferd-admin (or Keycloak's full path /inferd-admin) makes an admin (the highest group wins), inferd-operator an operator, none the default", async () => {
    expect((await signIn(grouped, "root")).error).toBeNull();
    expect(userRows(grouped, "root@example.com")[0].role).toBe("admin");
    expect((await signIn(grouped, "op")).error).toBeNull();
    expect(userRows(grouped, "op@example.com")[0].role).toBe("operator");
    expect((await signIn(grouped, "alice")).error).toBeNull();
    expect(userRows(grouped, "alice@example.com")[0].role).toBe("viewer");
    // The provider is the source of truth: a group taken away demotes at the next sign-in.
    idp.setUser({ ...USERS[2], groups: [] });
    expect((await signIn(grouped, "op")).error).toBeNull();
    expect(userRows(grouped, "op@example.com")[0].role).toBe("viewer");
    idp.setUser(USERS[2]);
  });

  test("a callback's state works once: replaying it, or a made-up state, goes to the sign-in page with an error", async () => {
    const back = await idp.signIn((await start(plain)).href, "alice");
    expect((await callback(back)).cookie).toBeTruthy();
    const replay = await callback(back);
    expect(replay.cookie).toBeUndefined();
    expect(replay.location).toStartWith("/signin?error=");
    expect(replay.error).toContain("expired or was already used");

    const tampered = new URL(back);
    tampered.searchParams.set("state", "made-up-state");
    const r = await callback(tampered);
    expect(r.cookie).toBeUndefined();
    expect(r.error).toContain("expired or was already used");
    const none = new URL(back);
    none.searchParams.delete("state");
    expect((await callback(none)).error).toContain("no state");
  });

  // Authorization requests tampered with on their way to the provider (the provider itself is honest):
  // another nonce comes back in the ID token (inferd's own check refuses it); a code issued to
  // another client of the same provider is refused when inferd trades it.
  test.each([
    ["nonce", "a-nonce-inferd-never-made", "failed a security check"],
    ["client_id", "other", "refused the sign-in"],
  ])("an authorization request with another %s is refused", async (param, value, error) => {
    const url = await start(plain);
    url.searchParams.set(param, value);
    const r = await callback(await idp.signIn(url.href, "alice"));
    expect(r.cookie).toBeUndefined();
    expect(r.error).toContain(error);
    expect(plain.output()).toContain("single sign-on callback failed");
  });

  test("the provider's own refusal (the user cancels) is shown", async () => {
    const url = await start(plain);
    const back = new URL(`${plain.url}/auth/oidc/callback`);
    back.searchParams.set("error", "access_denied");
    back.searchParams.set("error_description", "End-User aborted interaction");
    back.searchParams.set("state", url.searchParams.get("state")!);
    back.searchParams.set("iss", idp.issuer);
    const r = await callback(back);
    expect(r.error).toBe("the provider refused the sign-in: End-User aborted interaction");
  });

  test("an account without an email address cannot sign in", async () => {
    const r = await signIn(plain, "noemail");
    expect(r.cookie).toBeUndefined();
    expect(r.error).toContain("did not give an email address");
  });

  test("return_to must be a local path: another host, a scheme or // goes to /", async () => {
    for (const bad of [
      "https://evil.example/x",
      "//evil.example/x",
      "/\\evil.example",
      "javascript:alert(1)",
      "evil",
    ]) {
      const r = await signIn(plain, "alice", bad);
      expect(r.error).toBeNull();
      expect(r.location).toBe("/");
    }
  });

  test("without --oidc-issuer both routes answer 404 oidc_not_configured", async () => {
    for (const path of ["/auth/oidc/start", "/auth/oidc/callback?code=x&state=y"]) {
      const r = await get(`${none.url}${path}`);
      expect(r.status).toBe(404);
      expect((await r.json()).error.code).toBe("oidc_not_configured");
    }
  });

  test("an issuer that is not a URL stops serve at start with a clear message", async () => {
    const r = await runInferd({
      args: ["serve", "--port", "0", "--data-dir", tempDir("oidc-bad"), "--oidc-issuer", "keycloak.example.com"],
    });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(`--oidc-issuer must be an http:// or https:// URL, got "keycloak.example.com"`);
  });

  test("the client secret shows only as set in the settings", async () => {
    const { settings: list } = (await (await plain.admin("/admin/settings")).json()) as {
      settings: { key: string; value: unknown; secret: boolean; runtime: boolean; source: string }[];
    };
    const byKey = Object.fromEntries(list.map((s) => [s.key, s]));
    expect(byKey.oidcClientSecret).toMatchObject({ value: "set", secret: true, runtime: false, source: "env" });
    expect(byKey.oidcIssuer).toMatchObject({ value: idp.issuer, runtime: false });
    expect(byKey.oidcDefaultRole).toMatchObject({ value: "viewer", source: "default" });
    expect(JSON.stringify(list)).not.toContain(SECRET);
  });

  test("a provider that is down gives a clear error; once it is back, sign-in works (discovery is read again)", async () => {
    const later = await startOidcProvider({ users: USERS });
    const { port, issuer } = later;
    await later.stop();
    const srv = await startServing(oidcEnv(issuer));
    try {
      const r = await get(`${srv.url}/auth/oidc/start`);
      expect(r.status).toBe(302);
      const error = new URL(r.headers.get("location")!, srv.url).searchParams.get("error");
      expect(error).toBe(`the single sign-on provider (127.0.0.1:${port}) cannot be reached; try again later`);
      expect(srv.output()).toContain("single sign-on start failed");

      const back = await startOidcProvider({ users: USERS, port });
      try {
        register(back, srv);
        const url = await start(srv);
        const done = await callback(await back.signIn(url.href, "alice"));
        expect(done.error).toBeNull();
        expect(done.cookie).toBeTruthy();
      } finally {
        await back.stop();
      }
    } finally {
      await srv.stop();
    }
  });
});
