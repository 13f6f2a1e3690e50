/**
 * LoRA adapters on SGLang and llama.cpp (issue 39), end to end with each engine's fake
 * (test/fixtures/runtime/lora.ts): SGLang loads adapters while it runs (`/load_lora_adapter`) and a
 * request names its adapter in `lora_path`; llama-server takes adapters only at launch (`--lora`,
 * `--lora-init-without-apply`) and a request picks its own with a `lora: [{id, scale}]` field, so
 * adding one restarts the replica, and one of another architecture is refused before it could stop
 * the base from starting.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import OpenAI from "openai";
import { fixtureEnv } from "./fixtures";
import { writeGgufLora, writePeftAdapter } from "./fixtures/adapters";
import { writeTinyGguf } from "./fixtures/gguf";
import { cleanup, tempDir, waitFor } from "./helpers/proc";
import { startServing, type Serving } from "./helpers/serving";

afterAll(cleanup);

type Adapter = { name: string; state: string; reason: string | null };

/** What each engine's test does with its serving inferd. */
function helpers(s: Serving, workloadId: string) {
  const openai = new OpenAI({ baseURL: `${s.url}/endpoint/${s.project}/v1`, apiKey: s.live, maxRetries: 0 });
  const until = <T>(what: string, check: () => Promise<T | undefined>) =>
    waitFor(check, { what, timeoutMs: 30_000, detail: () => s.output() });
  return {
    add: (name: string, source: string) =>
      s.admin(`/admin/workloads/${workloadId}/adapters`, { method: "POST", body: { name, source } }),
    settled: (name: string) =>
      until(`adapter ${name} checked`, async () => {
        const r = await s.admin(`/admin/workloads/${workloadId}/adapters`);
        const a = ((await r.json()) as { adapters: Adapter[] }).adapters.find((x) => x.name === name);
        return a && a.state !== "pulling" ? a : undefined;
      }),
    answered: (model: string) =>
      until(`${model} answered`, async () =>
        openai.chat.completions
          .create({ model, messages: [{ role: "user", content: "hi" }], max_tokens: 4 })
          .catch(() => undefined),
      ),
    starts: () => s.events((e) => e.event === "start").length,
  };
}

describe("SGLang", () => {
  let s: Serving;
  afterAll(() => s?.stop());

  test("an adapter is loaded at run time and asked for by lora_path; the runtime took SGLang's LoRA flags", async () => {
    s = await startServing({ PATH: fixtureEnv({}, { sglang: true }).PATH, FAKE_LORA_LOAD_MS: "100" });
    const w = await s.createWorkload({
      name: "sg",
      backend: "sglang",
      model_name: "base-7b",
      config: { command: "python3 -m sglang.launch_server --model-path base-7b" },
    });
    await s.waitState(w.id);
    const h = helpers(s, w.id);
    const dir = tempDir("sg-adapters");
    expect((await h.add("sql", writePeftAdapter(join(dir, "sql"), { base: "org/base-7b", rank: 8 }))).status).toBe(201);
    expect(await h.settled("sql")).toMatchObject({ state: "ready" });
    const answer = await h.answered("sql");
    expect(answer.model).toBe("sql");
    const argv = s.events((e) => e.event === "start").at(-1)!.argv as string[];
    expect(argv).toEqual(
      expect.arrayContaining(["--enable-lora", "--max-lora-rank", "16", "--lora-target-modules", "all"]),
    );
    expect(s.events((e) => e.event === "lora" && e.name === "sql").length).toBe(1);
    // A second adapter needs no restart.
    const before = h.starts();
    await h.add("chat", writePeftAdapter(join(dir, "chat"), { base: "org/base-7b", rank: 8 }));
    await h.settled("chat");
    await h.answered("chat");
    expect(h.starts()).toBe(before);
    expect(s.events((e) => e.event === "lora_load").map((e) => e.name)).toEqual(
      expect.arrayContaining(["sql", "chat"]),
    );
  }, 120_000);
});

describe("llama.cpp", () => {
  let s: Serving;
  afterAll(() => s?.stop());

  test("adapters are given at launch and picked per request; another architecture's is refused up front", async () => {
    s = await startServing({});
    const dir = tempDir("llama-adapters");
    const model = join(dir, "tiny.gguf");
    writeTinyGguf(model);
    const w = await s.createWorkload({
      name: "ll",
      backend: "llamacpp",
      model_name: "tiny",
      config: { command: `llama-server -m ${model}` },
    });
    await s.waitState(w.id);
    const h = helpers(s, w.id);
    const before = h.starts();
    const style = writeGgufLora(join(dir, "style.gguf"), { architecture: "llama", rank: 8 });
    expect((await h.add("style", style)).status).toBe(201);
    expect(await h.settled("style")).toMatchObject({ state: "ready" });
    await h.answered("style");
    // Restarted once with the adapter on its command line.
    expect(h.starts()).toBe(before + 1);
    const argv = s.events((e) => e.event === "start").at(-1)!.argv as string[];
    expect(argv).toEqual(expect.arrayContaining(["--lora", "--lora-init-without-apply"]));
    // llama-server knows an adapter by its file: the request's `lora` field applied this one (scale 1).
    expect(s.events((e) => e.event === "lora" && e.name === style).map((e) => e.scale)).toEqual([1]);

    // A PEFT folder, or a GGUF LoRA of another architecture, would stop llama-server from starting: refused.
    await h.add("qwen", writeGgufLora(join(dir, "qwen.gguf"), { architecture: "qwen2", rank: 8 }));
    expect((await h.settled("qwen")).reason).toContain("for the qwen2 architecture and this workload's model is llama");
    await h.add("peft", writePeftAdapter(join(dir, "peft"), { base: "tiny", rank: 8 }));
    expect((await h.settled("peft")).reason).toContain("llama.cpp takes GGUF LoRA adapters");
    expect(h.starts()).toBe(before + 1);
  }, 120_000);
});
