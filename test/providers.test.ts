/**
 * External-provider workloads (issue 35): an OpenAI-compatible API and Anthropic's API behind the
 * same base URL, keys, limits and metering as local workloads. The providers are loopback HTTPS
 * fakes that follow the APIs' references (test/fixtures/providers.ts); the official `openai` and
 * `@anthropic-ai/sdk` clients call inferd in front of them. The operator's provider key is kept
 * encrypted and never returned; tenants cannot create such workloads.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import OpenAI from "openai";
import Anthropic from "@anthropic-ai/sdk";
import { makeTestPki } from "./fixtures/tls";
import { startFakeProvider, type FakeProvider } from "./fixtures/providers";
import { cleanup, tempDir, waitFor } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";

const OPENAI_KEY = "sk-operator-openai-0001";
const ANTHROPIC_KEY = "sk-ant-operator-0002";
let pki: ReturnType<typeof makeTestPki>;
let openaiApi: FakeProvider;
let anthropicApi: FakeProvider;
let s: Serving;

beforeAll(async () => {
  pki = makeTestPki(tempDir("pki"), ["localhost"]);
  openaiApi = await startFakeProvider({
    api: "openai",
    pki,
    key: OPENAI_KEY,
    models: ["gpt-4o-mini", "text-embedding-3-small"],
  });
  anthropicApi = await startFakeProvider({ api: "anthropic", pki, key: ANTHROPIC_KEY, models: ["claude-sonnet-4-5"] });
  // The providers are on loopback with a private CA: the operator allows that (tests only).
  s = await startServing({ INFERD_ALLOW_PRIVATE_PROVIDERS: "1", NODE_EXTRA_CA_CERTS: pki.caFile });
});
afterAll(async () => {
  await s?.stop();
  await openaiApi?.stop();
  await anthropicApi?.stop();
  await cleanup();
});

const openaiWorkload = (name: string, config: Record<string, unknown> = {}) => ({
  name,
  backend: "openai-compatible",
  model_name: name,
  config: { base_url: `${openaiApi.url}/v1`, model: "gpt-4o-mini", api_key: OPENAI_KEY, ...config },
});

describe("an OpenAI-compatible provider", () => {
  let w: { id: string; slug: string; config?: unknown };
  beforeAll(async () => {
    w = await s.createWorkload(openaiWorkload("hosted"));
  });
  const sdk = () =>
    new OpenAI({ baseURL: `${s.url}/endpoint/${s.project}/${w.slug}/v1`, apiKey: s.live, maxRetries: 0 });

  test("the key is taken out of the config: never returned, sealed at rest", async () => {
    expect(w.config).toEqual({ base_url: `${openaiApi.url}/v1`, model: "gpt-4o-mini" });
    const shown = await (await s.admin(`/admin/workloads/${w.id}`)).text();
    expect(shown).not.toContain(OPENAI_KEY);
    // Not in any file of the data dir in clear (the store, its WAL, the logs).
    const files = readdirSync(s.dataDir, { recursive: true }) as string[];
    for (const f of files) {
      let bytes: Buffer;
      try {
        bytes = readFileSync(join(s.dataDir, f));
      } catch {
        continue;
      }
      expect(bytes.includes(OPENAI_KEY)).toBe(false);
    }
  });

  test("chat through the OpenAI SDK, plain and streamed: the provider's model and the operator's key, usage metered", async () => {
    const answer = await sdk().chat.completions.create({
      model: "hosted",
      messages: [{ role: "user", content: "hello there" }],
    });
    expect(answer.choices[0].message.content).toBe("Provider says: hello there");
    const seen = openaiApi.requests.at(-1)!;
    expect(seen.path).toBe("/v1/chat/completions");
    expect(seen.body?.model).toBe("gpt-4o-mini");
    expect(seen.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`);
    expect(JSON.stringify(seen.headers)).not.toContain(s.live);
    const stream = await sdk().chat.completions.create({
      model: "hosted",
      messages: [{ role: "user", content: "stream it" }],
      stream: true,
    });
    let text = "";
    for await (const c of stream) text += c.choices[0]?.delta?.content ?? "";
    expect(text.trim()).toBe("Provider says: stream it");
    const usage = await waitFor(
      async () => {
        const u = (await s.workload(w.id)).usage;
        return u.requests >= 2 ? u : undefined;
      },
      { what: "the usage recorded" },
    );
    // "Provider says: hello there" and "Provider says: stream it", as the provider counted them.
    expect(usage.output_tokens).toBe(8);
    expect(usage.input_tokens).toBeGreaterThan(0);
  });

  test("/v1/messages is the contract's 501 api_error: the provider does not speak Messages", async () => {
    const anthropic = new Anthropic({
      baseURL: `${s.url}/endpoint/${s.project}/${w.slug}`,
      apiKey: s.live,
      maxRetries: 0,
    });
    const err = await anthropic.messages
      .create({ model: "hosted", max_tokens: 8, messages: [{ role: "user", content: "hi" }] })
      .catch((e) => e);
    expect(err).toBeInstanceOf(Anthropic.APIError);
    expect(err.status).toBe(501);
    expect(err.error).toMatchObject({ type: "error", error: { type: "api_error" } });
    expect(err.error.error.message).toContain("/v1/chat/completions");
  });

  test("its refusal of the key is inferd's 502, its 429 keeps Retry-After, its 5xx is a 502", async () => {
    const r = (await s.createWorkload(openaiWorkload("wrong-key", { api_key: "sk-not-this-one" }))) as { slug: string };
    const call = (slug: string) =>
      s.data(slug, "/v1/chat/completions", { body: { model: slug, messages: [{ role: "user", content: "x" }] } });
    const refused = await call(r.slug);
    expect(refused.status).toBe(502);
    expect((await refused.json()).error).toMatchObject({ code: "provider_refused_key" });
    openaiApi.failNext(429, 1, { "retry-after": "7" });
    const limited = await call(w.slug);
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toBe("7");
    expect((await limited.json()).error.code).toBe("provider_rate_limited");
    openaiApi.failNext(503);
    const down = await call(w.slug);
    expect(down.status).toBe(502);
    expect((await down.json()).error.message).toContain("answered 503");
  });

  test("a provider that does not answer in the workload's timeout is a 502, not a hang", async () => {
    const slow = (await s.createWorkload(openaiWorkload("slow", { timeout_s: 1 }))) as { slug: string };
    openaiApi.hang(true);
    try {
      const r = await s.data(slow.slug, "/v1/chat/completions", {
        body: { model: "slow", messages: [{ role: "user", content: "x" }] },
      });
      expect(r.status).toBe(502);
    } finally {
      openaiApi.hang(false);
    }
  });
});

describe("Anthropic's API", () => {
  let w: { id: string; slug: string };
  beforeAll(async () => {
    w = await s.createWorkload({
      name: "claude",
      backend: "anthropic",
      model_name: "claude",
      config: { base_url: anthropicApi.url, model: "claude-sonnet-4-5", api_key: ANTHROPIC_KEY },
    });
  });

  test("Messages through the Anthropic SDK, plain and streamed, with the operator's x-api-key", async () => {
    const anthropic = new Anthropic({
      baseURL: `${s.url}/endpoint/${s.project}/${w.slug}`,
      apiKey: s.live,
      maxRetries: 0,
    });
    const m = await anthropic.messages.create({
      model: "claude",
      max_tokens: 64,
      messages: [{ role: "user", content: "bonjour" }],
    });
    expect(m.content[0]).toMatchObject({ type: "text", text: "Provider says: bonjour" });
    const seen = anthropicApi.requests.at(-1)!;
    expect(seen.path).toBe("/v1/messages");
    expect(seen.headers["x-api-key"]).toBe(ANTHROPIC_KEY);
    expect(seen.body?.model).toBe("claude-sonnet-4-5");
    const stream = anthropic.messages.stream({
      model: "claude",
      max_tokens: 64,
      messages: [{ role: "user", content: "streamed" }],
    });
    const final = await stream.finalMessage();
    expect((final.content[0] as { text: string }).text.trim()).toBe("Provider says: streamed");
  });

  test("chat completions through the OpenAI SDK reach its OpenAI-compatible endpoint", async () => {
    const openai = new OpenAI({
      baseURL: `${s.url}/endpoint/${s.project}/${w.slug}/v1`,
      apiKey: s.live,
      maxRetries: 0,
    });
    const answer = await openai.chat.completions.create({
      model: "claude",
      messages: [{ role: "user", content: "hey" }],
    });
    expect(answer.choices[0].message.content).toBe("Provider says: hey");
    expect(anthropicApi.requests.at(-1)!.path).toBe("/v1/chat/completions");
  });

  test("its 529 overloaded is a 502; a 429 passes with its Retry-After in the Messages shape", async () => {
    const call = () =>
      s.data(w.slug, "/v1/messages", {
        body: { model: "claude", max_tokens: 8, messages: [{ role: "user", content: "x" }] },
      });
    anthropicApi.failNext(529);
    const over = await call();
    expect(over.status).toBe(502);
    anthropicApi.failNext(429, 1, { "retry-after": "30" });
    const limited = await call();
    expect(limited.status).toBe(429);
    expect(limited.headers.get("retry-after")).toBe("30");
    expect(await limited.json()).toMatchObject({ type: "error", error: { type: "rate_limit_error" } });
  });
});

describe("falling back from a local workload to a provider, and back", () => {
  test("the project base URL tries the local model first, the provider when the local one cannot answer", async () => {
    const ext = (await s.createWorkload(openaiWorkload("spill"))) as { slug: string };
    const local = await s.createWorkload({
      name: "local",
      backend: "vllm",
      model_name: "team-model",
      fallbacks: [ext.slug],
      config: { command: "vllm serve Qwen/Qwen3-0.6B" },
    });
    await s.waitState(local.id, "ready", 60_000);
    const openai = new OpenAI({ baseURL: `${s.url}/endpoint/${s.project}/v1`, apiKey: s.live, maxRetries: 0 });
    const ask = async () =>
      (await openai.chat.completions.create({ model: "team-model", messages: [{ role: "user", content: "who" }] }))
        .choices[0].message.content;
    expect(await ask()).not.toContain("Provider says");
    const before = openaiApi.requests.length;
    // The local replica stops: its requests go to the provider.
    await s.admin(`/admin/workloads/${local.id}`, {
      method: "PATCH",
      body: { execution_policy: "fixed", replicas: 0 } as never,
    });
    await s.admin(`/admin/workloads/${local.id}/stop`, { method: "POST" });
    await waitFor(async () => ((await ask()) ?? "").includes("Provider says") || undefined, {
      what: "the provider answering while the local model is down",
      timeoutMs: 30_000,
    });
    expect(openaiApi.requests.length).toBeGreaterThan(before);
    await s.admin(`/admin/workloads/${local.id}/start`, { method: "POST" });
    await s.waitState(local.id, "ready", 60_000);
    expect(await ask()).not.toContain("Provider says");
  });
});

describe("who may create one, and where it may point", () => {
  test("a tenant's key cannot create or repoint a provider workload (it would spend the operator's key)", async () => {
    const tenant = (path: string, method: string, body: unknown) =>
      fetch(`${s.url}${path}`, {
        method,
        headers: { authorization: `Bearer ${s.sdk}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
    const made = await tenant(`/api/projects/${s.project}/workloads`, "POST", openaiWorkload("mine"));
    expect(made.status).toBe(403);
    expect((await made.json()).error).toMatchObject({ code: "command_not_allowed", field: "backend" });
    const hosted = (await (await s.admin(`/admin/projects/${s.project}/workloads`)).json()).find(
      (x: { slug: string }) => x.slug === "hosted",
    );
    const moved = await tenant(`/api/workloads/${hosted.id}`, "PATCH", {
      config: { base_url: "https://attacker.example/v1", model: "gpt-4o-mini" },
    });
    expect(moved.status).toBe(403);
  });

  test("the base URL follows the webhook rules unless the operator allows private providers; a key is required", async () => {
    const strict = await startServing();
    try {
      const save = async (config: Record<string, unknown>) => {
        const r = await strict.admin(`/admin/projects/${strict.project}/workloads`, {
          body: { name: "p", backend: "openai-compatible", model_name: "p", config },
        });
        expect(r.status).toBe(400);
        return (await r.json()).error;
      };
      expect(await save({ base_url: `${openaiApi.url}/v1`, model: "m", api_key: "k" })).toMatchObject({
        field: "config.base_url",
        message: expect.stringContaining("--allow-private-providers"),
      });
      expect((await save({ base_url: "http://api.example.com/v1", model: "m", api_key: "k" })).field).toBe(
        "config.base_url",
      );
      expect((await save({ base_url: "https://api.example.com/v1", model: "m" })).field).toBe("config.api_key");
    } finally {
      await strict.stop();
    }
  });

  test("deleting the workload wipes its key", async () => {
    const gone = (await s.createWorkload(openaiWorkload("gone"))) as { id: string };
    const { Database } = await import("bun:sqlite");
    const count = () => {
      const db = new Database(join(s.dataDir, "inferd.db"), { readonly: true });
      try {
        return (
          db.query("SELECT count(*) AS n FROM workload_secrets WHERE workload_id = ?").get(gone.id) as { n: number }
        ).n;
      } finally {
        db.close();
      }
    };
    expect(count()).toBe(1);
    expect((await s.admin(`/admin/workloads/${gone.id}`, { method: "DELETE" })).status).toBe(204);
    expect(count()).toBe(0);
  });
});
