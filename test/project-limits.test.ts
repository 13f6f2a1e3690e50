/**
 * A project's caps (issue 20): `max_workloads`, `max_replicas` and `model_bytes` set next to the
 * token quotas and refused with 429 `project_limit` on the tenant's and the admin's routes; the
 * scaler holding new replicas back under a lowered cap (fake vLLM, fake GPUs); a pull for a tenant
 * that would pass `model_bytes` failing on its replica; and the collection of unused tenant models,
 * driven by an injected clock, never touching one the admin pulled by hand.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { seedProject, startTestServer, type TestServer } from "./helpers/server";
import { cleanup, tempDir, waitFor } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";
import { writeTinyGguf } from "./fixtures/gguf";
import { openStore, type Store } from "../src/db";
import { createProject } from "../src/projects/service";
import { createWorkload, deleteWorkload } from "../src/workloads/service";
import { updateModel, upsertModel } from "../src/models/service";
import { ModelManager } from "../src/models/manager";
import { ModelCollector } from "../src/models/gc";
import { markPulledFor } from "../src/models/tenants";
import { tenantText } from "../src/models/cli";
import { listAudit } from "../src/audit/service";

const servers: { close(): Promise<unknown> }[] = [];
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close().catch(() => 0)));
  await cleanup();
});

/** The error body of a refused request, after checking its status. */
async function refused(r: Response, status = 429) {
  expect(r.status).toBe(status);
  return (await r.json()).error as { code: string; message: string; field?: string; limit?: string; value?: number };
}

