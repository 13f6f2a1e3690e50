/**
 * The second security probe's tenant findings (issue 20): what a tenant (a project's `ik_sdk_`
 * control-plane key) writes into a workload command reaches only its own runtime, its own files and
 * the public hub. Real `inferd serve` with its local agent and the fake runtimes of test/fixtures.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { lookup } from "node:dns/promises";
import { hostname } from "node:os";
import { join } from "node:path";
import { Database } from "bun:sqlite";
import { cleanup, tempDir, waitFor } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";
import { writeTinyGguf } from "./fixtures/gguf";
import { fetchFollowing } from "../agent/models/http";
import { guardedFetch } from "../agent/net/guarded-fetch";
import { AddressRefused, isAllowedAddress } from "../agent/net/address";

let s: Serving;
/** A loopback HTTP service that is not a runtime (stands in for anything else on the machine): counts what reaches it. */
let other: ReturnType<typeof Bun.serve>;
const reached: string[] = [];

beforeAll(async () => {
  other = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (r) => (reached.push(`${r.method} ${new URL(r.url).pathname}`), new Response("GGUF")),
  });
  // Runtimes bind their port only once loaded, as vLLM does after loading its weights: until then
  // another listener on a stolen port is all a health probe can reach.
  s = await startServing({ INFERD_MAX_CRASHES: "1", FAKE_HEALTH_BEFORE_READY: "refuse", FAKE_LOAD_MS: "1500" });
});
afterAll(async () => {
  await s.stop();
  other.stop(true);
  await cleanup();
});

