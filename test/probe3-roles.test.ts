/**
 * Issue 32 (third security probe), items 1, 2, 4, 11 and 12: roles stay inside their project. Only the
 * admin is the operator of the machine; an operator or viewer of a project is a tenant for the launch
 * policy, workers and join tokens, and a project key cannot take another workload's traffic.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startTestServer, type TestServer } from "./helpers/server";
import { desiredFor } from "../src/workers/desired";
import { insertAssignment } from "../src/workers/service";
import { policyOf } from "../src/workloads/launch-policy";
import { reasonWithOutput } from "../agent/reason";
import { assignments } from "../src/db/schema";
import { eq } from "drizzle-orm";

const PASSWORD = "correct horse battery";
const errorOf = async (r: Response) =>
  ((await r.json()) as { error: { code: string; message: string; field?: string } }).error;
const vllm = (name: string, command = `vllm serve org/${name}`) => ({
  name,
  backend: "vllm",
  model_name: `org/${name}`,
  config: { command },
});

/** A signed-in user calling /admin with their session cookie (from our own origin, as the dashboard does). */
interface Person {
  id: string;
  call(path: string, init?: { method?: string; body?: unknown }): Promise<Response>;
}

let s: TestServer;
let operator: Person;
let viewer: Person;
let betaWorkload: { id: string; slug: string };
let alphaWorkload: { id: string; slug: string };
let remote: { id: string; name: string };

/** Adds a user with the admin token and signs them in with their password. */
async function person(email: string, role: string, projects: string[]): Promise<Person> {
  const made = await s.admin("/admin/users", { body: { email, role, projects, password: PASSWORD } });
  expect(made.status).toBe(201);
  const { id } = await made.json();
  const r = await s.call("/admin/session", undefined, { body: { email, password: PASSWORD } });
  expect(r.status).toBe(200);
  const cookie = (r.headers.get("set-cookie") ?? "").split(";")[0];
  return { id, call: (path, init = {}) => s.call(path, undefined, { ...init, headers: { cookie, origin: s.url } }) };
}

/** A key of a project made with the admin token; its secret. */
async function keyOf(project: string, body: Record<string, unknown>): Promise<string> {
  const r = await s.admin(`/admin/projects/${project}/keys`, { body: { name: "k", ...body } });
  expect(r.status).toBe(201);
  return (await r.json()).secret;
}

beforeAll(async () => {
  s = await startTestServer();
  for (const slug of ["alpha", "beta"])
    expect((await s.admin("/admin/projects", { body: { name: slug, slug } })).status).toBe(201);
  alphaWorkload = await (await s.admin("/admin/projects/alpha/workloads", { body: vllm("chat") })).json();
  betaWorkload = await (await s.admin("/admin/projects/beta/workloads", { body: vllm("secret") })).json();
  remote = await (await s.admin("/admin/workers", { body: { name: "box-b" } })).json();
  operator = await person("otto@example.com", "operator", ["alpha"]);
  viewer = await person("vera@example.com", "viewer", ["alpha"]);
});
afterAll(() => s?.close());

