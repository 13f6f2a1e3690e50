import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { seedProject, startTestServer, type TestServer } from "../helpers/server";
import { TASK_TYPES } from "../../src/workloads/schema";
import type { Engine } from "../helpers/postgres";

/** The workloads control plane (create, read, update, delete, toggles) on `engine`'s store. */
export function workloadsSuite(engine: Engine): void {
  const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
  let s: TestServer;
  let ctx: Awaited<ReturnType<typeof seedProject>>;
  const create = (body: unknown) => s.call(`/api/projects/${ctx.project.slug}/workloads`, ctx.sdk, { body });

  beforeAll(async () => {
    // The contract's examples as an operator who lets tenants install versions and read /models
    // (the launch policy's defaults are tested in launch-policy.test.ts).
    s = await startTestServer({ INFERD_POLICY_TENANT_INSTALLS: "1", INFERD_POLICY_MODEL_PATHS: "/models" }, { engine });
    ctx = await seedProject(s, "Acme", "acme");
  });
  afterAll(() => s.close());

  describe("control plane: create", () => {
    test("returns every contract field, snake_case, with defaults filled", async () => {
      const r = await create({
        name: "Llama 3 8B",
        backend: "vllm",
        model_name: "meta-llama/Llama-3-8B",
        config: { command: "vllm serve meta-llama/Llama-3-8B --max-model-len 8192", vllm_version: "0.11.0" },
      });
      expect(r.status).toBe(201);
      const w = await r.json();
      expect(Object.keys(w).sort()).toEqual(
        [
          "aliases",
          "backend",
          "config",
          "created_at",
          "description",
          "execution_params",
          "execution_policy",
          "fallbacks",
          "gpu_resource_id",
          "id",
          "model_name",
          "name",
          "nodes",
          "project_id",
          "project_slug",
          "routing",
          "routing_is_default",
          "slug",
          "stable_prompts",
          "task_type",
          "updated_at",
          "worker_id",
          "workload_slug",
        ].sort(),
      );
      expect(w).toMatchObject({
        name: "Llama 3 8B",
        description: "",
        slug: "llama-3-8b",
        workload_slug: "llama-3-8b",
        project_id: ctx.project.id,
        project_slug: "acme",
        task_type: "text2text",
        backend: "vllm",
        worker_id: null,
        gpu_resource_id: null,
        nodes: 1,
        aliases: [],
        fallbacks: [],
        routing: "prefix",
        routing_is_default: true,
        stable_prompts: true,
        config: { command: "vllm serve meta-llama/Llama-3-8B --max-model-len 8192", vllm_version: "0.11.0" },
      });
      expect(w.id).toMatch(/^wl_/);
      expect(w.created_at).toMatch(ISO);
      expect(w.updated_at).toBe(w.created_at);
    });

    test("every backend with its config shape is accepted", async () => {
      const ok = [
        { backend: "ollama", model_name: "llama3.2" },
        { backend: "ollama", model_name: "llama3.2", config: {} },
        {
          backend: "vllm-omni",
          model_name: "Qwen/Qwen2.5-Omni-7B",
          config: { command: "vllm serve Qwen/Qwen2.5-Omni-7B --omni" },
        },
        {
          backend: "sglang",
          model_name: "qwen",
          config: { command: "python3 -m sglang.launch_server --model-path qwen" },
        },
        {
          backend: "llamacpp",
          model_name: "tiny",
          config: { command: "llama-server -m '/models/my model.gguf' -c 2048" },
        },
      ];
      for (const [i, body] of ok.entries()) {
        const r = await create({ name: `b${i}`, ...body });
        expect(r.status).toBe(201);
      }
    });

    test("all 12 task types are accepted; anything else is refused", async () => {
      expect(TASK_TYPES).toHaveLength(12);
      for (const t of TASK_TYPES) {
        const r = await create({ name: `t-${t}`, backend: "ollama", model_name: "m", task_type: t });
        expect(r.status).toBe(201);
        expect((await r.json()).task_type).toBe(t);
      }
      const bad = await create({ name: "t-bad", backend: "ollama", model_name: "m", task_type: "text2smell" });
      expect(bad.status).toBe(400);
      expect((await bad.json()).error.field).toBe("task_type");
    });

    test.each([
      [{ name: "x", backend: "vllm", model_name: "m" }, "config.command"],
      [{ name: "x", backend: "vllm", model_name: "m", config: { command: "" } }, "config.command"],
      [{ name: "x", backend: "vllm", model_name: "m", config: { command: "vllm serve 'unclosed" } }, "config.command"],
      [{ name: "x", backend: "vllm", model_name: "m", config: { command: "vllm serve m", gpus: 2 } }, "config.gpus"],
      [
        {
          name: "x",
          backend: "vllm",
          model_name: "m",
          config: { command: "vllm serve m", vllm_version: "not a version!" },
        },
        "config.vllm_version",
      ],
      [{ name: "x", backend: "llamacpp", model_name: "m", config: {} }, "config.command"],
      [
        {
          name: "x",
          backend: "llamacpp",
          model_name: "m",
          config: { command: "llama-server -m a.gguf", vllm_version: "1" },
        },
        "config.vllm_version",
      ],
      [{ name: "x", backend: "ollama", model_name: "m", config: { command: "ollama run m" } }, "config.command"],
      [{ name: "x", backend: "tensorrt", model_name: "m" }, "backend"],
      [{ name: "x", backend: "ollama" }, "model_name"],
      [{ backend: "ollama", model_name: "m" }, "name"],
      [{ name: "x", backend: "ollama", model_name: "m", slug: "Not OK" }, "slug"],
      [{ name: "x", backend: "ollama", model_name: "m", worker_id: 7 }, "worker_id"],
      [{ name: "x", backend: "ollama", model_name: "m", execution_policy: "sometimes" }, "execution_policy"],
      [{ name: "x", backend: "ollama", model_name: "m", replicas: 3 }, "replicas"],
    ])("%j is a 400 validation_error naming %s", async (body, field) => {
      const r = await create(body);
      expect(r.status).toBe(400);
      const e = (await r.json()).error;
      expect(e).toMatchObject({ code: "validation_error", field });
      expect(e.message.startsWith(field)).toBe(true);
    });

    test("an explicit slug that exists is 409, so ensure() can look up, create or reconcile", async () => {
      expect((await create({ name: "A", slug: "ensure-me", backend: "ollama", model_name: "m" })).status).toBe(201);
      const dup = await create({ name: "B", slug: "ensure-me", backend: "ollama", model_name: "m" });
      expect(dup.status).toBe(409);
      expect((await dup.json()).error.code).toBe("slug_taken");
      const derived = await (await create({ name: "Ensure me", backend: "ollama", model_name: "m" })).json();
      expect(derived.slug).toBe("ensure-me-2");
    });
  });

  describe("control plane: read, update, delete", () => {
    test("PATCH changes only the sent fields, by id or by slug", async () => {
      const w = await (
        await create({
          name: "Patch me",
          backend: "vllm",
          model_name: "m1",
          description: "first",
          config: { command: "vllm serve m1" },
        })
      ).json();
      while (Date.now() <= Date.parse(w.updated_at)) await Bun.sleep(1); // let the millisecond clock move on
      const r = await s.call(`/api/workloads/${w.slug}`, ctx.sdk, { method: "PATCH", body: { description: "second" } });
      expect(r.status).toBe(200);
      const u = await r.json();
      expect(u).toMatchObject({
        id: w.id,
        name: "Patch me",
        description: "second",
        model_name: "m1",
        config: w.config,
        created_at: w.created_at,
      });
      expect(u.updated_at > w.updated_at).toBe(true);
      const same = await (
        await s.call(`/api/workloads/${w.id}`, ctx.sdk, { method: "PATCH", body: { description: "second" } })
      ).json();
      expect(same.updated_at).toBe(u.updated_at);
      const cfg = await (
        await s.call(`/api/workloads/${w.id}`, ctx.sdk, {
          method: "PATCH",
          body: { config: { command: "vllm serve m2" }, model_name: "m2" },
        })
      ).json();
      expect(cfg).toMatchObject({
        model_name: "m2",
        config: { command: "vllm serve m2" },
        worker_id: null,
        description: "second",
      });
      // A tenant may pin only to a worker the operator opened to the project (none here).
      const pinned = await s.call(`/api/workloads/${w.id}`, ctx.sdk, { method: "PATCH", body: { worker_id: "wk_x" } });
      expect(pinned.status).toBe(403);
      expect((await pinned.json()).error).toMatchObject({ code: "worker_not_allowed", field: "worker_id" });
      const cleared = await (
        await s.call(`/api/workloads/${w.id}`, ctx.sdk, { method: "PATCH", body: { worker_id: null } })
      ).json();
      expect(cleared.worker_id).toBeNull();
    });

    test("PATCH re-checks config against the backend it ends up with", async () => {
      const w = await (await create({ name: "Switch", backend: "ollama", model_name: "m" })).json();
      const bad = await s.call(`/api/workloads/${w.id}`, ctx.sdk, { method: "PATCH", body: { backend: "vllm" } });
      expect(bad.status).toBe(400);
      expect((await bad.json()).error.field).toBe("config.command");
      const good = await s.call(`/api/workloads/${w.id}`, ctx.sdk, {
        method: "PATCH",
        body: { backend: "llamacpp", config: { command: "llama-server -m /models/x.gguf" } },
      });
      expect(good.status).toBe(200);
      const unchanged = await (await s.call(`/api/workloads/${w.id}`, ctx.sdk)).json();
      expect(unchanged.backend).toBe("llamacpp");
    });

    test("PATCH to a slug in use is 409; to a free one renames", async () => {
      const a = await (await create({ name: "Ren A", backend: "ollama", model_name: "m" })).json();
      await create({ name: "Ren B", backend: "ollama", model_name: "m" });
      expect(
        (await s.call(`/api/workloads/${a.id}`, ctx.sdk, { method: "PATCH", body: { slug: "ren-b" } })).status,
      ).toBe(409);
      const renamed = await (
        await s.call(`/api/workloads/${a.id}`, ctx.sdk, { method: "PATCH", body: { slug: "ren-c" } })
      ).json();
      expect(renamed).toMatchObject({ slug: "ren-c", workload_slug: "ren-c" });
    });

    test("GET lists the project's workloads; GET one by id or slug; DELETE then 404", async () => {
      const w = await (await create({ name: "Listed", backend: "ollama", model_name: "m" })).json();
      const list = await (await s.call(`/api/projects/acme/workloads`, ctx.sdk)).json();
      expect(Array.isArray(list)).toBe(true);
      expect(list.find((x: { id: string }) => x.id === w.id)).toEqual(w);
      expect(await (await s.call(`/api/workloads/${w.id}`, ctx.sdk)).json()).toEqual(w);
      expect(await (await s.call(`/api/workloads/listed`, ctx.sdk)).json()).toEqual(w);
      expect((await s.call(`/api/workloads/${w.id}`, ctx.sdk, { method: "DELETE" })).status).toBe(204);
      expect((await s.call(`/api/workloads/${w.id}`, ctx.sdk)).status).toBe(404);
      expect((await s.call(`/api/workloads/${w.id}`, ctx.sdk, { method: "PATCH", body: { name: "x" } })).status).toBe(
        404,
      );
      expect((await s.call(`/api/workloads/${w.id}`, ctx.sdk, { method: "DELETE" })).status).toBe(404);
    });
  });

  describe("admin API: workloads and toggles", () => {
    test("new workloads start with every toggle on; PATCH endpoints answers the whole map", async () => {
      const w = await (await create({ name: "Toggles", backend: "ollama", model_name: "m" })).json();
      const detail = await (await s.admin(`/admin/workloads/${w.id}`)).json();
      expect(detail.endpoints).toEqual({
        jobs: true,
        chat: true,
        embeddings: true,
        rerank: true,
        audio: true,
        images: true,
        forecast: true,
      });
      const r = await s.admin(`/admin/workloads/${w.id}/endpoints`, {
        method: "PATCH",
        body: { chat: false, jobs: false },
      });
      expect(r.status).toBe(200);
      expect(await r.json()).toEqual({
        jobs: false,
        chat: false,
        embeddings: true,
        rerank: true,
        audio: true,
        images: true,
        forecast: true,
      });
      const bad = await s.admin(`/admin/workloads/${w.id}/endpoints`, { method: "PATCH", body: { chat: "off" } });
      expect(bad.status).toBe(400);
      const unknown = await s.admin(`/admin/workloads/${w.id}/endpoints`, { method: "PATCH", body: { video: true } });
      expect((await unknown.json()).error.field).toBe("video");
      const list = await (await s.admin(`/admin/projects/acme/workloads`)).json();
      expect(list.find((x: { id: string }) => x.id === w.id).endpoints.chat).toBe(false);
    });
  });

  describe("spanning machines: nodes", () => {
    const vllm = { backend: "vllm", model_name: "m", config: { command: "vllm serve m" } };
    const adminCreate = (body: unknown) => s.admin("/admin/projects/acme/workloads", { method: "POST", body });

    test("a tenant may not set nodes > 1 unless the operator allows it; the error names the setting", async () => {
      const r = await create({ name: "Big", ...vllm, nodes: 2 });
      expect(r.status).toBe(403);
      expect((await r.json()).error).toMatchObject({
        code: "command_not_allowed",
        field: "nodes",
        setting: "--policy-tenant-multinode (INFERD_POLICY_TENANT_MULTINODE)",
      });
      const one = await (await create({ name: "Small", ...vllm, nodes: 1 })).json();
      const up = await s.call(`/api/workloads/${one.id}`, ctx.sdk, { method: "PATCH", body: { nodes: 3 } });
      expect(up.status).toBe(403);
      expect((await (await s.call(`/api/workloads/${one.id}`, ctx.sdk)).json()).nodes).toBe(1);
    });

    test("the operator sets nodes 1–16 on engines that span machines, without the flags inferd sets on each member", async () => {
      const ok = await adminCreate({ name: "Spread", ...vllm, nodes: 2 });
      expect(ok.status).toBe(201);
      expect((await ok.json()).nodes).toBe(2);
      const cases: [unknown, number, string, string][] = [
        [{ name: "x", ...vllm, nodes: 17 }, 400, "nodes", ""],
        [{ name: "x", ...vllm, nodes: 0 }, 400, "nodes", ""],
        [{ name: "x", ...vllm, nodes: 1.5 }, 400, "nodes", ""],
        [
          { name: "x", backend: "ollama", model_name: "m", nodes: 2 },
          400,
          "nodes",
          'backend "ollama" runs on one machine',
        ],
        [
          { name: "x", ...vllm, config: { command: "vllm serve m --master-addr 10.0.0.9" }, nodes: 2 },
          400,
          "config.command",
          "sets --master-addr, which inferd sets itself",
        ],
        [
          {
            name: "x",
            backend: "llamacpp",
            model_name: "m",
            config: { command: "llama-server -m /models/m.gguf --rpc=10.0.0.9:1" },
            nodes: 2,
          },
          400,
          "config.command",
          "sets --rpc",
        ],
      ];
      for (const [body, status, field, message] of cases) {
        const r = await adminCreate(body);
        expect(r.status).toBe(status);
        const e = (await r.json()).error;
        expect(e.field).toBe(field);
        expect(e.message).toContain(message);
      }
    });
  });
}
