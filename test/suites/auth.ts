import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { seedProject, startTestServer, type TestServer } from "../helpers/server";
import type { Engine } from "../helpers/postgres";

/**
 * The whole auth matrix: each credential × each plane × own/other project × scope, with the
 * contract's status codes and 403 codes.
 */
export function authSuite(engine: Engine): void {
  let s: TestServer;
  const tokens: Record<string, string | undefined> = {};
  let wlA: { id: string; slug: string };

  beforeAll(async () => {
    s = await startTestServer({}, { engine });
    const a = await seedProject(s, "Alpha", "alpha");
    const b = await seedProject(s, "Beta", "beta");
    const mk = async (project: string, body: unknown) =>
      (await (await s.admin(`/admin/projects/${project}/keys`, { body })).json()).secret as string;
    wlA = await (
      await s.call("/api/projects/alpha/workloads", a.sdk, {
        body: { name: "chat", backend: "ollama", model_name: "llama3" },
      })
    ).json();
    await s.call("/api/projects/alpha/workloads", a.sdk, {
      body: { name: "other", backend: "ollama", model_name: "llama3" },
    });
    await s.call("/api/projects/beta/workloads", b.sdk, {
      body: { name: "chat", backend: "ollama", model_name: "llama3" },
    });
    Object.assign(tokens, {
      none: undefined,
      garbage: "not-a-token",
      unknownSdk: "ik_sdk_" + "A".repeat(43),
      admin: s.adminToken,
      sdkA: a.sdk,
      sdkB: b.sdk,
      sdkA_scoped_chat: await mk("alpha", { name: "s", type: "sdk", scope: "endpoints", endpoints: ["alpha/chat"] }),
      sdkA_scoped_other: await mk("alpha", { name: "s", type: "sdk", scope: "endpoints", endpoints: ["alpha/other"] }),
      liveA: a.live,
      liveB: b.live,
      liveA_scoped_chat: await mk("alpha", { name: "l", type: "live", scope: "endpoints", endpoints: ["alpha/chat"] }),
      liveA_scoped_other: await mk("alpha", {
        name: "l",
        type: "live",
        scope: "endpoints",
        endpoints: ["alpha/other"],
      }),
    });
    const revoked = await (await s.admin(`/admin/projects/alpha/keys`, { body: { name: "r", type: "live" } })).json();
    await s.admin(`/admin/keys/${revoked.id}`, { method: "DELETE" });
    tokens.revokedLiveA = revoked.secret;
  });
  afterAll(() => s.close());

  type Row = [token: string, status: number, code: string];
  const planes: Record<string, { path: () => string; method?: string; body?: unknown; rows: Row[] }> = {
    "control: list alpha workloads": {
      path: () => "/api/projects/alpha/workloads",
      rows: [
        ["none", 401, "missing_token"],
        ["garbage", 401, "invalid_token"],
        ["unknownSdk", 401, "invalid_token"],
        ["admin", 403, "wrong_credential_type"],
        ["sdkA", 200, ""],
        ["sdkB", 403, "project_scope_mismatch"],
        ["sdkA_scoped_chat", 200, ""],
        ["liveA", 403, "wrong_credential_type"],
        ["liveB", 403, "wrong_credential_type"],
        ["revokedLiveA", 401, "invalid_token"],
      ],
    },
    "control: create in alpha": {
      path: () => "/api/projects/alpha/workloads",
      method: "POST",
      body: { name: "made", backend: "ollama", model_name: "m" },
      rows: [
        ["none", 401, "missing_token"],
        ["sdkB", 403, "project_scope_mismatch"],
        ["sdkA_scoped_chat", 403, "scope_insufficient"],
        ["liveA", 403, "wrong_credential_type"],
        ["sdkA", 201, ""],
      ],
    },
    "control: patch alpha/chat by id": {
      path: () => `/api/workloads/${wlA.id}`,
      method: "PATCH",
      body: { description: "touched" },
      rows: [
        ["none", 401, "missing_token"],
        ["admin", 403, "wrong_credential_type"],
        ["liveA", 403, "wrong_credential_type"],
        ["sdkB", 403, "project_scope_mismatch"],
        ["sdkA_scoped_other", 403, "scope_insufficient"],
        ["sdkA_scoped_chat", 200, ""],
        ["sdkA", 200, ""],
      ],
    },
    "data: alpha/chat models": {
      path: () => "/endpoint/alpha/chat/v1/models",
      rows: [
        ["none", 401, "missing_token"],
        ["garbage", 401, "invalid_token"],
        ["admin", 403, "wrong_credential_type"],
        ["sdkA", 403, "wrong_credential_type"],
        ["sdkB", 403, "wrong_credential_type"],
        ["liveB", 403, "project_scope_mismatch"],
        ["liveA_scoped_other", 403, "scope_insufficient"],
        ["liveA_scoped_chat", 200, ""],
        ["liveA", 200, ""],
        ["revokedLiveA", 401, "invalid_token"],
      ],
    },
    "data: beta/chat models": {
      path: () => "/endpoint/beta/chat/v1/models",
      rows: [
        ["liveA", 403, "project_scope_mismatch"],
        ["liveB", 200, ""],
      ],
    },
    "data: alpha/missing": {
      path: () => "/endpoint/alpha/missing/v1/models",
      rows: [
        ["liveA", 404, "not_found"],
        ["liveA_scoped_chat", 403, "scope_insufficient"],
      ],
    },
    "admin: list projects": {
      path: () => "/admin/projects",
      rows: [
        ["none", 401, "missing_token"],
        ["garbage", 401, "invalid_token"],
        ["sdkA", 403, "wrong_credential_type"],
        ["liveA", 403, "wrong_credential_type"],
        ["admin", 200, ""],
      ],
    },
  };

  describe("auth matrix", () => {
    for (const [name, plane] of Object.entries(planes)) {
      test.each(plane.rows)(`${name}: %s → %d %s`, async (who, status, code) => {
        const r = await s.call(plane.path(), tokens[who], { method: plane.method, body: plane.body });
        expect(r.status).toBe(status);
        const body = r.status === 204 ? null : await r.json();
        if (code) {
          expect(body.error.code).toBe(code);
          expect(typeof body.error.message).toBe("string");
        }
      });
    }

    test("the data plane names the served model on /v1/models", async () => {
      const r = await s.call("/endpoint/alpha/chat/v1/models", tokens.liveA);
      expect(await r.json()).toMatchObject({ object: "list", data: [{ id: "llama3", object: "model" }] });
    });

    test("an endpoint-scoped sdk key lists only its workloads", async () => {
      const list = await (await s.call("/api/projects/alpha/workloads", tokens.sdkA_scoped_chat)).json();
      expect(list.map((w: { slug: string }) => w.slug)).toEqual(["chat"]);
    });

    test("auth is checked before the body is read: no credential + malformed JSON is still 401", async () => {
      const r = await s.call("/api/projects/alpha/workloads", undefined, {
        raw: "{nope",
        headers: { "content-type": "application/json" },
        method: "POST",
      });
      expect(r.status).toBe(401);
    });

    test("usage is recorded per key: requests and last use", async () => {
      const before = (await (await s.admin("/admin/projects/beta/keys")).json()).find(
        (k: { name: string }) => k.name === "live",
      );
      await s.call("/endpoint/beta/chat/v1/models", tokens.liveB);
      await s.call("/endpoint/beta/chat/v1/models", tokens.liveB);
      const after = (await (await s.admin("/admin/projects/beta/keys")).json()).find(
        (k: { name: string }) => k.name === "live",
      );
      expect(after.usage.requests).toBe(before.usage.requests + 2);
      expect(after.usage.last_used_at).not.toBeNull();
    });
  });

  describe("dashboard session", () => {
    test("sign-in sets an HttpOnly SameSite=Strict cookie that authorizes the admin API; sign-out ends it", async () => {
      const bad = await s.call("/admin/session", undefined, { body: { token: "wrong" } });
      expect(bad.status).toBe(401);
      const r = await s.call("/admin/session", undefined, { body: { token: s.adminToken } });
      expect(r.status).toBe(200);
      const cookie = r.headers.get("set-cookie")!;
      expect(cookie).toContain("HttpOnly");
      expect(cookie).toContain("SameSite=Strict");
      const pair = cookie.split(";")[0];
      const withCookie = (init: { method?: string; body?: unknown; headers?: Record<string, string> } = {}) =>
        s.call("/admin/projects", undefined, { ...init, headers: { cookie: pair, ...(init.headers ?? {}) } });
      expect((await withCookie()).status).toBe(200);
      const crossSite = await withCookie({ body: { name: "evil" }, headers: { origin: "http://evil.example" } });
      expect(crossSite.status).toBe(403);
      expect((await crossSite.json()).error.code).toBe("csrf_rejected");
      const sameSite = await withCookie({ body: { name: "from dashboard" }, headers: { origin: s.url } });
      expect(sameSite.status).toBe(201);
      const out = await s.call("/admin/session", undefined, { method: "DELETE", headers: { cookie: pair } });
      expect(out.status).toBe(204);
      expect((await withCookie()).status).toBe(401);
    });
  });
}