/** Saves a workload as the tenant (the project's sdk key). */
const tenantSave = (body: Record<string, unknown>) =>
  fetch(`${s.url}/api/projects/${s.project}/workloads`, {
    method: "POST",
    headers: { authorization: `Bearer ${s.sdk}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });

describe("a runtime's address is inferd's", () => {
  test("a tenant's --port, --host or --uds is refused with 403 command_not_allowed", async () => {
    for (const command of [
      "vllm serve m --port 8001",
      "vllm serve m --host=0.0.0.0",
      "vllm serve m --uds /tmp/x.sock",
    ]) {
      const r = await tenantSave({ name: "hij", backend: "vllm", model_name: "x", config: { command } });
      expect(r.status).toBe(403);
      const { error } = await r.json();
      expect(error.code).toBe("command_not_allowed");
      expect(error.message).toContain("inferd chooses where a runtime listens");
    }
  });

  test("a runtime pointed at another runtime's port is never ready and never answers with the other's model", async () => {
    const beta = await s.createWorkload({
      name: "beta",
      backend: "vllm",
      model_name: "beta-model",
      config: { command: "vllm serve beta-model" },
    });
    const ready = await s.waitState(beta.id);
    const port = new URL(ready.assignments[0].base_url!).port;
    // The operator may set a port, but a listener that is not the runtime's own never makes it ready.
    const hij = await s.createWorkload({
      name: "hij",
      backend: "vllm",
      model_name: "hij-model",
      config: { command: `vllm serve hij-model --port ${port}` },
    });
    // Asked while its runtime loads: it waits for hij's own runtime, which then finds the port taken.
    const r = await s.data(hij.slug, "/v1/chat/completions", {
      body: { model: "hij-model", messages: [{ role: "user", content: "hi" }] },
    });
    const body = await r.json();
    expect(body.model).not.toBe("beta-model");
    expect(r.status).toBe(503);
    expect(body.error.code).toBe("workload_unavailable");
    const failed = await s.waitState(hij.id, "failed");
    expect(failed.assignments[0].reason).toContain("exited with code 1");
    const log = await (await s.admin(`/admin/workloads/${hij.id}/logs`)).text();
    expect(log).toContain("answers, but from a process this runtime did not start");
    // The other runtime still serves its own workload.
    const b = await s.data(beta.slug, "/v1/chat/completions", {
      body: { messages: [{ role: "user", content: "hi" }] },
    });
    expect((await b.json()).model).toBe("beta-model");
    await s.admin(`/admin/workloads/${hij.id}`, { method: "DELETE" });
  });
});

describe("a runtime's files", () => {
  test("each runtime starts in its own empty working directory under the data dir", async () => {
    const r = await tenantSave({
      name: "cwd",
      backend: "vllm",
      model_name: "cwd-model",
      config: { command: "vllm serve cwd-model --tokenizer etc" },
    });
    expect(r.status).toBe(201);
    const w = await r.json();
    const d = await s.waitState(w.id);
    const start = s.events((e) => e.event === "start" && (e.argv as string[]).includes("cwd-model")).at(-1)!;
    expect(start.cwd).toBe(join(s.dataDir, "run", d.assignments[0].id));
    expect(start.cwd_entries).toEqual([]);
  });
});

describe("model sources", () => {
  const bad = [
    "llama-server -hf bad",
    "llama-server -hf a/b:",
    "llama-server -m hf:nope",
    "llama-server -hf a--b/c",
    "llama-server -mu ftp://example.com/m.gguf",
  ];

  test("a source that does not parse is a 400 validation_error at save naming config.command, for the tenant and the admin alike", async () => {
    for (const command of bad) {
      const tenant = await tenantSave({ name: "bad", backend: "llamacpp", model_name: "x", config: { command } });
      expect(tenant.status).toBe(400);
      expect((await tenant.json()).error).toMatchObject({ code: "validation_error", field: "config.command" });
      const admin = await s.admin(`/admin/projects/${s.project}/workloads`, {
        body: { name: "bad", backend: "llamacpp", model_name: "x", config: { command } },
      });
      expect(admin.status).toBe(400);
    }
  });

  test("a stored row whose source cannot be read is an unknown model: model lists and pulls keep working", async () => {
    const gguf = join(tempDir("local-model"), "tiny.gguf");
    writeTinyGguf(gguf);
    const w = await s.createWorkload({
      name: "stale",
      backend: "llamacpp",
      model_name: "x",
      config: { command: `llama-server -m ${gguf}` },
    });
    // A row written before save-time checks existed (or by hand).
    const db = new Database(join(s.dataDir, "inferd.db"));
    db.query("UPDATE workloads SET config = ? WHERE id = ?").run(
      JSON.stringify({ command: "llama-server -hf bad" }),
      w.id,
    );
    db.close();
    const list = await s.admin("/admin/models");
    expect(list.status).toBe(200);
    const added = await s.admin("/admin/models", { body: { source: gguf } });
    expect([200, 201, 202]).toContain(added.status);
    expect((await s.admin("/admin/models")).status).toBe(200);
    expect((await s.admin(`/admin/workloads/${w.id}`)).status).toBe(200);
    await s.admin(`/admin/workloads/${w.id}`, { method: "DELETE" });
  });
});

describe("model URLs a tenant names", () => {
  test("a loopback, private or link-local URL is refused at save, and nothing is sent to it", async () => {
    reached.length = 0;
    for (const url of [
      `http://127.0.0.1:${other.port}/admin/x.gguf?x=1`,
      `https://127.0.0.1:${other.port}/x.gguf`,
      "https://10.0.0.1/m.gguf",
      "https://169.254.169.254/latest/m.gguf",
      `https://[::ffff:127.0.0.1]:${other.port}/direct.gguf`,
    ]) {
      const r = await tenantSave({
        name: "url",
        backend: "llamacpp",
        model_name: "x",
        config: { command: `llama-server -mu ${url}` },
      });
      expect(r.status).toBe(403);
      const { error } = await r.json();
      expect(error).toMatchObject({ code: "command_not_allowed", field: "config.command" });
      expect(error.message).toContain("--allow-private-model-urls");
    }
    expect(reached).toEqual([]);
  });

  test("a host name that resolves to a private address is refused when the agent pulls, before any request", async () => {
    const name = hostname();
    // This machine's own name resolves to one of its addresses (loopback or LAN), never a public one.
    expect(isAllowedAddress((await lookup(name)).address, false)).toBe(false);
    reached.length = 0;
    const r = await tenantSave({
      name: "byname",
      backend: "llamacpp",
      model_name: "x",
      config: { command: `llama-server -mu https://${name}:${other.port}/x.gguf` },
    });
    expect(r.status).toBe(201);
    const w = await r.json();
    const d = await s.waitState(w.id, "failed");
    expect(d.assignments[0].reason).toContain("a loopback, private or otherwise non-public address");
    expect(reached).toEqual([]);
  });

  test("every redirect hop is judged: a public URL redirecting to loopback is refused before the second request", async () => {
    const asked: string[] = [];
    const base = (async (input: string | URL | Request) => {
      const url = String(input instanceof Request ? input.url : input);
      asked.push(url);
      return new Response(null, { status: 302, headers: { location: `http://127.0.0.1:${other.port}/admin/x.gguf` } });
    }) as typeof fetch;
    const policy = { allowPrivate: false, resolve: async () => [{ address: "93.184.216.34", family: 4 as const }] };
    const follow = fetchFollowing("https://models.example.com/m.gguf", {
      fetch: guardedFetch(policy, "the model URL", base),
    });
    expect(follow).rejects.toBeInstanceOf(AddressRefused);
    await follow.catch(() => 0);
    expect(asked).toEqual(["https://93.184.216.34/m.gguf"]);
  });

  test("flags that open connections of their own are refused to tenants", async () => {
    for (const command of [
      `llama-server -hf o/r:Q8_0 --rpc 127.0.0.1:${other.port}`,
      "vllm serve m --otlp-traces-endpoint http://127.0.0.1:4318",
      "vllm serve m --tool-server 127.0.0.1:8000",
    ]) {
      const backend = command.startsWith("llama") ? "llamacpp" : "vllm";
      const r = await tenantSave({ name: "conn", backend, model_name: "x", config: { command } });
      expect(r.status).toBe(403);
      expect((await r.json()).error.message).toContain("--policy-forbidden-flags");
    }
  });
});

describe("what a tenant reads back", () => {
  test("a live key's 503 carries the reason without the runtime's output or the host's paths", async () => {
    const missing = join(s.dataDir, "models", "missing.gguf");
    const w = await s.createWorkload({
      name: "nofile",
      backend: "llamacpp",
      model_name: "nofile",
      config: { command: `llama-server -m ${missing}` },
    });
    const d = await s.waitState(w.id, "failed");
    // The operator sees the whole reason, paths and output included.
    expect(d.assignments[0].reason).toContain(s.dataDir);
    const r = await s.data(w.slug, "/v1/chat/completions", { body: { messages: [{ role: "user", content: "hi" }] } });
    expect(r.status).toBe(503);
    const { error } = await r.json();
    expect(error.code).toBe("workload_unavailable");
    expect(error.message).toContain("every replica of this workload failed to start");
    expect(error.message).not.toContain(s.dataDir);
    expect(error.message).not.toContain("--- last output ---");
  });
});