describe("the caps through the API", () => {
  let s: TestServer;
  beforeAll(async () => {
    s = await startTestServer();
    servers.push(s);
  });
  const patch = (p: string, limits: Record<string, unknown>) =>
    s.admin(`/admin/projects/${p}`, { method: "PATCH", body: { limits } });
  const vllm = (name: string, extra: Record<string, unknown> = {}) => ({
    name,
    backend: "vllm",
    model_name: name,
    config: { command: `vllm serve ${name}` },
    ...extra,
  });

  test("set next to the token quotas, shown by GET and the list, null removes one, bad values are 400 at their field", async () => {
    const { project } = await seedProject(s, "Caps");
    const set = await patch(project.slug, {
      tokens_per_day: 1000,
      max_workloads: 2,
      max_replicas: 3,
      model_bytes: 1048576,
    });
    expect(set.status).toBe(200);
    expect((await set.json()).limits).toEqual({
      tokens_per_day: 1000,
      tokens_per_month: null,
      max_workloads: 2,
      max_replicas: 3,
      model_bytes: 1048576,
    });
    const one = await (await s.admin(`/admin/projects/${project.slug}`)).json();
    expect(one.limits.max_replicas).toBe(3);
    expect(one.usage).toEqual({ workloads: 0, replicas: 0, running_replicas: 0, model_bytes: 0 });
    const listed = (await (await s.admin("/admin/projects")).json()).find(
      (p: { slug: string }) => p.slug === project.slug,
    );
    expect(listed.limits).toMatchObject({ max_workloads: 2, max_replicas: 3, model_bytes: 1048576 });
    expect((await (await patch(project.slug, { max_replicas: null })).json()).limits).toMatchObject({
      tokens_per_day: 1000,
      max_workloads: 2,
      max_replicas: null,
      model_bytes: 1048576,
    });
    for (const [limits, field] of [
      [{ max_workloads: 0 }, "limits.max_workloads"],
      [{ model_bytes: 1.5 }, "limits.model_bytes"],
      [{ max_replicas: "4" }, "limits.max_replicas"],
      [{ max_gpus: 1 }, "limits.max_gpus"],
    ] as const) {
      const e = await refused(await patch(project.slug, limits), 400);
      expect(e).toMatchObject({ code: "validation_error", field });
    }
    const entry = (await (await s.admin(`/admin/audit?action=project.limits&target=${project.id}`)).json()).entries[0];
    expect(entry.diff).toEqual({ max_replicas: { from: 3, to: null } });
  });

  test("max_workloads: one more is 429 project_limit naming the limit, on the tenant's and the admin's route; null removes it", async () => {
    const { project, sdk } = await seedProject(s, "Few");
    await patch(project.slug, { max_workloads: 1 });
    expect((await s.call(`/api/projects/${project.slug}/workloads`, sdk, { body: vllm("one") })).status).toBe(201);
    const tenant = await refused(await s.call(`/api/projects/${project.slug}/workloads`, sdk, { body: vllm("two") }));
    expect(tenant).toMatchObject({ code: "project_limit", limit: "max_workloads", value: 1 });
    expect(tenant.message).toContain("max_workloads limit is 1");
    expect(
      await refused(await s.admin(`/admin/projects/${project.slug}/workloads`, { body: vllm("two") })),
    ).toMatchObject({ code: "project_limit", limit: "max_workloads" });
    await patch(project.slug, { max_workloads: null });
    expect((await s.admin(`/admin/projects/${project.slug}/workloads`, { body: vllm("two") })).status).toBe(201);
    expect((await (await s.admin(`/admin/projects/${project.slug}`)).json()).usage.workloads).toBe(2);
  });

  test("max_replicas: the policies' replicas together; creating or raising past it is 429 at the field, lowering and other edits pass", async () => {
    const { project, sdk } = await seedProject(s, "Narrow");
    await patch(project.slug, { max_replicas: 4 });
    const fixed = await (
      await s.call(`/api/projects/${project.slug}/workloads`, sdk, {
        body: vllm("fixed", { execution_params: { replicas: 2 } }),
      })
    ).json();
    const tooMany = await refused(
      await s.admin(`/admin/projects/${project.slug}/workloads`, {
        body: vllm("auto", { execution_policy: "autoscaling", execution_params: { max_replicas: 3 } }),
      }),
    );
    expect(tooMany).toMatchObject({
      code: "project_limit",
      limit: "max_replicas",
      value: 4,
      field: "execution_params.max_replicas",
    });
    expect(tooMany.message).toContain("may run 4 replicas together (max_replicas)");
    const auto = await s.call(`/api/projects/${project.slug}/workloads`, sdk, {
      body: vllm("auto", { execution_policy: "autoscaling", execution_params: { max_replicas: 2 } }),
    });
    expect(auto.status).toBe(201);
    expect(
      await refused(
        await s.call(`/api/workloads/${fixed.id}`, sdk, {
          method: "PATCH",
          body: { execution_params: { replicas: 3 } },
        }),
      ),
    ).toMatchObject({ limit: "max_replicas", field: "execution_params.replicas" });
    const scheduled = {
      execution_policy: "scheduled",
      execution_params: { windows: [{ cron: "* * * * *" }], replicas: 5 },
    };
    expect(
      await refused(await s.admin(`/admin/workloads/${fixed.id}`, { method: "PATCH", body: scheduled })),
    ).toMatchObject({ limit: "max_replicas" });
    expect((await (await s.admin(`/admin/projects/${project.slug}`)).json()).usage.replicas).toBe(4);
    // Lowered below what the policies allow: edits that do not raise a workload's replicas still pass.
    await patch(project.slug, { max_replicas: 2 });
    expect(
      (await s.call(`/api/workloads/${fixed.id}`, sdk, { method: "PATCH", body: { description: "renamed" } })).status,
    ).toBe(200);
    expect(
      (
        await s.call(`/api/workloads/${fixed.id}`, sdk, {
          method: "PATCH",
          body: { execution_params: { replicas: 1 } },
        })
      ).status,
    ).toBe(200);
    await patch(project.slug, { max_replicas: null });
    expect((await s.admin(`/admin/workloads/${fixed.id}`, { method: "PATCH", body: scheduled })).status).toBe(200);
  });
});