describe("item 1: an operator is a tenant for the launch policy", () => {
  test("an operator cannot save a shell, a --port, nodes > 1 or a pin to a worker not open to the project; the admin can save the shell", async () => {
    const shell = vllm("evil", `/bin/sh -c "cat /proc/$PPID/environ > /tmp/x; exec vllm serve m"`);
    const refused = await operator.call("/admin/projects/alpha/workloads", { body: shell });
    expect(refused.status).toBe(403);
    expect(await errorOf(refused)).toMatchObject({ code: "command_not_allowed", field: "config.command" });
    const port = await operator.call("/admin/projects/alpha/workloads", {
      body: vllm("ported", "vllm serve org/ported --port 9999"),
    });
    const portError = await errorOf(port);
    expect(portError.code).toBe("command_not_allowed");
    expect(portError.message).toContain("--port");
    const nodes = await operator.call("/admin/projects/alpha/workloads", { body: { ...vllm("wide"), nodes: 2 } });
    expect(nodes.status).toBe(403);
    expect(await errorOf(nodes)).toMatchObject({ code: "command_not_allowed", field: "nodes" });
    const pinned = await operator.call("/admin/projects/alpha/workloads", {
      body: { ...vllm("pinned"), worker_id: remote.id },
    });
    expect(pinned.status).toBe(403);
    expect(await errorOf(pinned)).toMatchObject({ code: "worker_not_allowed", field: "worker_id" });
    // Editing the admin's workload into the shell is refused the same way.
    const edit = await operator.call(`/admin/workloads/${alphaWorkload.id}`, {
      method: "PATCH",
      body: { config: { command: shell.config.command } },
    });
    expect(edit.status).toBe(403);
    expect((await errorOf(edit)).code).toBe("command_not_allowed");
    const names = (await (await s.admin("/admin/projects/alpha/workloads")).json()) as { slug: string }[];
    expect(names.map((w) => w.slug)).toEqual([alphaWorkload.slug]);
    // The admin is the operator of the machine: the same command is theirs to run.
    expect((await s.admin("/admin/projects/alpha/workloads", { body: shell })).status).toBe(201);
  });

  test("an operator's allowed command is stored as the tenant's, and the agent is sent the policy to check it again at launch", async () => {
    const made = await operator.call("/admin/projects/alpha/workloads", { body: vllm("mine") });
    expect(made.status).toBe(201);
    const w = await made.json();
    expect(w.config_origin).toBe("tenant");
    await insertAssignment(s.store.db, w, { workerId: remote.id, gpus: 1, gpuIndices: [0], auto: false });
    const policy = policyOf(s.config);
    const spec = (await desiredFor(s.store.db, remote.id, policy)).find((x) => x.workload.id === w.id);
    expect(spec?.policy).toEqual(policy);
    // An operator's edit of the admin's workload's command makes it the tenant's too.
    const edited = await operator.call(`/admin/workloads/${alphaWorkload.id}`, {
      method: "PATCH",
      body: { config: { command: "vllm serve org/chat --max-model-len 4096" } },
    });
    expect(edited.status).toBe(200);
    expect((await edited.json()).config_origin).toBe("tenant");
    await s.store.db.delete(assignments).where(eq(assignments.workloadId, w.id));
  });
});

describe("items 2 and 12: workers and join tokens belong to the admin", () => {
  test("an operator cannot make or list join tokens, add, delete or open workers, or place a replica on a worker not open to the project", async () => {
    for (const [method, path, body] of [
      ["GET", "/admin/workers/join-tokens", undefined],
      ["POST", "/admin/workers/join-tokens", { reusable: true }],
      ["POST", "/admin/workers", { name: "my-box" }],
      ["DELETE", `/admin/workers/${remote.id}`, undefined],
      ["PATCH", `/admin/workers/${remote.id}`, { open_to: ["alpha"] }],
      ["PATCH", `/admin/workers/${remote.id}`, { open_to: ["no-such-project"] }],
    ] as const) {
      const r = await operator.call(path, { method, body });
      expect(`${method} ${path} ${r.status}`).toBe(`${method} ${path} 403`);
      const e = await errorOf(r);
      expect(e.code).toBe("forbidden_role");
      expect(e.message).toEndWith("an admin can");
    }
    expect((await s.admin("/admin/workers")).status).toBe(200);
    expect(((await (await s.admin("/admin/workers")).json()) as { id: string }[]).map((w) => w.id)).toContain(
      remote.id,
    );
    const placed = await operator.call(`/admin/workloads/${alphaWorkload.id}/assignments`, {
      body: { worker_id: remote.id, force: true },
    });
    expect(placed.status).toBe(403);
    expect((await errorOf(placed)).code).toBe("worker_not_allowed");
    // The admin still manages them.
    expect((await s.admin("/admin/workers/join-tokens", { body: { reusable: true } })).status).toBe(201);
  });
});

