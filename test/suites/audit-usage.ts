import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { cleanup, runInferd } from "../helpers/proc";
import { startServing, type Serving } from "../helpers/serving";
import type { Engine } from "../helpers/postgres";

/**
 * The audit log and the usage export through the real server: one row per kind of change with its
 * actor (the admin token, a tenant's key, a dashboard session, the CLI) and a diff, no secret in any
 * row, filters; usage per key, project and workload and day matching what was sent, as JSON and CSV.
 */
export function auditUsageSuite(engine: Engine): void {
  let s: Serving;
  beforeAll(async () => {
    s = await startServing({ INFERD_ALLOW_PRIVATE_WEBHOOKS: "1", FAKE_LOAD_MS: "50" }, [], undefined, engine);
  });
  afterAll(async () => {
    await s.stop();
    await cleanup();
  });
  type Entry = {
    id: number;
    action: string;
    actor: { type: string; id: string | null; label: string };
    target: { type: string; id: string | null; label: string | null };
    diff: Record<string, unknown>;
  };
  const auditLog = async (query = "") =>
    (await (await s.admin(`/admin/audit?limit=1000${query}`)).json()).entries as Entry[];
  const json = async (r: Promise<Response>) => (await r).json();

  describe("the audit log", () => {
    const secrets: string[] = [];
    let tenantKey: { id: string; secret: string };
    let workloadId = "";

    beforeAll(async () => {
      const admin = (path: string, body?: unknown, method?: string) => s.admin(path, { body, method });
      await admin("/admin/projects", { name: "Audited", slug: "audited" });
      tenantKey = await json(admin("/admin/projects/audited/keys", { name: "tenant", type: "sdk" }));
      const live = await json(
        admin("/admin/projects/audited/keys", { name: "app", type: "live", limits: { rpm: 100 } }),
      );
      secrets.push(tenantKey.secret, live.secret, s.adminToken);
      await admin(`/admin/keys/${live.id}`, { limits: { rpm: 50 } }, "PATCH");
      await admin(`/admin/keys/${live.id}`, { limits: { tokens_per_day: 5000 } }, "PATCH");
      const created = await fetch(`${s.url}/api/projects/audited/workloads`, {
        method: "POST",
        headers: { authorization: `Bearer ${tenantKey.secret}`, "content-type": "application/json" },
        body: JSON.stringify({
          name: "tenant-w",
          backend: "vllm",
          model_name: "tw",
          config: { command: "vllm serve tw" },
        }),
      });
      workloadId = (await created.json()).id;
      await admin(`/admin/workloads/${workloadId}`, { description: "edited by the operator" }, "PATCH");
      await admin(`/admin/workloads/${workloadId}/endpoints`, { audio: false }, "PATCH");
      const hook = await json(admin(`/admin/workloads/${workloadId}/webhooks`, { url: "https://127.0.0.1:9/hook" }));
      secrets.push(hook.secret);
      await admin(`/admin/webhooks/${hook.id}`, undefined, "DELETE");
      const worker = await json(admin("/admin/workers", { name: "far-away" }));
      secrets.push(worker.join_token);
      await admin(`/admin/workers/${worker.id}`, { open_to: ["audited"] }, "PATCH");
      await admin(`/admin/workers/${worker.id}`, undefined, "DELETE");
      await admin(`/admin/workloads/${workloadId}/stop`, undefined, "POST");
      await admin(`/admin/workloads/${workloadId}/start`, undefined, "POST");
      const [local] = await json(admin("/admin/workers"));
      const placed = await json(
        admin(`/admin/workloads/${workloadId}/assignments`, { worker_id: local.id, concurrency: 3 }),
      );
      await admin(`/admin/assignments/${placed.id}`, undefined, "DELETE");
      const signIn = (token: string) =>
        fetch(`${s.url}/admin/session`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ token }),
        });
      await signIn("ik_admin_wrong");
      const cookie = (await signIn(s.adminToken)).headers.get("set-cookie")!.split(";")[0];
      await fetch(`${s.url}/admin/projects/audited/keys`, {
        method: "POST",
        headers: { cookie, origin: s.url, "content-type": "application/json" },
        body: JSON.stringify({ name: "from-the-dashboard", type: "live" }),
      });
      await fetch(`${s.url}/admin/sessions`, { method: "DELETE", headers: { cookie, origin: s.url } });
      const cli = await runInferd({
        args: [
          "key",
          "create",
          "--project",
          "audited",
          "--name",
          "from-cli",
          "--type",
          "live",
          "--rpm",
          "10",
          "--json",
          "--data-dir",
          s.dataDir,
        ],
        env: s.storeEnv,
      });
      secrets.push(JSON.parse(cli.stdout).secret);
      await admin(`/admin/keys/${live.id}`, undefined, "DELETE");
      await admin(`/admin/workloads/${workloadId}`, undefined, "DELETE");
    });

    test("every kind of change is there, with its actor and target", async () => {
      const entries = await auditLog();
      const actions = new Set(entries.map((e) => e.action));
      for (const a of [
        "project.create",
        "key.create",
        "key.limits",
        "key.revoke",
        "workload.create",
        "workload.update",
        "workload.endpoints",
        "workload.stop",
        "workload.start",
        "workload.delete",
        "webhook.create",
        "webhook.delete",
        "worker.create",
        "worker.update",
        "worker.delete",
        "assignment.create",
        "assignment.delete",
        "session.denied",
        "session.create",
        "session.end_all",
      ]) {
        expect(actions.has(a)).toBe(true);
      }
      const byAction = (a: string) => entries.filter((e) => e.action === a);
      expect(byAction("workload.create")[0]).toMatchObject({
        actor: { type: "key", id: tenantKey.id },
        target: { type: "workload", id: workloadId, label: "audited/tenant-w" },
      });
      expect(byAction("workload.update")[0]).toMatchObject({
        actor: { type: "admin", label: "admin token" },
        diff: { description: { from: "", to: "edited by the operator" } },
      });
      // Newest first: the quota change shows its numbers (a token count is not a secret).
      expect(byAction("key.limits")[0].diff).toEqual({ tokens_per_day: { from: null, to: 5000 } });
      expect(byAction("key.limits")[1].diff).toEqual({ rpm: { from: 100, to: 50 } });
      expect(byAction("workload.endpoints")[0].diff).toEqual({ audio: { from: true, to: false } });
      expect(byAction("key.create").map((e) => e.actor.type)).toEqual(
        expect.arrayContaining(["admin", "session", "cli"]),
      );
      expect(byAction("session.denied")[0].actor.type).toBe("anonymous");
    });

    test("no secret appears in any row", async () => {
      const all = JSON.stringify(await auditLog());
      for (const secret of secrets) expect(all).not.toContain(secret);
      expect(all).not.toContain("whsec_");
    });

    test("filters by actor, target, action and time", async () => {
      const tenant = await auditLog(`&actor=${tenantKey.id}`);
      expect(tenant.map((e) => e.action)).toEqual(["workload.create"]);
      const onWorkload = (await auditLog(`&target=${workloadId}`)).map((e) => e.action).reverse();
      expect(onWorkload).toEqual([
        "workload.create",
        "workload.update",
        "workload.endpoints",
        "workload.stop",
        "workload.start",
        "workload.delete",
      ]);
      expect((await auditLog("&action=key")).every((e) => e.action.startsWith("key."))).toBe(true);
      // The same on both stores: a prefix, case and all, with no wildcards (SQLite's LIKE ignores case, PostgreSQL's does not).
      for (const other of ["KEY", "k_y", "%"])
        expect(await auditLog(`&action=${encodeURIComponent(other)}`)).toEqual([]);
      expect(await auditLog(`&since=${new Date(Date.now() + 60_000).toISOString()}`)).toEqual([]);
    });

    test("pages of 3 with the before cursor list every entry once, in order, and refuse a bad cursor", async () => {
      const all = await auditLog();
      const paged: number[] = [];
      let before: number | null | undefined;
      do {
        const r = await s.admin(`/admin/audit?limit=3${before ? `&before=${before}` : ""}`);
        const page = (await r.json()) as { entries: { id: number }[]; next_before: number | null };
        paged.push(...page.entries.map((e) => e.id));
        before = page.next_before;
      } while (before);
      expect(paged).toEqual(all.map((e) => e.id));
      const bad = await s.admin("/admin/audit?before=yesterday");
      expect(bad.status).toBe(400);
      expect((await bad.json()).error).toMatchObject({ code: "validation_error", field: "before" });
    });
  });

  describe("the usage export", () => {
    test("per key, workload and project and day, as JSON and CSV, equal to what was sent", async () => {
      await s.admin("/admin/projects", { body: { name: "Usage", slug: "usage" } });
      const key = async (name: string) =>
        (await (await s.admin("/admin/projects/usage/keys", { body: { name, type: "live" } })).json()) as {
          id: string;
          secret: string;
        };
      const [a, b] = [await key("a"), await key("b")];
      const mk = async (name: string) =>
        (await (
          await s.admin("/admin/projects/usage/workloads", {
            body: {
              name,
              backend: "vllm",
              model_name: name,
              config: { command: `vllm serve ${name} --max-model-len 64` },
            },
          })
        ).json()) as { id: string; slug: string };
      const [w1, w2] = [await mk("u-one"), await mk("u-two")];
      await s.waitState(w1.id);
      await s.waitState(w2.id);
      const sent = {
        a: { requests: 0, errors: 0, input: 0, output: 0 },
        b: { requests: 0, errors: 0, input: 0, output: 0 },
      };
      const call = async (who: "a" | "b", w: string, content: string) => {
        const r = await fetch(`${s.url}/endpoint/usage/${w}/v1/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${(who === "a" ? a : b).secret}`, "content-type": "application/json" },
          body: JSON.stringify({ messages: [{ role: "user", content }] }),
        });
        const body = await r.json();
        sent[who].requests++;
        if (r.status !== 200) sent[who].errors++;
        sent[who].input += body.usage?.prompt_tokens ?? 0;
        sent[who].output += body.usage?.completion_tokens ?? 0;
      };
      await call("a", w1.slug, "one two three");
      await call("a", w2.slug, "four five");
      await call("b", w1.slug, "six");
      await call("b", w2.slug, "word ".repeat(100)); // past --max-model-len: the runtime's 400, an error
      expect(sent.b.errors).toBe(1);
      const byKey = (await (await s.admin("/admin/usage?group_by=key")).json()).rows as {
        id: string;
        requests: number;
        errors: number;
        input_tokens: number;
        output_tokens: number;
      }[];
      for (const [who, k] of [
        ["a", a],
        ["b", b],
      ] as const) {
        const rows = byKey.filter((r) => r.id === k.id);
        const sum = (f: "requests" | "errors" | "input_tokens" | "output_tokens") => rows.reduce((n, r) => n + r[f], 0);
        expect({
          requests: sum("requests"),
          errors: sum("errors"),
          input: sum("input_tokens"),
          output: sum("output_tokens"),
        }).toEqual(sent[who]);
      }
      const byWorkload = (await (await s.admin("/admin/usage?group_by=workload")).json()).rows as {
        label: string;
        requests: number;
      }[];
      expect(byWorkload.filter((r) => r.label === "usage/u-one").reduce((n, r) => n + r.requests, 0)).toBe(2);
      const csv = await (await s.admin("/admin/usage?group_by=project&format=csv")).text();
      const [head, ...lines] = csv.trim().split("\n");
      expect(head).toBe("day,project_id,project,requests,errors,input_tokens,output_tokens");
      const usageLine = lines.map((l) => l.split(",")).find((c) => c[2] === "usage")!;
      expect(Number(usageLine[3])).toBe(4);
      expect(Number(usageLine[5]) + Number(usageLine[6])).toBe(
        sent.a.input + sent.a.output + sent.b.input + sent.b.output,
      );
      const bad = await s.admin("/admin/usage?group_by=nobody");
      expect(bad.status).toBe(400);
    });
  });
}
