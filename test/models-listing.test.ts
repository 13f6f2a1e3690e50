import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { cleanup, tempDir, waitFor } from "./helpers/proc";
import { writeTinyGguf } from "./fixtures/gguf";
import { startServing, type Serving } from "./helpers/serving";
import { aliasMatches, answering } from "../src/dataplane/target";
import { canServe } from "../src/dataplane/offered";
import type { Workload } from "../src/workloads/service";

/**
 * What the model lists offer, against a real `inferd serve` (fake llama-server): `GET /v1/models`
 * and Ollama's `/api/tags` leave out a workload whose every replica failed, and one the operator
 * stopped, unless a fallback answers for it; alias patterns (`claude-*`) route Claude Code's model
 * names, exact names win over patterns and longer patterns over shorter, and patterns are not listed.
 */
let s: Serving;
let gguf: string;
const project = () => `${s.url}/endpoint/${s.project}`;
const get = async (url: string) => (await fetch(url, { headers: { authorization: `Bearer ${s.live}` } })).json();
const ids = async (base: string) => ((await get(`${base}/v1/models`)).data as { id: string }[]).map((m) => m.id).sort();
const tags = async (base: string) =>
  ((await get(`${base}/api/tags`)).models as { name: string }[]).map((m) => m.name).sort();

/** A chat on the project base URL naming `model`; the answer's status and the model it names. */
async function chat(model: string): Promise<{ status: number; model?: string }> {
  const r = await fetch(`${project()}/v1/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${s.live}`, "content-type": "application/json" },
    body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }] }),
  });
  const body = (await r.json()) as { model?: string };
  return { status: r.status, model: body.model };
}

beforeAll(async () => {
  s = await startServing({ INFERD_MAX_CRASHES: "2" });
  gguf = join(tempDir("gguf"), "tiny.gguf");
  writeTinyGguf(gguf);
  const llama = (name: string, extra: Record<string, unknown> = {}, crash = false) =>
    s.createWorkload({
      name,
      backend: "llamacpp",
      model_name: name,
      config: { command: `${crash ? "env FAKE_CRASH_AT_START=9 " : ""}llama-server -m ${gguf}` },
      ...extra,
    });
  const good = await llama("good", { aliases: ["good-too", "claude-*", "claude-sonnet-exact"] });
  const sonnet = await llama("sonnet", { aliases: ["claude-sonnet-*"] });
  const crashy = await llama("crashy", { aliases: ["crashy-too"] }, true);
  const saved = await llama("saved", {}, true);
  await s.admin(`/admin/workloads/${saved.id}`, { method: "PATCH", body: { fallbacks: ["good"] } });
  const stopped = await llama("stopped");
  await Promise.all([s.waitState(good.id), s.waitState(sonnet.id), s.waitState(stopped.id)]);
  await Promise.all([s.waitState(crashy.id, "failed"), s.waitState(saved.id, "failed")]);
  expect((await s.admin(`/admin/workloads/${stopped.id}/stop`, { method: "POST" })).status).toBeLessThan(300);
  await waitFor(async () => (await s.workload(stopped.id)).paused === true || undefined, { what: "stopped" });
}, 120_000);
afterAll(async () => {
  await s.stop();
  await cleanup();
});

describe("the model lists offer only what would answer", () => {
  test("/v1/models on the project base leaves out failed and stopped workloads, and alias patterns", async () => {
    expect(await ids(project())).toEqual(["claude-sonnet-exact", "good", "good-too", "saved", "sonnet"]);
  });

  test("Ollama's /api/tags says the same", async () => {
    expect(await tags(project())).toEqual(["claude-sonnet-exact", "good", "good-too", "saved", "sonnet"]);
  });

  test("a failed or stopped workload's own base lists nothing; a serving one lists its model", async () => {
    expect(await ids(`${project()}/crashy`)).toEqual([]);
    expect(await ids(`${project()}/stopped`)).toEqual([]);
    expect(await tags(`${project()}/crashy`)).toEqual([]);
    expect(await ids(`${project()}/good`)).toEqual(["claude-sonnet-exact", "good", "good-too"]);
  });

  test("a listed failed workload with a fallback is answered by the fallback", async () => {
    expect(await chat("saved")).toEqual({ status: 200, model: "good" });
  });

  test("canServe: stopped or every replica failed is not; no replica yet (scaled to zero) is", () => {
    expect(canServe({ paused: false }, [])).toBe(true);
    expect(canServe({ paused: false }, [{ state: "failed" }, { state: "starting" }])).toBe(true);
    expect(canServe({ paused: false }, [{ state: "failed" }])).toBe(false);
    expect(canServe({ paused: true }, [{ state: "ready" }])).toBe(false);
  });
});

describe("alias patterns", () => {
  test("claude-* routes Claude Code's model names; longer patterns and exact names win", async () => {
    expect(await chat("claude-opus-4-1-20250805")).toEqual({ status: 200, model: "good" });
    expect(await chat("claude-sonnet-4-5-20250929")).toEqual({ status: 200, model: "sonnet" });
    expect(await chat("claude-sonnet-exact")).toEqual({ status: 200, model: "good" });
    const miss = await chat("gpt-4o");
    expect(miss.status).toBe(404);
  });

  test("a pattern matches whole names only; regex characters in it are literal", () => {
    expect(aliasMatches("claude-*", "claude-3-5-haiku-latest")).toBe(true);
    expect(aliasMatches("claude-*", "my-claude-3")).toBe(false);
    expect(aliasMatches("*-haiku-*", "claude-3-5-haiku-latest")).toBe(true);
    expect(aliasMatches("a.b*", "axb")).toBe(false);
    expect(aliasMatches("a.b*", "a.bc")).toBe(true);
  });

  test("answering: exact before pattern, longer pattern before shorter, ties share the pool", () => {
    const w = (slug: string, aliases: string[]) => ({ slug, model_name: slug, aliases }) as unknown as Workload;
    const a = w("a", ["claude-*"]);
    const b = w("b", ["claude-sonnet-*"]);
    const c = w("c", ["claude-x"]);
    const d = w("d", ["*-sonnet-4"]);
    expect(answering([a, b, c], "claude-sonnet-4").map((x) => x.slug)).toEqual(["b"]);
    expect(answering([a, b, c], "claude-x").map((x) => x.slug)).toEqual(["c"]);
    expect(answering([a, b, c], "claude-opus").map((x) => x.slug)).toEqual(["a"]);
    expect(answering([a, c], "gpt").map((x) => x.slug)).toEqual([]);
    expect(answering([b, d], "claude-sonnet-4").map((x) => x.slug)).toEqual(["b"]);
  });
});