describe("item 11: viewers read no prompts, and see only their projects in the workers list", () => {
  test("a viewer is refused runtime logs and job results; an operator reads them", async () => {
    for (const path of [
      `/admin/workloads/${alphaWorkload.id}/logs`,
      `/admin/workloads/${alphaWorkload.id}/logs?follow=1`,
      `/admin/workloads/${alphaWorkload.id}/jobs`,
    ]) {
      const r = await viewer.call(path);
      expect(`${path} ${r.status}`).toBe(`${path} 403`);
      expect(await errorOf(r)).toEqual({
        code: "forbidden_role",
        message:
          'your role (viewer) cannot read runtime logs or job results; an operator or admin of project "alpha" can',
      });
    }
    expect((await operator.call(`/admin/workloads/${alphaWorkload.id}/logs`)).status).toBe(200);
    expect((await operator.call(`/admin/workloads/${alphaWorkload.id}/jobs`)).status).toBe(200);
    expect((await viewer.call(`/admin/workloads/${alphaWorkload.id}`)).status).toBe(200);
  });

  test("the workers list shows a member only workers running or open to their projects, without other projects' workloads; a viewer gets no runtime output", async () => {
    const local = await (await s.admin("/admin/workers", { body: { name: "box-c" } })).json();
    const mine = await insertAssignment(s.store.db, alphaWorkload, {
      workerId: remote.id,
      gpus: 1,
      gpuIndices: [0],
      auto: false,
    });
    await s.store.db
      .update(assignments)
      .set({ state: "failed", reason: reasonWithOutput("exited with code 1", "prompt: my secret question") })
      .where(eq(assignments.id, mine.id));
    await insertAssignment(s.store.db, betaWorkload, { workerId: remote.id, gpus: 1, gpuIndices: [1], auto: false });
    await insertAssignment(s.store.db, betaWorkload, { workerId: local.id, gpus: 1, gpuIndices: [0], auto: false });
    for (const who of [viewer, operator]) {
      const text = await (await who.call("/admin/workers")).text();
      expect(text).not.toContain("beta");
      expect(text).not.toContain(betaWorkload.id);
      const list = JSON.parse(text) as { id: string; replicas: { workload: string; reason: string | null }[] }[];
      expect(list.map((w) => w.id)).toEqual([remote.id]);
      expect(list[0].replicas.map((r) => r.workload)).toEqual([`alpha/${alphaWorkload.slug}`]);
      expect(list[0].replicas[0].reason).toContain(who === viewer ? "exited with code 1" : "my secret question");
      if (who === viewer) expect(list[0].replicas[0].reason).not.toContain("my secret question");
      expect((await who.call(`/admin/workers/${local.id}`)).status).toBe(404);
      expect(await (await who.call(`/admin/workers/${remote.id}`)).text()).not.toContain("beta");
    }
    const detail = await (await viewer.call(`/admin/workloads/${alphaWorkload.id}`)).json();
    expect(JSON.stringify(detail.assignments)).not.toContain("my secret question");
    // The admin sees everything, the output included.
    const all = (await (await s.admin("/admin/workers")).json()) as { id: string }[];
    expect(all.map((w) => w.id)).toEqual(expect.arrayContaining([remote.id, local.id]));
    expect(await (await s.admin("/admin/workers")).text()).toContain("my secret question");
    // A worker the admin opens to alpha is listed to alpha's members, with only alpha in open_to.
    expect(
      (await s.admin(`/admin/workers/${local.id}`, { method: "PATCH", body: { open_to: ["alpha", "beta"] } })).status,
    ).toBe(200);
    const opened = (
      (await (await viewer.call("/admin/workers")).json()) as { id: string; open_to: string[]; replicas: unknown[] }[]
    ).find((w) => w.id === local.id);
    expect(opened?.replicas).toEqual([]);
    expect(opened?.open_to).toHaveLength(1);
    await s.store.db.delete(assignments);
  });
});