describe("model_bytes and the collection, with the local agent pulling models from a loopback URL", () => {
  let s: TestServer;
  let files: ReturnType<typeof Bun.serve>;
  let model: { path: string; bytes: number };
  beforeAll(async () => {
    const dir = tempDir("urls");
    model = writeTinyGguf(join(dir, "tenant.gguf"));
    writeTinyGguf(join(dir, "admin.gguf"), { seed: 3 });
    files = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: (req) => new Response(Bun.file(join(dir, new URL(req.url).pathname.slice(1)))),
    });
    // The model files come from a loopback server: the operator lets tenants reach it.
    s = await startTestServer({
      INFERD_LOCAL_AGENT: "1",
      INFERD_TELEMETRY_INTERVAL_MS: "300",
      INFERD_ALLOW_PRIVATE_MODEL_URLS: "1",
    });
    servers.push(s, { close: async () => files.stop(true) });
  });
  const url = (name: string) => `http://127.0.0.1:${files.port}/${name}`;
  const llama = (name: string, file: string) => ({
    name,
    backend: "llamacpp",
    model_name: name,
    config: { command: `llama-server -mu ${url(file)} -c 512` },
  });
  const models = async () =>
    (await (await s.admin("/admin/models")).json()) as {
      id: string;
      source: string;
      state: string;
      reason: string | null;
      pulled_for: { project_slug: string } | null;
      removes_at: string | null;
    }[];
  const modelOf = async (file: string) => (await models()).find((m) => m.source === url(file));

  test("a pull that would pass model_bytes fails on its replica naming the limit; saving a workload naming that model is then 429", async () => {
    const { project, sdk } = await seedProject(s, "Tight");
    await s.admin(`/admin/projects/${project.slug}`, { method: "PATCH", body: { limits: { model_bytes: 100_000 } } });
    const w = await (
      await s.call(`/api/projects/${project.slug}/workloads`, sdk, { body: llama("first", "tenant.gguf") })
    ).json();
    const failed = await waitFor(
      async () => {
        const a = (await (await s.admin(`/admin/workloads/${w.id}`)).json()).assignments[0];
        return a?.state === "failed" ? a : undefined;
      },
      { what: "the replica failed by the model_bytes limit", timeoutMs: 20_000 },
    );
    expect(failed.reason).toContain(`project "tight" is at its model_bytes limit (100000 bytes`);
    expect(await modelOf("tenant.gguf")).toMatchObject({ state: "failed", pulled_for: { project_slug: "tight" } });
    const again = await refused(
      await s.call(`/api/projects/${project.slug}/workloads`, sdk, { body: llama("second", "tenant.gguf") }),
    );
    expect(again).toMatchObject({
      code: "project_limit",
      limit: "model_bytes",
      value: 100_000,
      field: "config.command",
    });
    expect(again.message).toContain(url("tenant.gguf"));
    // Without the limit the model is pulled for the project and counted against it.
    await s.admin(`/admin/projects/${project.slug}`, { method: "PATCH", body: { limits: { model_bytes: null } } });
    const second = await (
      await s.call(`/api/projects/${project.slug}/workloads`, sdk, { body: llama("second", "tenant.gguf") })
    ).json();
    await waitFor(async () => (await modelOf("tenant.gguf"))?.state === "ready" || undefined, {
      what: "the tenant's model pulled",
      timeoutMs: 20_000,
    });
    expect((await (await s.admin(`/admin/projects/${project.slug}`)).json()).usage.model_bytes).toBe(model.bytes);
    for (const id of [w.id, second.id])
      expect((await s.call(`/api/workloads/${id}`, sdk, { method: "DELETE" })).status).toBe(204);
  });

  test("an unused tenant model is removed after the grace period and audited; one the admin pulled by hand never is", async () => {
    const pulled = await s.admin("/admin/models", { body: { source: url("admin.gguf") } });
    expect([200, 202]).toContain(pulled.status);
    await waitFor(async () => (await modelOf("admin.gguf"))?.state === "ready" || undefined, {
      what: "the admin's model pulled",
    });
    const tenant = (await modelOf("tenant.gguf"))!;
    expect(tenant.removes_at).not.toBeNull();
    expect(await modelOf("admin.gguf")).toMatchObject({ pulled_for: null, removes_at: null });
    // The server's removal path on the same store, driven by a clock past the grace period.
    let now = Date.now();
    const collector = new ModelCollector(
      s.store.db,
      new ModelManager(s.store.db, { dataDir: s.dataDir, env: {} }),
      24 * 3_600_000,
      () => now,
    );
    expect(await collector.sweep()).toEqual([]);
    now += 25 * 3_600_000;
    expect(await collector.sweep()).toEqual([url("tenant.gguf")]);
    expect((await models()).map((m) => m.source)).toEqual([url("admin.gguf")]);
    now += 1000 * 3_600_000;
    expect(await collector.sweep()).toEqual([]);
    const entry = (await (await s.admin(`/admin/audit?action=model.delete&target=${tenant.id}`)).json()).entries[0];
    expect(entry).toMatchObject({
      actor: { type: "system" },
      diff: { reason: "unused for 24 h", pulled_for: "tight" },
    });
  });
});

