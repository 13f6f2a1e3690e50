import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "../helpers/server";
import type { Engine } from "../helpers/postgres";

const PASSWORD = "correct horse battery";
const wl = (name: string) => ({
  name,
  backend: "vllm",
  model_name: `org/${name}`,
  config: { command: `vllm serve org/${name}` },
});
const errorOf = async (r: Response) =>
  ((await r.json()) as { error: { code: string; message: string; field?: string } }).error;

/** A signed-in user: calls /admin with their session cookie (and our own origin, as the dashboard does). */
interface Person {
  cookie: string;
  call(path: string, init?: { method?: string; body?: unknown }): Promise<Response>;
}

/** Signs in to `srv` with an e-mail and password; the raw answer too. */
async function signIn(srv: TestServer, email: string, password = PASSWORD): Promise<{ r: Response; person: Person }> {
  const r = await srv.call("/admin/session", undefined, {
    body: { email, password },
    headers: { "user-agent": "users-test browser" },
  });
  const cookie = (r.headers.get("set-cookie") ?? "").split(";")[0];
  const call = (path: string, init: { method?: string; body?: unknown } = {}) =>
    srv.call(path, undefined, { ...init, headers: { cookie, origin: srv.url } });
  return { r, person: { cookie, call } };
}

/**
 * Users, roles and sessions through the API of a real server: admins, operators and viewers sign in
 * with a password and see and change only what their role allows in their projects; a demoted or
 * removed user loses access on the next request; every change names its user in the audit log.
 */
