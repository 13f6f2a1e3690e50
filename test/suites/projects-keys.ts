import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "../helpers/server";
import type { Engine } from "../helpers/postgres";

/** Projects and keys through the admin API: create, slugs, validation, listing, revocation, on `engine`'s store. */
export function projectsKeysSuite(engine: Engine): void {
  const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer({}, { engine });
  });
  afterAll(() => s.close());

  describe("projects (admin API)", () => {
    test("create derives the slug from the name and answers 201 with the record", async () => {
      const r = await s.admin("/admin/projects", { body: { name: "Vision Team!" } });
      expect(r.status).toBe(201);
      const p = await r.json();
      expect(p).toMatchObject({ name: "Vision Team!", slug: "vision-team" });
      expect(p.id).toMatch(/^prj_/);
      expect(p.created_at).toMatch(ISO);
    });

    test("a name whose slug is taken gets a numbered slug; an explicit taken slug is 409", async () => {
      const again = await (await s.admin("/admin/projects", { body: { name: "vision team" } })).json();
      expect(again.slug).toBe("vision-team-2");
      const dup = await s.admin("/admin/projects", { body: { name: "x", slug: "vision-team" } });
      expect(dup.status).toBe(409);
      expect((await dup.json()).error.code).toBe("slug_taken");
    });

    test("the same slug created twice at once: one 201, the other a 409 (the store's unique key, not a 500)", async () => {
      for (let i = 0; i < 5; i++) {
        const both = await Promise.all(
          [0, 1].map(() => s.admin("/admin/projects", { body: { name: `twice ${i}`, slug: `twice-${i}` } })),
        );
        expect(both.map((r) => r.status).sort()).toEqual([201, 409]);
      }
    });

    test.each([
      [{ name: "" }, "name"],
      [{}, "name"],
      [{ name: "ok", slug: "Bad_Slug" }, "slug"],
      [{ name: "ok", slug: "-x" }, "slug"],
      [{ name: "ok", color: "red" }, "color"],
      [{ name: 5 }, "name"],
    ])("invalid body %j is a 400 naming %s", async (body, field) => {
      const r = await s.admin("/admin/projects", { body });
      expect(r.status).toBe(400);
      const e = (await r.json()).error;
      expect(e.code).toBe("validation_error");
      expect(e.field).toBe(field);
      expect(e.message).toContain(field);
    });

    test("list shows created projects; delete removes the project, its workloads and its keys", async () => {
      const p = await (await s.admin("/admin/projects", { body: { name: "Doomed" } })).json();
      const key = await (await s.admin(`/admin/projects/${p.slug}/keys`, { body: { name: "k", type: "sdk" } })).json();
      const wl = await s.call(`/api/projects/${p.slug}/workloads`, key.secret, {
        body: { name: "w", backend: "ollama", model_name: "llama3" },
      });
      expect(wl.status).toBe(201);
      const list = await (await s.admin("/admin/projects")).json();
      expect(list.map((x: { slug: string }) => x.slug)).toContain("doomed");
      expect((await s.admin(`/admin/projects/${p.slug}`, { method: "DELETE" })).status).toBe(200);
      expect((await s.admin(`/admin/projects/${p.slug}/workloads`)).status).toBe(404);
      expect((await s.call(`/api/projects/${p.slug}/workloads`, key.secret)).status).toBe(401);
      expect((await s.admin(`/admin/projects/${p.slug}`, { method: "DELETE" })).status).toBe(404);
    });
  });

  describe("keys (admin API)", () => {
    test("create returns the secret once, with the right prefix and 32+ random bytes; lists show only the prefix", async () => {
      const p = await (await s.admin("/admin/projects", { body: { name: "Keys" } })).json();
      const secrets: string[] = [];
      for (const type of ["sdk", "live"] as const) {
        const r = await s.admin(`/admin/projects/${p.slug}/keys`, { body: { name: `my ${type}`, type } });
        expect(r.status).toBe(201);
        const k = await r.json();
        secrets.push(k.secret);
        expect(k.secret.startsWith(`ik_${type}_`)).toBe(true);
        expect(Buffer.from(k.secret.slice(`ik_${type}_`.length), "base64url").length).toBeGreaterThanOrEqual(32);
        expect(k.secret.startsWith(k.prefix)).toBe(true);
        expect(k.prefix.length).toBeLessThan(k.secret.length - 20);
        expect(k).toMatchObject({ name: `my ${type}`, type, scope: "project", endpoints: [] });
        expect(k.created_at).toMatch(ISO);
      }
      const listText = await (await s.admin(`/admin/projects/${p.slug}/keys`)).text();
      const list = JSON.parse(listText);
      expect(list).toHaveLength(2);
      for (const k of list) expect(k.secret).toBeUndefined();
      for (const secret of secrets) expect(listText).not.toContain(secret);
      expect(list.map((k: { prefix: string }) => k.prefix).sort()).toEqual(
        secrets.map((x) => list.find((k: { prefix: string }) => x.startsWith(k.prefix)).prefix).sort(),
      );
    });

    test("endpoint-scoped keys: entries must be <project>/<workload> of the key's project", async () => {
      const p = await (await s.admin("/admin/projects", { body: { name: "Scoped" } })).json();
      const ok = await s.admin(`/admin/projects/${p.slug}/keys`, {
        body: { name: "k", type: "live", scope: "endpoints", endpoints: ["scoped/a", "scoped/b"] },
      });
      expect(ok.status).toBe(201);
      expect((await ok.json()).endpoints).toEqual(["scoped/a", "scoped/b"]);
      const cases: [unknown, string][] = [
        [{ name: "k", type: "live", scope: "endpoints" }, "endpoints"],
        [{ name: "k", type: "live", scope: "endpoints", endpoints: ["other/a"] }, "endpoints.0"],
        [{ name: "k", type: "live", scope: "endpoints", endpoints: ["scoped/a", "nope"] }, "endpoints.1"],
        [{ name: "k", type: "live", scope: "project", endpoints: ["scoped/a"] }, "endpoints"],
        [{ name: "k", type: "admin" }, "type"],
      ];
      for (const [body, field] of cases) {
        const r = await s.admin(`/admin/projects/${p.slug}/keys`, { body });
        expect(r.status).toBe(400);
        expect((await r.json()).error.field).toBe(field);
      }
    });

    test("revocation takes effect on the next request, and the key stays listed with its usage", async () => {
      const p = await (await s.admin("/admin/projects", { body: { name: "Revoke" } })).json();
      const k = await (await s.admin(`/admin/projects/${p.slug}/keys`, { body: { name: "k", type: "sdk" } })).json();
      expect((await s.call(`/api/projects/${p.slug}/workloads`, k.secret)).status).toBe(200);
      expect((await s.call(`/api/projects/${p.slug}/workloads`, k.secret)).status).toBe(200);
      const revoked = await s.admin(`/admin/keys/${k.id}`, { method: "DELETE" });
      expect(revoked.status).toBe(200);
      expect((await revoked.json()).revoked_at).toMatch(ISO);
      const after = await s.call(`/api/projects/${p.slug}/workloads`, k.secret);
      expect(after.status).toBe(401);
      expect((await after.json()).error.code).toBe("invalid_token");
      const [listed] = await (await s.admin(`/admin/projects/${p.slug}/keys`)).json();
      expect(listed.usage.requests).toBe(2);
      expect(listed.usage.last_used_at).toMatch(ISO);
      expect(listed.revoked_at).toMatch(ISO);
      expect((await s.admin(`/admin/keys/key_doesnotexist`, { method: "DELETE" })).status).toBe(404);
    });
  });
}