describe("the collection with an injected clock (no server, no timers)", () => {
  const H = 3_600_000;
  let store: Store;
  let dir: string;
  beforeAll(() => {
    dir = tempDir("gc");
    store = openStore(join(dir, "inferd.db"));
  });
  afterAll(() => store.close());

  /** A ready model of `source` with one file on disk, pulled for `projectId` (or by the admin). */
  async function readyModel(source: string, projectId?: string) {
    const row = await upsertModel(store.db, source, ModelManager.parse(source));
    const folder = join(dir, "models", row.id);
    mkdirSync(folder, { recursive: true });
    writeFileSync(join(folder, "m.gguf"), "weights");
    await updateModel(store.db, row.id, {
      state: "ready",
      dir: folder,
      entry: join(folder, "m.gguf"),
      files: JSON.stringify([{ path: "m.gguf", size: 7, sha256: null }]),
      bytesTotal: 7,
    });
    if (projectId) await markPulledFor(store.db, row.id, projectId);
    return { id: row.id, file: join(folder, "m.gguf") };
  }

  test("marks unused tenant models, removes them after the grace period through the store's removal, keeps used and admin ones", async () => {
    const p = await createProject(store.db, { name: "Acme" });
    const manager = new ModelManager(store.db, { dataDir: dir, env: {}, gcAfterHours: 24 });
    const used = await readyModel("https://models.example/used.gguf", p.id);
    const unused = await readyModel("https://models.example/unused.gguf", p.id);
    const admin = await readyModel("https://models.example/admin.gguf");
    const w = await createWorkload(store.db, p, {
      name: "w",
      backend: "llamacpp",
      model_name: "w",
      config: { command: "llama-server -mu https://models.example/used.gguf" },
    });
    const t0 = Date.parse("2026-03-02T10:00:00Z");
    let now = t0;
    const gc = new ModelCollector(store.db, manager, 24 * H, () => now);
    expect(await gc.mark()).toEqual([]);
    const view = async (id: string) => (await manager.list()).find((m) => m.id === id)!;
    expect(await view(unused.id)).toMatchObject({
      pulled_for: { project_slug: "acme" },
      removes_at: new Date(t0 + 24 * H).toISOString(),
    });
    expect(await view(used.id)).toMatchObject({ pulled_for: { project_slug: "acme" }, removes_at: null });
    expect(await view(admin.id)).toMatchObject({ pulled_for: null, removes_at: null });
    expect(tenantText(await view(unused.id), t0 + H)).toBe(
      "pulled for acme, removed in 23 h unless a workload uses it",
    );
    expect(tenantText(await view(used.id), t0)).toBe("pulled for acme");

    now = t0 + 23 * H;
    expect(await gc.sweep()).toEqual([]);
    await deleteWorkload(store.db, w.id);
    expect(await gc.mark()).toEqual([]); // the used one is unused from now
    now = t0 + 24 * H;
    expect(await gc.sweep()).toEqual(["https://models.example/unused.gguf"]);
    expect(existsSync(unused.file)).toBe(false);
    expect(existsSync(used.file)).toBe(true);
    expect((await listAudit(store.db, { action: "model.delete" }))[0]).toMatchObject({
      actor: { type: "system" },
      target: { id: unused.id },
      diff: { reason: "unused for 24 h", pulled_for: "acme" },
    });

    // Used again before its time: never collected while in use, and its clock starts over.
    now = t0 + 40 * H;
    await createWorkload(store.db, p, {
      name: "w2",
      backend: "llamacpp",
      model_name: "w2",
      config: { command: "llama-server -mu https://models.example/used.gguf" },
    });
    now = t0 + 500 * H;
    expect(await gc.sweep()).toEqual([]);
    expect((await view(used.id)).removes_at).toBeNull();
    expect(existsSync(admin.file)).toBe(true);
  });

  test("the admin pulling a tenant's model by hand makes it theirs; a grace period of 0 collects nothing", async () => {
    const p = await createProject(store.db, { name: "Beta" });
    const manager = new ModelManager(store.db, { dataDir: dir, env: {}, gcAfterHours: 24 });
    const kept = await readyModel("https://models.example/kept.gguf", p.id);
    const off = await readyModel("https://models.example/off.gguf", p.id);
    expect(await manager.pull("https://models.example/kept.gguf")).toMatchObject({
      id: kept.id,
      pulled_for: null,
      removes_at: null,
    });
    let now = Date.now();
    const gc = new ModelCollector(store.db, manager, 24 * H, () => now);
    await gc.mark();
    now += 48 * H;
    expect(await gc.sweep()).toEqual(["https://models.example/off.gguf"]);
    expect(existsSync(kept.file)).toBe(true);
    const disabled = new ModelCollector(store.db, manager, 0, () => now + 1e9);
    const later = await readyModel("https://models.example/later.gguf", p.id);
    expect(await disabled.mark()).toEqual([]);
    expect(await disabled.sweep()).toEqual([]);
    expect(existsSync(later.file)).toBe(true);
    expect(
      (await new ModelManager(store.db, { dataDir: dir, env: {}, gcAfterHours: 0 }).list()).find(
        (m) => m.id === later.id,
      )?.removes_at,
    ).toBeNull();
    expect(existsSync(off.file)).toBe(false);
  });
});