export function usersSuite(engine: Engine): void {
  let s: TestServer;
  let demo: { id: string; slug: string };
  let other: { id: string; slug: string };
  let demoWorkload: { id: string };
  let otherWorkload: { id: string };

  /** Adds a user through the API with the admin token and signs them in. */
  async function person(email: string, role: string, projects: string[]): Promise<Person & { id: string }> {
    const made = await s.admin("/admin/users", { body: { email, role, projects, password: PASSWORD } });
    expect(made.status).toBe(201);
    const { id } = await made.json();
    const { r, person } = await signIn(s, email);
    expect(r.status).toBe(200);
    return { ...person, id };
  }

  beforeAll(async () => {
    s = await startTestServer({}, { engine });
    demo = await (await s.admin("/admin/projects", { body: { name: "Demo", slug: "demo" } })).json();
    other = await (await s.admin("/admin/projects", { body: { name: "Other", slug: "other" } })).json();
    demoWorkload = await (await s.admin("/admin/projects/demo/workloads", { body: wl("chat") })).json();
    otherWorkload = await (await s.admin("/admin/projects/other/workloads", { body: wl("secret") })).json();
  });
  afterAll(() => s.close());

  describe("users API", () => {
    test("an admin adds users of each role; e-mails are lower-cased and unique, projects must exist, passwords are long", async () => {
      const r = await s.admin("/admin/users", {
        body: { email: "Ada@Example.COM", name: "Ada", role: "operator", projects: ["demo"], password: PASSWORD },
      });
      expect(r.status).toBe(201);
      const ada = await r.json();
      expect(ada).toMatchObject({
        email: "ada@example.com",
        name: "Ada",
        role: "operator",
        projects: ["demo"],
        source: "local",
        last_sign_in_at: null,
        sessions: 0,
      });
      expect(ada.id).toMatch(/^usr_/);
      expect(JSON.stringify(ada)).not.toContain("password");
      const taken = await s.admin("/admin/users", { body: { email: "ada@example.com", role: "viewer" } });
      expect(taken.status).toBe(409);
      expect(await errorOf(taken)).toMatchObject({ code: "email_taken", field: "email" });
      const unknown = await s.admin("/admin/users", {
        body: { email: "bob@example.com", role: "viewer", projects: ["demo", "nope"] },
      });
      expect(unknown.status).toBe(400);
      expect(await errorOf(unknown)).toMatchObject({
        field: "projects",
        message: 'projects: there is no project "nope"',
      });
      const short = await s.admin("/admin/users", {
        body: { email: "bob@example.com", role: "viewer", password: "short" },
      });
      expect(short.status).toBe(400);
      expect((await errorOf(short)).field).toBe("password");
      const badRole = await s.admin("/admin/users", { body: { email: "bob@example.com", role: "owner" } });
      expect((await errorOf(badRole)).field).toBe("role");
      const list = (await (await s.admin("/admin/users")).json()) as { email: string }[];
      expect(list.map((u) => u.email)).toContain("ada@example.com");
      expect((await s.admin(`/admin/users/${ada.id}`, { method: "DELETE" })).status).toBe(204);
      expect((await s.admin(`/admin/users/${ada.id}`)).status).toBe(404);
    });

    test("a wrong e-mail and a wrong password get the same 401; a right one opens a session the user can see", async () => {
      const carol = await person("carol@example.com", "viewer", ["demo"]);
      const wrongPassword = await signIn(s, "carol@example.com", "not the password!");
      const wrongEmail = await signIn(s, "nobody@example.com", PASSWORD);
      expect(wrongPassword.r.status).toBe(401);
      expect(wrongEmail.r.status).toBe(401);
      const [a, b] = [await errorOf(wrongPassword.r), await errorOf(wrongEmail.r)];
      expect(a).toEqual(b);
      expect(a.code).toBe("invalid_credentials");
      const cookie = (await signIn(s, "CAROL@example.com")).r.headers.get("set-cookie")!;
      expect(cookie).toContain("HttpOnly");
      const me = await (await carol.call("/admin/me")).json();
      expect(me).toMatchObject({
        kind: "user",
        role: "viewer",
        user: { email: "carol@example.com", projects: ["demo"] },
        projects: [{ id: demo.id, slug: "demo", name: "Demo" }],
      });
      expect(me.session_id).toMatch(/^ses_/);
      expect(me.user.last_sign_in_at).not.toBeNull();
      const sessions = (await (await carol.call(`/admin/users/${carol.id}/sessions`)).json()) as {
        id: string;
        method: string;
        user_agent: string;
        current: boolean;
      }[];
      expect(sessions).toHaveLength(2);
      expect(sessions.filter((x) => x.current).map((x) => x.id)).toEqual([me.session_id]);
      expect(sessions.every((x) => x.method === "password" && x.user_agent === "users-test browser")).toBe(true);
      // Ending the other session leaves this one; ending all ends this one too.
      const otherSession = sessions.find((x) => !x.current)!;
      expect(
        (await carol.call(`/admin/users/${carol.id}/sessions/${otherSession.id}`, { method: "DELETE" })).status,
      ).toBe(204);
      expect(
        (await carol.call(`/admin/users/${carol.id}/sessions/${otherSession.id}`, { method: "DELETE" })).status,
      ).toBe(404);
      expect((await (await s.admin(`/admin/users/${carol.id}`)).json()).sessions).toBe(1);
      expect(await (await carol.call(`/admin/users/${carol.id}/sessions`, { method: "DELETE" })).json()).toEqual({
        ended: 1,
      });
      expect((await carol.call("/admin/me")).status).toBe(401);
    });

    test("a new password ends the user's other sessions; the one that changed it stays", async () => {
      const dora = await person("dora@example.com", "viewer", ["demo"]);
      const elsewhere = (await signIn(s, "dora@example.com")).person;
      expect((await elsewhere.call("/admin/me")).status).toBe(200);
      const changed = await dora.call(`/admin/users/${dora.id}`, {
        method: "PATCH",
        body: { password: "a brand new passphrase", current_password: PASSWORD },
      });
      expect(changed.status).toBe(200);
      expect((await dora.call("/admin/me")).status).toBe(200);
      expect((await elsewhere.call("/admin/me")).status).toBe(401);
      expect((await signIn(s, "dora@example.com")).r.status).toBe(401);
      expect((await signIn(s, "dora@example.com", "a brand new passphrase")).r.status).toBe(200);
      // An admin resetting it (with the admin token) ends every session of that user.
      expect(
        (await s.admin(`/admin/users/${dora.id}`, { method: "PATCH", body: { password: "another new passphrase" } }))
          .status,
      ).toBe(200);
      expect((await dora.call("/admin/me")).status).toBe(401);
    });

    test("a viewer sees only their projects, reads them, and is refused every change", async () => {
      const viewer = await person("vera@example.com", "viewer", ["demo"]);
      const projects = (await (await viewer.call("/admin/projects")).json()) as { slug: string }[];
      expect(projects.map((p) => p.slug)).toEqual(["demo"]);
      expect((await viewer.call("/admin/projects/demo")).status).toBe(200);
      expect((await viewer.call(`/admin/workloads/${demoWorkload.id}`)).status).toBe(200);
      expect((await viewer.call("/admin/projects/demo/keys")).status).toBe(200);
      expect((await viewer.call("/admin/workers")).status).toBe(200);
      expect((await viewer.call("/admin/info")).status).toBe(200);
      for (const path of [
        "/admin/projects/other",
        `/admin/workloads/${otherWorkload.id}`,
        "/admin/projects/other/workloads",
        `/admin/workloads/${otherWorkload.id}/jobs`,
      ]) {
        const r = await viewer.call(path);
        expect(`${path} ${r.status}`).toBe(`${path} 404`);
        expect((await errorOf(r)).code).toBe("not_found");
      }
      const key = await viewer.call("/admin/projects/demo/keys", { body: { name: "mine", type: "live" } });
      expect(key.status).toBe(403);
      expect(await errorOf(key)).toEqual({
        code: "forbidden_role",
        message: 'your role (viewer) can only look; an operator or admin of project "demo" can change this',
      });
      const stop = await viewer.call(`/admin/workloads/${demoWorkload.id}/stop`, { method: "POST" });
      expect((await errorOf(stop)).code).toBe("forbidden_role");
      const chat = await viewer.call(`/admin/workloads/${demoWorkload.id}/chat`, {
        body: { messages: [{ role: "user", content: "hi" }] },
      });
      expect(chat.status).toBe(403);
      // Another project's workload stays not found even for a change.
      expect((await viewer.call(`/admin/workloads/${otherWorkload.id}`, { method: "DELETE" })).status).toBe(404);
      for (const [method, path] of [
        ["GET", "/admin/users"],
        ["PATCH", "/admin/settings"],
        ["DELETE", "/admin/sessions"],
        ["GET", "/metrics"],
        ["GET", "/admin/no-such-route"],
      ]) {
        const r = await viewer.call(path, { method, ...(method === "PATCH" ? { body: {} } : {}) });
        expect(`${method} ${path} ${r.status}`).toBe(`${method} ${path} 403`);
        expect((await errorOf(r)).code).toBe("forbidden_role");
      }
      const series = (await (await viewer.call("/admin/metrics/series")).json()) as { workloads: { id: string }[] };
      expect(series.workloads.map((w) => w.id)).toEqual([demoWorkload.id]);
      expect((await viewer.call(`/admin/metrics/series?workload=${otherWorkload.id}`)).status).toBe(404);
      // A user may rename themself but not change their own role.
      expect(
        (await (await viewer.call(`/admin/users/${viewer.id}`, { method: "PATCH", body: { name: "Vera V." } })).json())
          .name,
      ).toBe("Vera V.");
      expect(
        (await errorOf(await viewer.call(`/admin/users/${viewer.id}`, { method: "PATCH", body: { role: "admin" } })))
          .code,
      ).toBe("forbidden_role");
      expect((await viewer.call("/admin/users/usr_someoneelse")).status).toBe(403);
    });

    test("an operator makes a key in their project but creates no project; demoted, the next change is refused; removed, the session is gone", async () => {
      const op = await person("otto@example.com", "operator", ["demo"]);
      const key = await op.call("/admin/projects/demo/keys", { body: { name: "otto's key", type: "live" } });
      expect(key.status).toBe(201);
      const made = await key.json();
      expect((await op.call(`/admin/keys/${made.id}`, { method: "DELETE" })).status).toBe(200);
      expect((await op.call("/admin/projects/other/keys", { body: { name: "x", type: "live" } })).status).toBe(404);
      const project = await op.call("/admin/projects", { body: { name: "Mine" } });
      expect(project.status).toBe(403);
      expect(await errorOf(project)).toEqual({
        code: "forbidden_role",
        message: "your role (operator) cannot create projects; an admin can",
      });
      expect((await op.call("/admin/projects/demo", { method: "DELETE" })).status).toBe(403);
      // Workers and join tokens are the admin's (issue 32): an operator is a tenant of the machine.
      expect((await op.call("/admin/workers/join-tokens")).status).toBe(403);

      const demoted = await s.admin(`/admin/users/${op.id}`, { method: "PATCH", body: { role: "viewer" } });
      expect((await demoted.json()).role).toBe("viewer");
      const after = await op.call("/admin/projects/demo/keys", { body: { name: "again", type: "live" } });
      expect(after.status).toBe(403);
      expect((await errorOf(after)).message).toContain("your role (viewer)");
      // Membership changes apply at once too.
      await s.admin(`/admin/users/${op.id}`, { method: "PATCH", body: { projects: ["other"] } });
      expect((await op.call("/admin/projects/demo")).status).toBe(404);
      expect((await op.call("/admin/projects/other")).status).toBe(200);

      expect((await s.admin(`/admin/users/${op.id}`, { method: "DELETE" })).status).toBe(204);
      const gone = await op.call("/admin/projects");
      expect(gone.status).toBe(401);
      expect((await errorOf(gone)).code).toBe("invalid_session");
    });

    test("the audit log names the user, carries the project, and a member sees their projects' entries and their own", async () => {
      const op = await person("olga@example.com", "operator", ["demo"]);
      await op.call("/admin/projects/demo/keys", { body: { name: "olga's key", type: "sdk" } });
      await s.admin("/admin/projects/other/keys", { body: { name: "hidden key", type: "sdk" } });
      const all = (await (await s.admin("/admin/audit?action=key.create")).json()).entries as {
        actor: { type: string; id: string; label: string };
        target: { label: string };
        project_id: string | null;
      }[];
      const olgas = all.find((e) => e.target.label.startsWith("olga's key"))!;
      expect(olgas.actor).toEqual({ type: "user", id: op.id, label: "olga@example.com" });
      expect(olgas.project_id).toBe(demo.id);
      expect(all.find((e) => e.target.label.startsWith("hidden key"))!.project_id).toBe(other.id);
      const byProject = (await (await s.admin("/admin/audit?project=other")).json()).entries as {
        project_id: string;
      }[];
      expect(byProject.length).toBeGreaterThan(0);
      expect(byProject.every((e) => e.project_id === other.id)).toBe(true);
      const seen = (await (await op.call("/admin/audit?limit=1000")).json()).entries as {
        action: string;
        actor: { id: string | null };
        project_id: string | null;
      }[];
      expect(seen.every((e) => e.project_id === demo.id || e.actor.id === op.id)).toBe(true);
      expect(seen.some((e) => e.action === "session.create" && e.actor.id === op.id)).toBe(true);
      expect(seen.some((e) => e.project_id === other.id)).toBe(false);
      // User changes are audited with a diff, never a password.
      await s.admin(`/admin/users/${op.id}`, {
        method: "PATCH",
        body: { role: "viewer", password: "another long password" },
      });
      const update = (await (await s.admin(`/admin/audit?action=user.update&target=${op.id}`)).json()).entries[0];
      expect(update.diff).toEqual({ role: { from: "operator", to: "viewer" }, password: "(hidden)" });
      const text = JSON.stringify((await (await s.admin("/admin/audit?action=user&limit=1000")).json()).entries);
      expect(text).not.toContain(PASSWORD);
      expect(text).not.toContain("argon2");
      // A deleted workload keeps its project in the log.
      const temp = await (await s.admin("/admin/projects/demo/workloads", { body: wl("temp") })).json();
      await s.admin(`/admin/workloads/${temp.id}`, { method: "DELETE" });
      const del = (await (await s.admin(`/admin/audit?action=workload.delete&target=${temp.id}`)).json()).entries[0];
      expect(del.project_id).toBe(demo.id);
    });

    test("the admin token and its sessions keep working, as admin of everything; sign-in methods are open", async () => {
      const me = await (await s.admin("/admin/me")).json();
      expect(me).toEqual({ kind: "admin_token", role: "admin", user: null, projects: "all", session_id: null });
      const r = await s.call("/admin/session", undefined, { body: { token: s.adminToken } });
      const cookie = r.headers.get("set-cookie")!.split(";")[0];
      const viaSession = await (await s.call("/admin/me", undefined, { headers: { cookie } })).json();
      expect(viaSession).toMatchObject({ kind: "admin_token", role: "admin", projects: "all" });
      expect(viaSession.session_id).toMatch(/^ses_/);
      expect((await s.call("/admin/projects/other", undefined, { headers: { cookie } })).status).toBe(200);
      expect(await (await s.call("/admin/session/methods", undefined)).json()).toEqual({ password: true, oidc: null });
      // An admin user sees every project.
      const boss = await person("boss@example.com", "admin", []);
      expect(((await (await boss.call("/admin/projects")).json()) as unknown[]).length).toBeGreaterThanOrEqual(2);
      expect((await boss.call("/admin/projects", { body: { name: "Boss Project" } })).status).toBe(201);
    });
  });

  describe("sign-in rate limit", () => {
    let t: TestServer;
    beforeAll(async () => {
      t = await startTestServer({}, { engine });
      await t.admin("/admin/users", { body: { email: "rita@example.com", role: "viewer", password: PASSWORD } });
    });
    afterAll(() => t.close());

    test("after 5 failures the next try is 429 too_many_attempts with retry-after, even with the right password", async () => {
      for (let i = 0; i < 5; i++)
        expect((await signIn(t, "rita@example.com", `wrong password ${i}`)).r.status).toBe(401);
      const { r } = await signIn(t, "rita@example.com", PASSWORD);
      expect(r.status).toBe(429);
      expect((await errorOf(r)).code).toBe("too_many_attempts");
      const wait = Number(r.headers.get("retry-after"));
      expect(wait).toBeGreaterThan(800);
      expect(wait).toBeLessThanOrEqual(900);
      // The same address is refused for another e-mail too; the admin token still signs in.
      expect((await signIn(t, "someone@example.com", PASSWORD)).r.status).toBe(429);
      expect((await t.call("/admin/session", undefined, { body: { token: t.adminToken } })).status).toBe(200);
      const denied = (await (await t.admin("/admin/audit?action=session.denied")).json()).entries;
      expect(denied.length).toBe(5);
      expect(JSON.stringify(denied)).not.toContain("wrong password");
    });

    test(`an e-mail's failures are kept in the store: ${engine === "postgres" ? "another host of the cluster" : "the server after a restart"} refuses the sixth; signing in starts the count again`, async () => {
      const first = await startTestServer({}, { engine });
      await first.admin("/admin/users", { body: { email: "sam@example.com", role: "viewer", password: PASSWORD } });
      for (let i = 0; i < 3; i++) expect((await signIn(first, "sam@example.com", `typo ${i}`)).r.status).toBe(401);
      expect((await signIn(first, "sam@example.com")).r.status).toBe(200);
      // Those three no longer count. Two more here (this host's count of the client address is now 5),
      // three on the other side: each a plain 401, then the sixth since the sign-in is refused there.
      for (let i = 0; i < 2; i++) expect((await signIn(first, "sam@example.com", `guess ${i}`)).r.status).toBe(401);
      let other: TestServer;
      if (engine === "postgres")
        other = await startTestServer({ INFERD_DATABASE_URL: first.storeEnv.INFERD_DATABASE_URL }, { engine });
      else {
        await first.stop();
        other = await startTestServer({ INFERD_DATA_DIR: first.dataDir });
      }
      try {
        for (let i = 2; i < 5; i++) expect((await signIn(other, "sam@example.com", `guess ${i}`)).r.status).toBe(401);
        const { r } = await signIn(other, "sam@example.com");
        expect(r.status).toBe(429);
        expect((await errorOf(r)).code).toBe("too_many_attempts");
        // Another e-mail from the same address is not refused there: that count is per host.
        expect((await signIn(other, "nobody@example.com", "not it")).r.status).toBe(401);
      } finally {
        await other.close();
        if (engine === "postgres") await first.close();
      }
    });
  });
}
