// Issue 32, third security probe: sign-in that holds against an attacker. Password guesses sent at
// once, single sign-on account takeover and login CSRF, a flood of anonymous single sign-on starts,
// changing one's password without the old one, a forged X-Forwarded-Host, a non-ASCII return_to,
// and a sign-in body that trickles in. Real servers, a real OpenID provider, raw sockets.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect } from "node:net";
import { startOidcProvider, type OidcProvider } from "./fixtures/oidc-provider";
import { startTestServer, type TestServer } from "./helpers/server";
import { sqliteOf } from "../src/db";

const PASSWORD = "correct horse battery";
const SECRET = "s3cret-of-the-inferd-client";
const errorOf = async (r: Response) =>
  ((await r.json()) as { error: { code: string; message: string; field?: string } }).error;

/** Signs in with an e-mail and password; the answer and the session cookie (`name=value`). */
async function signIn(srv: TestServer, email: string, password: string): Promise<{ r: Response; cookie: string }> {
  const r = await srv.call("/admin/session", undefined, { body: { email, password } });
  return { r, cookie: (r.headers.get("set-cookie") ?? "").split(";")[0] };
}

/** An /admin call riding on a session cookie from our own origin, as the dashboard makes it. */
const asCookie = (srv: TestServer, cookie: string, path: string, init: { method?: string; body?: unknown } = {}) =>
  srv.call(path, undefined, { ...init, headers: { cookie, origin: srv.url } });

describe("password guesses sent at once (item 5)", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
    expect(
      (await t.admin("/admin/users", { body: { email: "gina@example.com", role: "viewer", password: PASSWORD } }))
        .status,
    ).toBe(201);
  });
  afterAll(() => t.close());

  test("30 concurrent wrong guesses: at most 5 are checked, the rest get 429 before any hash; then the right password is refused too", async () => {
    const answers = await Promise.all(
      Array.from({ length: 30 }, (_, i) => signIn(t, "gina@example.com", `guess number ${i}`)),
    );
    const statuses = answers.map((a) => a.r.status);
    expect(statuses.every((s) => s === 401 || s === 429)).toBe(true);
    expect(statuses.filter((s) => s === 401).length).toBeLessThanOrEqual(5);
    expect(statuses.filter((s) => s === 429).length).toBeGreaterThanOrEqual(25);
    // What was checked is what was denied: never more than the limit.
    const denied = (await (await t.admin("/admin/audit?action=session.denied")).json()).entries;
    expect(denied.length).toBeLessThanOrEqual(5);
    const right = await signIn(t, "gina@example.com", PASSWORD);
    expect(right.r.status).toBe(429);
    expect((await errorOf(right.r)).code).toBe("too_many_attempts");
    expect(Number(right.r.headers.get("retry-after"))).toBeGreaterThan(0);
  });
});

describe("changing one's own password (item 16)", () => {
  let t: TestServer;
  const made: Record<string, string> = {};
  beforeAll(async () => {
    t = await startTestServer();
    for (const [email, role] of [
      ["uma@example.com", "viewer"],
      ["ada@example.com", "admin"],
      ["vic@example.com", "viewer"],
    ]) {
      const r = await t.admin("/admin/users", { body: { email, role, password: PASSWORD } });
      made[email] = (await r.json()).id;
    }
  });
  afterAll(() => t.close());

  test("a user needs current_password: missing is 400 at the field, wrong is 403 wrong_current_password, right changes it", async () => {
    const { cookie } = await signIn(t, "uma@example.com", PASSWORD);
    const id = made["uma@example.com"];
    const missing = await asCookie(t, cookie, `/admin/users/${id}`, {
      method: "PATCH",
      body: { password: "a stolen session's pick" },
    });
    expect(missing.status).toBe(400);
    expect(await errorOf(missing)).toMatchObject({ code: "validation_error", field: "current_password" });
    const wrong = await asCookie(t, cookie, `/admin/users/${id}`, {
      method: "PATCH",
      body: { password: "a stolen session's pick", current_password: "not my password" },
    });
    expect(wrong.status).toBe(403);
    expect(await errorOf(wrong)).toMatchObject({ code: "wrong_current_password", field: "current_password" });
    // The session survives a wrong current password, and the password is unchanged.
    expect((await asCookie(t, cookie, "/admin/me")).status).toBe(200);
    expect((await signIn(t, "uma@example.com", "a stolen session's pick")).r.status).toBe(401);
    const right = await asCookie(t, cookie, `/admin/users/${id}`, {
      method: "PATCH",
      body: { password: "my own new passphrase", current_password: PASSWORD },
    });
    expect(right.status).toBe(200);
    expect((await signIn(t, "uma@example.com", "my own new passphrase")).r.status).toBe(200);
    // A name change needs no password.
    expect((await asCookie(t, cookie, `/admin/users/${id}`, { method: "PATCH", body: { name: "Uma" } })).status).toBe(
      200,
    );
  });

  test("an admin user resetting another's password, or the admin token, needs none; an admin's own needs theirs", async () => {
    const { cookie } = await signIn(t, "ada@example.com", PASSWORD);
    expect(
      (
        await asCookie(t, cookie, `/admin/users/${made["vic@example.com"]}`, {
          method: "PATCH",
          body: { password: "reset by an admin user" },
        })
      ).status,
    ).toBe(200);
    expect((await signIn(t, "vic@example.com", "reset by an admin user")).r.status).toBe(200);
    expect(
      (
        await t.admin(`/admin/users/${made["vic@example.com"]}`, {
          method: "PATCH",
          body: { password: "reset by the admin token" },
        })
      ).status,
    ).toBe(200);
    const own = await asCookie(t, cookie, `/admin/users/${made["ada@example.com"]}`, {
      method: "PATCH",
      body: { password: "ada's new passphrase" },
    });
    expect(own.status).toBe(400);
    expect((await errorOf(own)).field).toBe("current_password");
  });
});