describe("item 4: a project key cannot take another workload's traffic", () => {
  test("aliases and slugs never equal another workload's model name, alias or slug (also name:latest), for anyone", async () => {
    const sdk = await keyOf("alpha", { type: "sdk" });
    const other = `org/${alphaWorkload.slug}`;
    for (const aliases of [[other], [`${other}:latest`]]) {
      const r = await s.call("/api/projects/alpha/workloads", sdk, { body: { ...vllm("thief"), aliases } });
      expect(`${aliases} ${r.status}`).toBe(`${aliases} 409`);
      const e = await errorOf(r);
      expect(e).toMatchObject({ code: "alias_taken", field: "aliases.0" });
      expect(e.message).toContain("model name");
    }
    const byOperator = await operator.call("/admin/projects/alpha/workloads", {
      body: { ...vllm("thief2"), aliases: [other] },
    });
    expect(byOperator.status).toBe(409);
    const own = await (await s.call("/api/projects/alpha/workloads", sdk, { body: vllm("own") })).json();
    const patched = await s.call(`/api/workloads/${own.id}`, sdk, { method: "PATCH", body: { aliases: [other] } });
    expect((await errorOf(patched)).code).toBe("alias_taken");
    // A slug that is another workload's model name would take that name's requests too.
    const named = await s.admin("/admin/projects/alpha/workloads", {
      body: { ...vllm("plain"), model_name: "plainname" },
    });
    expect(named.status).toBe(201);
    const slug = await s.call(`/api/workloads/${own.id}`, sdk, { method: "PATCH", body: { slug: "plainname" } });
    expect(slug.status).toBe(409);
    expect(await errorOf(slug)).toMatchObject({ code: "slug_taken", field: "slug" });
  });

  test("an endpoint-scoped key's workload cannot join another's pool; the pool's own requests stay with it", async () => {
    const w = await (await s.admin("/admin/projects/alpha/workloads", { body: vllm("lure") })).json();
    const sdk = await keyOf("alpha", { type: "sdk", scope: "endpoints", endpoints: [`alpha/${w.slug}`] });
    const r = await s.call(`/api/workloads/${w.id}`, sdk, {
      method: "PATCH",
      body: { model_name: `org/${alphaWorkload.slug}` },
    });
    expect(r.status).toBe(403);
    expect((await errorOf(r)).code).toBe("scope_insufficient");
    // The project base's model list still names one workload for that model.
    const live = await keyOf("alpha", { type: "live" });
    const models = (await (await s.call("/endpoint/alpha/v1/models", live)).json()) as { data: { id: string }[] };
    expect(models.data.filter((m) => m.id === `org/${alphaWorkload.slug}`)).toHaveLength(1);
    // An operator and the admin form pools on purpose.
    const pool = { ...vllm("pool"), model_name: `org/${alphaWorkload.slug}` };
    expect(
      (await operator.call("/admin/projects/alpha/workloads", { body: { ...pool, name: "pool-op" } })).status,
    ).toBe(201);
    expect((await s.admin("/admin/projects/alpha/workloads", { body: { ...pool, name: "pool-admin" } })).status).toBe(
      201,
    );
  });

  test("an endpoint-scoped key cannot change its workload's model name, aliases or slug", async () => {
    const w = await (await s.admin("/admin/projects/alpha/workloads", { body: vllm("scoped") })).json();
    const sdk = await keyOf("alpha", { type: "sdk", scope: "endpoints", endpoints: [`alpha/${w.slug}`] });
    for (const body of [{ model_name: "org/elsewhere" }, { aliases: ["anything"] }, { slug: "renamed" }]) {
      const r = await s.call(`/api/workloads/${w.id}`, sdk, { method: "PATCH", body });
      expect(`${JSON.stringify(body)} ${r.status}`).toBe(`${JSON.stringify(body)} 403`);
      expect((await errorOf(r)).code).toBe("scope_insufficient");
    }
    // Its other fields stay its own.
    expect(
      (await s.call(`/api/workloads/${w.id}`, sdk, { method: "PATCH", body: { description: "mine" } })).status,
    ).toBe(200);
  });
});
