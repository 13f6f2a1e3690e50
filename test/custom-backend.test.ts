/**
 * The `custom` backend (issue 35): a model server none of the five engines is, run by the operator's
 * command with inferd's `{port}`, ready on its own path, serving the inferd routes its config maps to
 * its own paths. Stood in for by test/fixtures/custom-servers.ts: Hugging Face's
 * text-embeddings-inference router (embeddings and rerank) and a forecasting server (the `forecast`
 * route, synchronous and as an async job). Clients are the official `openai` SDK and plain fetch.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { checkLaunch } from "../agent/launch-policy";
import { runtimePath } from "../agent/engines/custom";
import { tenantPolicy } from "./helpers/launch";
import { cleanup, waitFor } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";
import { joinAgent, startHost } from "./helpers/agents";

afterAll(cleanup);

const TEI = {
  name: "bge",
  backend: "custom",
  task_type: "embedding",
  model_name: "bge-small",
  config: {
    command: "text-embeddings-router --model-id BAAI/bge-small-en-v1.5 --hostname {host} --port {port}",
    ready_path: "/health",
    slots: 8,
    routes: { embeddings: "/v1/embeddings", rerank: "/rerank" },
  },
};
const FORECASTER = {
  name: "chronos",
  backend: "custom",
  task_type: "forecast",
  model_name: "chronos-bolt-tiny",
  config: {
    command: "forecaster --host {host} --port {port}",
    ready_path: "/ready",
    routes: { forecast: "/predict" },
  },
};

describe("a custom server's routes", () => {
  test("each inferd route goes to the path the config names; others are not the server's", () => {
    const routes = { embeddings: "/v1/embeddings", forecast: "/predict" };
    expect(runtimePath(routes, "/v1/forecast")).toBe("/predict");
    expect(runtimePath(routes, "/v1/embeddings")).toBe("/v1/embeddings");
    expect(runtimePath(routes, "/v1/chat/completions")).toBeNull();
    expect(runtimePath(undefined, "/v1/chat/completions")).toBe("/v1/chat/completions");
  });
});

describe("custom servers run by the operator", () => {
  let s: Serving;
  beforeAll(async () => {
    s = await startServing();
  });
  afterAll(() => s.stop());

  test("text-embeddings-inference: started on inferd's port, ready on /health, embeddings through the OpenAI SDK with usage, rerank as TEI answers it", async () => {
    const w = await s.createWorkload(TEI);
    const ready = await s.waitState(w.id, "ready", 60_000);
    expect(ready.assignments[0].concurrency).toBe(8);
    const start = s.events((e) => e.event === "start" && e.persona === "tei").at(-1)!;
    const argv = start.argv as string[];
    // `{port}` and `{host}` became the loopback address inferd chose.
    expect(argv[argv.indexOf("--port") + 1]).toBe(String(start.port));
    expect(argv[argv.indexOf("--hostname") + 1]).toBe("127.0.0.1");
    const openai = new OpenAI({ baseURL: `${s.url}/endpoint/${s.project}/${w.slug}/v1`, apiKey: s.live });
    const e = await openai.embeddings.create({ model: "bge-small", input: ["a red fox", "a blue whale"] });
    expect(e.data.map((d) => d.index)).toEqual([0, 1]);
    expect(e.data[0].embedding).toHaveLength(8);
    expect(e.usage.prompt_tokens).toBe(10);
    const rerank = await s.data(w.slug, "/v1/rerank", {
      body: { model: "bge-small", query: "red fox", texts: ["a blue whale", "the red fox jumps"] },
    });
    expect(rerank.status).toBe(200);
    expect(((await rerank.json()) as { index: number }[]).map((r) => r.index)).toEqual([1, 0]);
    // Metered as any workload: the tokens the server reported.
    const usage = await waitFor(
      async () => {
        const u = (await s.workload(w.id)).usage;
        return u.requests >= 2 ? u : undefined;
      },
      { what: "the usage recorded" },
    );
    expect(usage.input_tokens).toBe(10);
  });

  test("a route the server does not serve is a 404 naming the ones it does; its own errors pass through", async () => {
    const w = (await (await s.admin(`/admin/projects/${s.project}/workloads`)).json()).find(
      (x: { slug: string }) => x.slug === "bge",
    );
    const chat = await s.data(w.slug, "/v1/chat/completions", {
      body: { model: "bge-small", messages: [{ role: "user", content: "hi" }] },
    });
    expect(chat.status).toBe(404);
    expect((await chat.json()).error).toMatchObject({
      code: "route_not_served",
      message: expect.stringContaining("it serves /v1/embeddings, /v1/rerank"),
    });
    const messages = await s.data(w.slug, "/v1/messages", {
      body: { model: "bge-small", max_tokens: 8, messages: [{ role: "user", content: "hi" }] },
    });
    expect(messages.status).toBe(404);
    expect(JSON.stringify(await messages.json())).toContain("through /v1/chat/completions");
    const bad = await s.data(w.slug, "/v1/embeddings", { body: { model: "bge-small" } });
    expect(bad.status).toBe(422);
    expect(await bad.json()).toEqual({
      error: "Json deserialize error: missing field `input`",
      error_type: "Validation",
    });
  });

  test("a forecaster: the forecast route, synchronous and as an async job", async () => {
    const w = await s.createWorkload(FORECASTER);
    await s.waitState(w.id, "ready", 60_000);
    const r = await s.data(w.slug, "/v1/forecast", { body: { series: [1, 2, 4], horizon: 3 } });
    expect(r.status).toBe(200);
    // The answer names the model as inferd's /v1/models does, as for every workload.
    expect(await r.json()).toEqual({ model: "chronos-bolt-tiny", forecast: [6, 8, 10] });
    const sub = await s.data(w.slug, "/jobs", { body: { kind: "forecast", body: { series: [10, 9], horizon: 2 } } });
    expect(sub.status).toBe(202);
    const { job_id } = await sub.json();
    const job = await waitFor(
      async () => {
        const j = await (await s.data(w.slug, `/jobs/${job_id}`)).json();
        return j.status === "completed" || j.status === "failed" ? j : undefined;
      },
      { what: "the forecast job done", timeoutMs: 30_000 },
    );
    expect(job.status).toBe("completed");
    expect(JSON.stringify(job)).toContain('"forecast":[8,7]');
  });

  test("the config says where the server listens and what it serves, or the save is a 400 naming the field", async () => {
    const bad = async (config: Record<string, unknown>) => {
      const r = await s.admin(`/admin/projects/${s.project}/workloads`, { body: { ...FORECASTER, name: "x", config } });
      expect(r.status).toBe(400);
      return (await r.json()).error;
    };
    expect(await bad({ ...FORECASTER.config, command: "forecaster --port 8000" })).toMatchObject({
      field: "config.command",
      message: expect.stringContaining("{port}"),
    });
    expect((await bad({ ...FORECASTER.config, routes: { forecast: "http://evil/predict" } })).field).toBe(
      "config.routes.forecast",
    );
    expect((await bad({ ...FORECASTER.config, routes: {} })).field).toBe("config.routes");
    expect((await bad({ ...FORECASTER.config, ready_path: "/../etc" })).field).toBe("config.ready_path");
  });
});

describe("a tenant and custom servers", () => {
  test("the decision: no program for tenants unless the operator names it; then only on inferd's port", () => {
    const policy = tenantPolicy();
    const v = checkLaunch(policy, "custom", { command: "forecaster --port {port}" });
    expect(v).toMatchObject({ word: "forecaster", setting: expect.stringContaining("--policy-custom-programs") });
    const allowed = { ...policy, programs: { ...policy.programs, custom: ["forecaster"] } };
    expect(checkLaunch(allowed, "custom", { command: "forecaster --host {host} --port {port}" })).toBeNull();
    expect(checkLaunch(allowed, "custom", { command: "forecaster --port 8000" })?.word).toBe("--port");
    expect(checkLaunch(allowed, "custom", { command: "forecaster --port {port} --weights /etc/shadow" })?.word).toBe(
      "/etc/shadow",
    );
  });

  test("a project key saving a custom server is refused 403 naming the setting; allowed once the operator names the program", async () => {
    const s = await startServing();
    const allowed = await startServing({ INFERD_POLICY_CUSTOM_PROGRAMS: "forecaster" });
    try {
      const save = (on: Serving) =>
        fetch(`${on.url}/api/projects/${on.project}/workloads`, {
          method: "POST",
          headers: { authorization: `Bearer ${on.sdk}`, "content-type": "application/json" },
          body: JSON.stringify(FORECASTER),
        });
      const refused = await save(s);
      expect(refused.status).toBe(403);
      expect((await refused.json()).error).toMatchObject({
        code: "command_not_allowed",
        word: "forecaster",
        setting: expect.stringContaining("--policy-custom-programs"),
      });
      const made = await save(allowed);
      expect(made.status).toBe(201);
      const w = await made.json();
      await allowed.waitState(w.id, "ready", 60_000);
      const r = await allowed.data(w.slug, "/v1/forecast", { body: { series: [0, 1], horizon: 1 } });
      expect((await r.json()).forecast).toEqual([2]);
    } finally {
      await Promise.all([s.stop(), allowed.stop()]);
    }
  });
});

test("on a remote agent: the agent maps the route to the server's path, and refuses the others unasked", async () => {
  const host = await startHost();
  const agent = await joinAgent(host, "far");
  try {
    await host.admin("/admin/projects", { name: "Far", slug: "far" });
    const live = (await (await host.admin("/admin/projects/far/keys", { name: "k", type: "live" })).json()).secret;
    const w = await (
      await host.admin("/admin/projects/far/workloads", { ...FORECASTER, worker_id: agent.workerId })
    ).json();
    await waitFor(
      async () =>
        (await (await host.admin(`/admin/workloads/${w.id}`)).json()).assignments[0]?.state === "ready" || undefined,
      { what: "the remote forecaster ready", timeoutMs: 30_000, detail: agent.output },
    );
    const call = (path: string, body: unknown) =>
      fetch(`${host.url}/endpoint/far/${w.slug}${path}`, {
        method: "POST",
        headers: { authorization: `Bearer ${live}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const r = await call("/v1/forecast", { series: [5, 3], horizon: 2 });
    expect(r.status).toBe(200);
    expect((await r.json()).forecast).toEqual([1, -1]);
    // A job of a kind it does not serve is refused by the agent's map: the job fails with the 404.
    const sub = await call("/jobs", { kind: "embeddings", body: { input: "x" } });
    expect(sub.status).toBe(202);
    const { job_id } = await sub.json();
    const job = await waitFor(
      async () => {
        const j = await (
          await fetch(`${host.url}/endpoint/far/${w.slug}/jobs/${job_id}`, {
            headers: { authorization: `Bearer ${live}` },
          })
        ).json();
        return j.status === "completed" || j.status === "failed" ? j : undefined;
      },
      { what: "the embeddings job done", timeoutMs: 30_000 },
    );
    expect(job.status).toBe("failed");
    expect(JSON.stringify(job)).toContain("404");
  } finally {
    await agent.stop();
    await host.stop();
  }
});
