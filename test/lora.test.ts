/**
 * LoRA adapters served as models (issue 39), end to end: a real `inferd serve` with its local agent,
 * the fake vLLM (test/fixtures/runtime/lora.ts: vLLM 0.11's flags, its runtime load/unload routes,
 * its answers and a load time), adapters made on disk as peft saves them, and the official `openai`
 * client on the project's base URL.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import Anthropic from "@anthropic-ai/sdk";
import { Ollama } from "ollama";
import OpenAI from "openai";
import { writePeftAdapter } from "./fixtures/adapters";
import { cleanup, tempDir, waitFor } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";

let s: Serving;
let dir: string;
let openai: OpenAI;
let base: { id: string; slug: string };

beforeAll(async () => {
  dir = tempDir("adapters");
  s = await startServing({ FAKE_LORA_LOAD_MS: "150" });
  openai = new OpenAI({ baseURL: `${s.url}/endpoint/${s.project}/v1`, apiKey: s.live, maxRetries: 0 });
  base = await s.createWorkload({
    name: "base",
    backend: "vllm",
    model_name: "base-7b",
    config: { command: "vllm serve base-7b --max-cpu-loras 2" },
  });
  await s.waitState(base.id);
}, 120_000);

afterAll(async () => {
  await s?.stop();
  await cleanup();
});

type Adapter = { name: string; state: string; reason: string | null; rank: number | null; base_model: string | null };
const until = <T>(what: string, check: () => Promise<T | undefined>, timeoutMs = 30_000) =>
  waitFor(check, { what, timeoutMs, detail: () => s.output() });
const add = (name: string, source: string) =>
  s.admin(`/admin/workloads/${base.id}/adapters`, { method: "POST", body: { name, source } });
const settled = (name: string) =>
  until(`adapter ${name} checked`, async () => {
    const r = (await (await s.admin(`/admin/workloads/${base.id}/adapters`)).json()) as { adapters: Adapter[] };
    const a = r.adapters.find((x) => x.name === name);
    return a && a.state !== "pulling" ? a : undefined;
  });
const ask = (model: string) =>
  openai.chat.completions.create({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 4 });
/** The fake vLLM's record of requests that used an adapter. */
const used = (name: string) => s.events((e) => e.event === "lora" && e.name === name);