describe("single sign-on (items 6, 7, 8, 17)", () => {
  let idp: OidcProvider;
  let sso: TestServer;
  beforeAll(async () => {
    idp = await startOidcProvider({
      users: [
        { sub: "alice", email: "alice@example.com", email_verified: true, name: "Alice" },
        // Entra ID sends no email_verified: this account claims the local admin's e-mail.
        { sub: "mallory", email: "boss@example.com", name: "Mallory" },
        { sub: "verified-boss", email: "chief@example.com", email_verified: true, name: "Chief" },
      ],
    });
    sso = await startTestServer({
      INFERD_OIDC_ISSUER: idp.issuer,
      INFERD_OIDC_CLIENT_ID: "inferd",
      INFERD_OIDC_CLIENT_SECRET: SECRET,
    });
    idp.setClient({ client_id: "inferd", client_secret: SECRET, redirect_uris: [`${sso.url}/auth/oidc/callback`] });
  });
  afterAll(async () => {
    await sso?.close();
    await idp?.stop();
  });

  /** GET without following redirects. */
  const get = (url: string | URL, headers: Record<string, string> = {}) => fetch(url, { redirect: "manual", headers });

  /** Starts a sign-in as a browser would: the provider URL and the cookie inferd set (`name=value`, or "" when none). */
  async function start(returnTo?: string, headers: Record<string, string> = {}): Promise<{ url: URL; cookie: string }> {
    const r = await get(
      `${sso.url}/auth/oidc/start${returnTo === undefined ? "" : `?return_to=${encodeURIComponent(returnTo)}`}`,
      headers,
    );
    expect(r.status).toBe(302);
    const set = r.headers.getSetCookie().find((c) => c.startsWith("inferd_oidc="));
    return { url: new URL(r.headers.get("location")!, sso.url), cookie: set?.split(";")[0] ?? "" };
  }

  /** Opens the provider's callback URL in a browser holding `cookie`: where it lands and the session it got. */
  async function callback(
    url: URL,
    cookie: string,
  ): Promise<{ location: string; session: string | undefined; error: string | null }> {
    const r = await get(url, cookie ? { cookie } : {});
    expect(r.status).toBe(302);
    const location = r.headers.get("location")!;
    const session = r.headers
      .getSetCookie()
      .find((c) => c.startsWith("inferd_session=") && !c.startsWith("inferd_session=;"));
    return {
      location,
      session: session?.split(";")[0],
      error: new URL(location, "http://x").searchParams.get("error"),
    };
  }

  /** A whole sign-in of `login` in one browser. */
  async function signInSso(login: string, returnTo?: string) {
    const s = await start(returnTo);
    return callback(await idp.signIn(s.url.href, login), s.cookie);
  }

  const userOf = async (email: string) =>
    ((await (await sso.admin("/admin/users")).json()) as { email: string; source: string; id: string }[]).find(
      (u) => u.email === email,
    );

  test("item 6: a provider account without email_verified does not take over the local admin of that e-mail", async () => {
    expect(
      (await sso.admin("/admin/users", { body: { email: "boss@example.com", role: "admin", password: PASSWORD } }))
        .status,
    ).toBe(201);
    const r = await signInSso("mallory");
    expect(r.session).toBeUndefined();
    expect(r.error).toContain("verified");
    expect((await userOf("boss@example.com"))?.source).toBe("local");
    // The admin's password still works, and a verified e-mail still links as before.
    expect((await signIn(sso, "boss@example.com", PASSWORD)).r.status).toBe(200);
    expect(
      (await sso.admin("/admin/users", { body: { email: "chief@example.com", role: "operator", password: PASSWORD } }))
        .status,
    ).toBe(201);
    const linked = await signInSso("verified-boss");
    expect(linked.error).toBeNull();
    expect(linked.session).toBeTruthy();
    expect((await userOf("chief@example.com"))?.source).toBe("oidc");
  });

  test("item 7: the attacker's callback URL opened by a victim's browser (no cookie, or one of its own sign-in) signs nobody in", async () => {
    // The attacker starts a sign-in and completes it at the provider, keeping the callback URL.
    const attacker = await start();
    const back = await idp.signIn(attacker.url.href, "alice");
    // A victim's browser that never started it.
    const fresh = await callback(back, "");
    expect(fresh.session).toBeUndefined();
    expect(fresh.location).toStartWith("/signin?error=");
    expect(fresh.error).toContain("not started in this browser");
    expect(attacker.cookie).toMatch(/^inferd_oidc=./);
    // A victim's browser in the middle of its own sign-in.
    const victim = await start();
    const mixed = await callback(back, victim.cookie);
    expect(mixed.session).toBeUndefined();
    expect(mixed.error).toContain("not started in this browser");
    // An altered cookie is no better.
    const forged = await callback(back, `${attacker.cookie.slice(0, -3)}abc`);
    expect(forged.session).toBeUndefined();
    // The browser that started it signs in.
    const own = await callback(back, attacker.cookie);
    expect(own.error).toBeNull();
    expect(own.session).toBeTruthy();
  });

  test("item 17: X-Forwarded-Host from a client does not set the redirect_uri; the Host does", async () => {
    const { url } = await start(undefined, { "x-forwarded-host": "evil.example" });
    expect(url.searchParams.get("redirect_uri")).toBe(`${sso.url}/auth/oidc/callback`);
  });

  test("item 17: a non-ASCII return_to signs in and lands there (percent-encoded)", async () => {
    const r = await signInSso("alice", "/workloads/ü?q=日本");
    expect(r.error).toBeNull();
    expect(r.session).toBeTruthy();
    expect(r.location).toBe("/workloads/%C3%BC?q=%E6%97%A5%E6%9C%AC");
  });

  test("item 8: 10,000 anonymous starts store nothing and a legitimate sign-in still works", async () => {
    /** Rows in every table of the store. */
    const rowsInStore = () => {
      const sqlite = sqliteOf(sso.store.db);
      const tables = sqlite.query("SELECT name FROM sqlite_master WHERE type = 'table'").all() as { name: string }[];
      return tables.reduce(
        (n, t) => n + (sqlite.query(`SELECT count(*) AS c FROM "${t.name}"`).get() as { c: number }).c,
        0,
      );
    };
    const before = rowsInStore();
    let next = 0;
    const worker = async () => {
      while (next < 10_000) {
        next++;
        expect((await get(`${sso.url}/auth/oidc/start`)).status).toBe(302);
      }
    };
    await Promise.all(Array.from({ length: 32 }, worker));
    // Nothing is kept per anonymous start (before, each one stored a pending sign-in).
    expect(rowsInStore() - before).toBeLessThan(10);
    const legit = await start("/workloads");
    expect(legit.url.searchParams.get("error")).toBeNull();
    expect(legit.url.origin).toBe(idp.issuer);
    const r = await callback(await idp.signIn(legit.url.href, "alice"), legit.cookie);
    expect(r.error).toBeNull();
    expect(r.location).toBe("/workloads");
    expect(r.session).toBeTruthy();
  }, 300_000);
});

describe("a sign-in body that trickles in (item 18)", () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(() => t.close());

  test("is cut off within about 10 s of the whole body: 408 request_timeout in the error shape, connection closed", async () => {
    const port = new URL(t.url).port;
    const sock = connect(Number(port), "127.0.0.1");
    let answer = "";
    const began = Date.now();
    const closed = new Promise<number>((resolve) => sock.on("close", () => resolve(Date.now() - began)));
    sock.on("data", (d) => (answer += d));
    sock.on("error", () => {});
    sock.write(
      `POST /admin/session HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{"email":`,
    );
    // One byte every half second: never idle long enough for an idle timeout.
    const drip = setInterval(() => sock.writable && sock.write(" "), 500);
    // Without a bound it would go on for 100 s (200 bytes); give up well before, saying so.
    const tooLong = new Promise<number>((resolve) => setTimeout(() => resolve(-1), 30_000));
    const after = await Promise.race([closed, tooLong]);
    clearInterval(drip);
    sock.destroy();
    expect(after).toBeGreaterThan(0);
    expect(after).toBeLessThan(20_000);
    expect(answer).toStartWith("HTTP/1.1 408");
    const body = JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4));
    expect(body.error.code).toBe("request_timeout");
  }, 60_000);
});