describe("the scaler under max_replicas (fake vLLM on three fake GPUs)", () => {
  let s: Serving;
  beforeAll(async () => {
    s = await startServing({
      FAKE_GPUS: "3x NVIDIA L4:24000",
      FAKE_GPU_USAGE_DIR: tempDir("usage"),
      FAKE_LOAD_MS: "150",
    });
    servers.push({ close: () => s.stop() });
  });

  test("a cap lowered below what runs keeps those running and starts nothing new until there is room", async () => {
    const patch = (max_replicas: number | null) =>
      s.admin(`/admin/projects/${s.project}`, { method: "PATCH", body: { limits: { max_replicas } } });
    expect((await patch(3)).status).toBe(200);
    const fixed = await s.createWorkload({
      name: "pair",
      backend: "vllm",
      model_name: "pair",
      config: { command: "vllm serve pair" },
      execution_params: { replicas: 2 },
    });
    const ondemand = await s.createWorkload({
      name: "later",
      backend: "vllm",
      model_name: "later",
      config: { command: "vllm serve later" },
      execution_policy: "autoscaling",
      execution_params: { max_replicas: 1 },
    });
    const pair = await waitFor(
      async () => {
        const d = await s.workload(fixed.id);
        return d.assignments.filter((a) => a.state === "ready").length === 2 ? d : undefined;
      },
      { what: "both replicas of the fixed workload ready", timeoutMs: 30_000, detail: () => s.output() },
    );
    expect((await patch(1)).status).toBe(200);
    // A request for the workload at zero wants a replica; the project already runs two of its one.
    const answer = s.data(ondemand.slug, "/v1/chat/completions", {
      body: { messages: [{ role: "user", content: "wait" }] },
    });
    const held = await waitFor(
      async () => {
        const d = (await s.workload(ondemand.id)) as unknown as {
          scaling: { reason: string };
          assignments: { state: string; reason?: string }[];
        };
        return d.scaling.reason.includes("not started") ? d : undefined;
      },
      { what: "the replica held back by the cap", detail: () => s.output() },
    );
    expect(held.scaling.reason).toContain(
      `the project's max_replicas limit (1) is reached: 2 replicas of "serving" run`,
    );
    expect(held.assignments[0]).toMatchObject({
      state: "idle",
      reason: expect.stringContaining("not started: the project's max_replicas limit (1)"),
    });
    const still = await s.workload(fixed.id);
    expect(still.assignments.map((a) => [a.id, a.state])).toEqual(pair.assignments.map((a) => [a.id, "ready"]));
    expect((await (await s.admin(`/admin/projects/${s.project}`)).json()).usage).toMatchObject({
      running_replicas: 2,
      replicas: 3,
    });
    // Room again: the waiting request starts its replica and is answered.
    expect((await patch(3)).status).toBe(200);
    expect((await answer).status).toBe(200);
    expect((await s.waitState(ondemand.id)).assignments[0].state).toBe("ready");
  });
});