describe("adapters on a vLLM base", () => {
  test("an adapter added at run time is served by name: loaded on its first request, held for the next, no restart", async () => {
    const started = s.events((e) => e.event === "start").length;
    const created = await add("alice", writePeftAdapter(join(dir, "alice"), { base: "org/base-7b", rank: 8 }));
    expect(created.status).toBe(201);
    expect(await created.json()).toMatchObject({ name: "alice", workload_id: base.id });
    expect(await settled("alice")).toMatchObject({ state: "ready", rank: 8, base_model: "org/base-7b" });
    // The runtime restarts once to take LoRA (its flags); no adapter restarts it after that.
    await until("the replica ready with alice pulled", async () => {
      const d = await s.workload(base.id);
      return d.assignments[0]?.state === "ready" && s.events((e) => e.event === "start").length > started
        ? true
        : undefined;
    });
    const argv = s.events((e) => e.event === "start").at(-1)!.argv as string[];
    expect(argv).toEqual(expect.arrayContaining(["--enable-lora", "--max-lora-rank", "16", "--max-cpu-loras", "2"]));

    const first = await ask("alice");
    expect(first.model).toBe("alice");
    expect(first.choices[0].message.content).toBeTruthy();
    expect(used("alice").map((e) => e.loaded)).toEqual([true]);
    // `<base>:<adapter>` names it too.
    await ask("base-7b:alice");
    expect(used("alice").length).toBe(2);
    expect(s.events((e) => e.event === "lora_load" && e.name === "alice").length).toBe(1);

    const bob = await add("bob", writePeftAdapter(join(dir, "bob"), { base: "org/base-7b", rank: 8 }));
    expect(bob.status).toBe(201);
    await settled("bob");
    const restarts = s.events((e) => e.event === "start").length;
    await until("bob answered", async () => ((await ask("bob").catch(() => undefined)) ? true : undefined));
    expect(s.events((e) => e.event === "start").length).toBe(restarts);

    // Listed as models, with their base as parent.
    const models = await openai.models.list();
    const listed = models.data.map((m) => [m.id, (m as unknown as { parent?: string }).parent]);
    expect(listed).toEqual(
      expect.arrayContaining([
        ["alice", "base-7b"],
        ["bob", "base-7b"],
      ]),
    );
  }, 120_000);

  test("past the replica's slots the least recently used adapter is unloaded, then loaded again when asked for", async () => {
    await add("carol", writePeftAdapter(join(dir, "carol"), { base: "org/base-7b", rank: 8 }));
    await settled("carol");
    await until("carol answered", async () => ((await ask("carol").catch(() => undefined)) ? true : undefined));
    // Two slots (--max-cpu-loras 2): alice, used before bob, made room for carol.
    // (vLLM 0.11 only forgets an unloaded name; its CPU cache drops the memory when the next one comes.)
    const unloaded = (name: string) =>
      s.events((e) => e.event === "lora_unload" && e.name === name && e.reason === "unload").length;
    expect([unloaded("alice"), unloaded("bob")]).toEqual([1, 0]);
    const loads = s.events((e) => e.event === "lora_load" && e.name === "alice").length;
    await ask("alice");
    expect(s.events((e) => e.event === "lora_load" && e.name === "alice").length).toBe(loads + 1);
    const metrics = await (await s.admin("/metrics")).text();
    expect(metrics).toMatch(/inferd_lora_requests_total\{workload="[^"]+\/base",loaded="true"\} [1-9]/);
    expect(metrics).toMatch(/inferd_lora_loads_total\{workload="[^"]+\/base"\} [3-9]/);
  }, 120_000);

  test("adapters that do not fit the base are refused with the reason; bad names and engines are 400, taken names 409", async () => {
    expect((await add("wrong", writePeftAdapter(join(dir, "wrong"), { base: "org/other-3b", rank: 8 }))).status).toBe(
      201,
    );
    const wrong = await settled("wrong");
    expect(wrong).toMatchObject({ state: "failed" });
    expect(wrong.reason).toContain("trained on org/other-3b and this workload serves base-7b");
    expect((await add("big", writePeftAdapter(join(dir, "big"), { base: "org/base-7b", rank: 1024 }))).status).toBe(
      201,
    );
    expect((await settled("big")).reason).toContain("rank 1024 is above 512");
    // A failed adapter is no model: asking for it is the contract's 404.
    expect(
      await ask("wrong").then(
        () => 200,
        (e: { status: number }) => e.status,
      ),
    ).toBe(404);

    const bad = await add("no spaces", join(dir, "alice"));
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as { error: { field: string } }).error.field).toBe("name");
    expect((await add("alice", join(dir, "alice"))).status).toBe(409);
    expect((await add("base-7b", join(dir, "alice"))).status).toBe(409);
    const ollama = await s.createWorkload({ name: "oll", backend: "ollama", model_name: "llama3.2" });
    const refused = await s.admin(`/admin/workloads/${ollama.id}/adapters`, {
      method: "POST",
      body: { name: "x", source: join(dir, "alice") },
    });
    expect(refused.status).toBe(400);
    expect(JSON.stringify(await refused.json())).toContain("ADAPTER line in a Modelfile");
  }, 120_000);

  test("a tenant's key adds adapters as data: a path outside the operator's model folders is refused", async () => {
    const api = (path: string, body?: unknown) =>
      fetch(`${s.url}${path}`, {
        method: body ? "POST" : "GET",
        headers: { authorization: `Bearer ${s.sdk}`, "content-type": "application/json" },
        body: body ? JSON.stringify(body) : undefined,
      });
    const refused = await api(`/api/workloads/${base.id}/adapters`, { name: "t1", source: join(dir, "alice") });
    expect(refused.status).toBe(403);
    const err = ((await refused.json()) as { error: { code: string; field: string } }).error;
    expect([err.code, err.field]).toEqual(["command_not_allowed", "source"]);
    const listed = (await (await api(`/api/workloads/${base.id}/adapters`)).json()) as { adapters: { name: string }[] };
    expect(listed.adapters.map((a) => a.name)).toContain("alice");
  }, 60_000);

  test("a removed adapter is no longer served", async () => {
    expect((await s.admin(`/admin/workloads/${base.id}/adapters/bob`, { method: "DELETE" })).status).toBe(204);
    await until("bob gone", async () =>
      (await ask("bob").then(
        () => 200,
        (e: { status: number }) => e.status,
      )) === 404
        ? true
        : undefined,
    );
    expect((await s.admin(`/admin/workloads/${base.id}/adapters/bob`, { method: "DELETE" })).status).toBe(404);
  }, 60_000);

  test("the Messages, Responses and Ollama routes reach an adapter by name as chat does", async () => {
    const projectBase = `${s.url}/endpoint/${s.project}`;
    const before = used("alice").length;
    const anthropic = new Anthropic({ baseURL: projectBase, apiKey: s.live, maxRetries: 0 });
    const message = await anthropic.messages.create({
      model: "alice",
      max_tokens: 4,
      messages: [{ role: "user", content: "hi" }],
    });
    expect(message.content[0]).toMatchObject({ type: "text" });
    // The answer names the adapter (as chat's does), and the runtime was asked for it, not the base.
    expect(message.model).toBe("alice");
    expect(used("alice").length).toBe(before + 1);
    const response = await openai.responses.create({ model: "base-7b:alice", input: "hi", max_output_tokens: 16 });
    expect(response.output_text).toBeTruthy();
    expect(response.model).toBe("alice");
    expect(used("alice").length).toBe(before + 2);
    const ollama = new Ollama({ host: projectBase, headers: { authorization: `Bearer ${s.live}` } });
    const chat = await ollama.chat({ model: "carol", messages: [{ role: "user", content: "hi" }], stream: false });
    expect(chat.message.content).toBeTruthy();
    expect(chat.model).toBe("carol");
    // Ollama's tags list the adapters as /v1/models does.
    const tags = (await ollama.list()).models.map((m) => m.name);
    expect(tags).toEqual(expect.arrayContaining(["alice", "carol"]));
    expect(tags).not.toContain("bob");
    expect(used("carol").at(-1)).toMatchObject({ name: "carol" });
  }, 60_000);
});
